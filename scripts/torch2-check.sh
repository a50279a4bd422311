#!/usr/bin/env bash
# The runtime against PyTorch 2.x, on this machine: GPU hosts build pippy-run
# against their PyTorch 2.x wheel, and this machine's libtorch is Debian 12's
# 1.13. Debian 13 (trixie) packages PyTorch 2.6, so this check builds and runs
# there, in a root of its own:
#
#   bash scripts/torch2-check.sh [BUILD=build] [ROOT=BUILD-torch2]
#
# 1. Makes ROOT/root once: debootstrap of trixie, then python3-torch and
#    libtorch-dev (2.6), libgloo-dev, cmake, ninja and g++ from its archive.
# 2. Makes the GPU bundle from BUILD (scripts/gpu-bundle.sh: executables
#    lowered by this machine's compiler, FlatBuffers' headers, the schema).
# 3. Builds pippy-run against Debian's CUDA libtorch 2.6 (unpacked once into
#    ROOT/root/opt/torch-cuda, beside the CPU one) and the CUDA 13 and NCCL
#    of /usr/local/cuda: the runtime-only configuration a GPU host uses,
#    with PIPPY_TORCH_CUDA, NCCL and CUDA's runtime, compiled and linked.
#    libtorch_cuda's own CUDA 12 libraries and cuDNN are not installed, so
#    the link leaves their symbols to load time and pippy-run is not run.
# 4. Runs runtime/gpu-check.sh --device cpu inside that root, with this
#    source tree mounted read-only: the runtime-only pippy-run is built
#    against libtorch 2.6 (runtime/TorchCompat.h holds the differences) and
#    trains the zoo models against PyTorch 2.6 eager, f32 and bf16.
# 5. Imports the zoo models as PyTorch 2.6 saved them (TorchScript) with this
#    machine's pippy-import (libtorch 1.13), and trains them with pippy-run
#    on one and two ranks against PyTorch 2.6's numbers (compare.py).
#
# The mounts live in a mount namespace of their own (unshare), so they end
# with the check and removing ROOT never reaches the source tree. Needs root
# (chroot and mounts) and Debian's archive; without root or unshare it says
# so and skips. Logs: ROOT/*.log and ROOT/root/logs.
set -euo pipefail

# In the root: the GPU code compiled (where CUDA was mounted), then the checks.
inside() {
  if [ "$1" = cuda ]; then
    echo "== pippy-run against Debian's CUDA libtorch 2.6 and CUDA 13/NCCL (linked, not run)"
    local tc=/opt/torch-cuda/usr
    # --allow-shlib-undefined: libtorch_cuda's own cuBLAS, cuFFT and NVTX
    # are not installed here; pippy's objects must still resolve in full.
    # A cache from another libtorch (an older check) would keep its paths.
    rm -f /build-cuda/CMakeCache.txt
    if ! { cmake -S /src -B /build-cuda -G Ninja -DPIPPY_RUNTIME_ONLY=ON \
      -DCMAKE_BUILD_TYPE=Release -DPIPPY_DEPS_DIR=/bundle/deps \
      -DPIPPY_ENABLE_NCCL=ON -DCMAKE_PREFIX_PATH=$tc \
      -DTorch_DIR=$tc/lib/x86_64-linux-gnu/cmake/Torch -Wno-dev \
      -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined &&
      ninja -C /build-cuda pippy-run; } >/logs/build-cuda.log 2>&1; then
      grep -v 'warning: lib.*needed by' /logs/build-cuda.log | tail -40
      echo "torch2-check: pippy-run does not build against CUDA libtorch 2.6" >&2
      exit 1
    fi
    local needed
    needed=$(readelf -d /build-cuda/bin/pippy-run | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    grep -q -- -DPIPPY_TORCH_CUDA /build-cuda/build.ninja &&
      [[ "$needed" == *libtorch_cuda.so* && "$needed" == *libc10_cuda.so* &&
        "$needed" == *libnccl.so* ]] || {
      echo "torch2-check: pippy-run built without the CUDA libtorch or NCCL (needs: $needed)" >&2
      exit 1
    }
    echo "built with PIPPY_TORCH_CUDA and NCCL; pippy-run needs: $needed"
  else
    echo "== no CUDA with NCCL at /usr/local/cuda here: the GPU build is not checked"
  fi
  local status=0
  OUT=/logs bash /src/runtime/gpu-check.sh --device cpu --bundle /bundle \
    --build /build --skip-speed || status=1
  echo "== modules saved by PyTorch 2.6, with its numbers, for pippy-import"
  rm -rf /modules
  for model in $modules; do
    python3 "/src/test/models/$model.py" "/modules/$model" >/dev/null || status=1
  done
  return $status
}
# The zoo models saved by PyTorch 2.6 (its transformer layers call
# scaled_dot_product_attention, which 1.13 lacks), imported and trained here.
modules="gpt transformer resnet unet"
[ "${1:-}" = --inside ] && { inside "${2:-}"; exit; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
top="${2:-$build-torch2}"
mirror=${PIPPY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=(python3-torch libtorch-dev libgloo-dev cmake ninja-build g++ make)

if [ "$(id -u)" != 0 ] || ! command -v debootstrap >/dev/null ||
  ! unshare --mount --propagation private true 2>/dev/null ||
  ! chroot / true 2>/dev/null; then
  echo "torch2-check: skipped (needs root that may chroot and mount in a namespace of its own, and debootstrap)"
  exit 0
fi
mkdir -p "$top"
top="$(cd "$top" && pwd)"
root="$top/root"
if [ ! -f "$top/root.done" ]; then
  echo "torch2-check: making a Debian 13 root with PyTorch 2.6 in $root (once)"
  start=$(date +%s)
  rm -rf "$root"
  debootstrap --variant=minbase --components=main,contrib trixie "$root" "$mirror" \
    >"$top/debootstrap.log" 2>&1 ||
    { tail -20 "$top/debootstrap.log"; echo "torch2-check: debootstrap failed" >&2; exit 1; }
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive bash -c \
    "apt-get update -q && apt-get install -y -q --no-install-recommends ${packages[*]} && apt-get clean" \
    >"$top/packages.log" 2>&1 ||
    { tail -20 "$top/packages.log"; echo "torch2-check: installing ${packages[*]} failed" >&2; exit 1; }
  touch "$top/root.done"
  echo "torch2-check: root made in $(($(date +%s) - start)) s"
fi
# Debian's CUDA libtorch, unpacked into /opt/torch-cuda rather than
# installed: it conflicts with the CPU one, and its CUDA 12 libraries and
# cuDNN (non-free, partly downloaded from NVIDIA) are not needed to link.
if [ ! -f "$top/torch-cuda.done" ]; then
  echo "torch2-check: unpacking libtorch-cuda 2.6 into $root/opt/torch-cuda (once)"
  chroot "$root" bash -euc 'rm -rf /opt/torch-cuda /tmp/debs && mkdir -p /tmp/debs &&
    cd /tmp/debs && apt-get download -q libtorch-cuda-2.6 libtorch-cuda-dev &&
    for deb in ./*.deb; do dpkg-deb -x "$deb" /opt/torch-cuda; done &&
    rm -rf /tmp/debs' >"$top/torch-cuda.log" 2>&1 ||
    { tail -20 "$top/torch-cuda.log"; echo "torch2-check: unpacking libtorch-cuda failed" >&2; exit 1; }
  touch "$top/torch-cuda.done"
fi

bash "$repo/scripts/gpu-bundle.sh" "$build" "$root/bundle" >"$top/bundle.log" 2>&1 ||
  { cat "$top/bundle.log"; echo "torch2-check: the bundle failed" >&2; exit 1; }
mkdir -p "$root/src" "$root/logs" "$root/usr/local/cuda"
cuda=/usr/local/cuda
[ -f "$cuda/include/nccl.h" ] || cuda=""
# Inside the namespace: the source and CUDA read-only, /proc, and a /dev/shm
# for the ranks' shared-memory rings; then this script again, in the root.
unshare --mount --propagation private bash -euc '
  root=$1 repo=$2 cuda=$3
  bind_ro() { mount --bind "$1" "$2" && mount -o remount,bind,ro "$2"; }
  bind_ro "$repo" "$root/src"
  [ -z "$cuda" ] || bind_ro "$cuda" "$root/usr/local/cuda"
  mount -t proc proc "$root/proc"
  mkdir -p "$root/dev/shm"
  mount -t tmpfs shm "$root/dev/shm"
  exec chroot "$root" bash /src/scripts/torch2-check.sh --inside "${cuda:+cuda}"' \
  torch2-check "$root" "$repo" "$cuda"

# This machine's pippy-import (libtorch 1.13) reads each module PyTorch 2.6
# saved, and pippy-run trains it to PyTorch 2.6's numbers, on one rank and
# on two.
status=0
for model in $modules; do
  for ranks in 1 2; do
    split=()
    [ $ranks = 1 ] || split=("stages=2" --nproc 2 --schedule 1f1b)
    echo "== $model saved by PyTorch 2.6, on $ranks rank(s)"
    /usr/bin/python3 "$repo/test/models/compare.py" "$model" "$root/modules/$model" \
      "$build/bin" --work "$top/compare/$model-$ranks" "${split[@]}" 2>&1 |
      sed 's/^/  /' || status=1
  done
done
[ $status = 0 ] && echo "torch2-check: all checks passed" ||
  echo "torch2-check: some checks FAILED" >&2
exit $status

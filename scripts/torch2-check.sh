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
# 3. Compiles the runtime's GPU code against libtorch 2.6's headers and the
#    CUDA and NCCL of /usr/local/cuda: a runtime-only build with NCCL and
#    PIPPY_TORCH_CUDA (the caching allocator's statistics), whose two
#    generated headers come from Debian's CUDA build (libtorch-cuda-dev).
#    It compiles the library only: there is no CUDA libtorch to link here.
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
    echo "== the GPU code against libtorch 2.6 and CUDA's headers (compiled, not linked)"
    cd /src/runtime
    local files objects=()
    files=$(grep -lE 'PIPPY_(TORCH_CUDA|HAVE_NCCL|HAVE_CUDART)' ./*.cpp | xargs -n1 basename)
    for f in $files; do objects+=("runtime/CMakeFiles/PippyRuntime.dir/$f.o"); done
    if ! { cmake -S /src -B /build-cuda -G Ninja -DPIPPY_RUNTIME_ONLY=ON \
      -DCMAKE_BUILD_TYPE=Release -DPIPPY_DEPS_DIR=/bundle/deps \
      -DPIPPY_ENABLE_NCCL=ON "-DCMAKE_CXX_FLAGS=-DPIPPY_TORCH_CUDA -isystem /opt/torch-cuda" &&
      ninja -C /build-cuda "${objects[@]}"; } >/logs/build-cuda.log 2>&1; then
      tail -40 /logs/build-cuda.log
      echo "torch2-check: the GPU code does not compile against libtorch 2.6" >&2
      exit 1
    fi
    echo "compiled with PIPPY_TORCH_CUDA, NCCL and CUDA's runtime:" $files
  else
    echo "== no CUDA with NCCL at /usr/local/cuda here: the GPU code is not compiled"
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
  # The headers only a CUDA libtorch has, from the package, not installed.
  chroot "$root" bash -euc 'cd /tmp && apt-get download -q libtorch-cuda-dev &&
    dpkg-deb -x libtorch-cuda-dev_*.deb cuda && rm libtorch-cuda-dev_*.deb &&
    cd cuda/usr/include && find . -type f | while read -r f; do
      [ -e "/usr/include/$f" ] || install -D -m 644 "$f" "/opt/torch-cuda/$f"; done &&
    rm -rf /tmp/cuda' >>"$top/packages.log" 2>&1 ||
    { tail -20 "$top/packages.log"; echo "torch2-check: libtorch-cuda-dev's headers failed" >&2; exit 1; }
  touch "$top/root.done"
  echo "torch2-check: root made in $(($(date +%s) - start)) s"
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

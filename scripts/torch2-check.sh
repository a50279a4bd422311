#!/usr/bin/env bash
# The runtime against PyTorch 2.x, on this machine: GPU hosts build pippy-run
# against their PyTorch 2.x wheel, and this machine's libtorch is Debian 12's
# 1.13. Debian packages two PyTorch 2.x releases that bracket a GPU host's:
# 2.6 in Debian 13 (trixie, with a CUDA build in contrib) and the newest one
# in unstable (sid; 2.14.1 when this was written, whose headers need C++20).
# This check builds and runs in a root of each:
#
#   bash scripts/torch2-check.sh [BUILD=build] [TOP=BUILD-torch2]
#
# 1. Makes TOP/trixie and TOP/sid once each: debootstrap, then python3-torch,
#    libtorch-dev, libgloo-dev, cmake, ninja and g++ from that archive. Into
#    trixie it also unpacks Debian's CUDA libtorch 2.6 (libtorch-cuda-2.6
#    and -dev, beside the CPU one, not installed).
# 2. Makes the GPU bundle from BUILD (scripts/gpu-bundle.sh: executables
#    lowered by this machine's compiler, FlatBuffers' headers, the schema).
# 3. trixie: builds pippy-run against the CUDA libtorch 2.6 and the CUDA 13
#    and NCCL of /usr/local/cuda, the runtime-only configuration a GPU host
#    uses, with PIPPY_TORCH_CUDA, NCCL and CUDA's runtime: compiled and
#    linked. libtorch_cuda's own CUDA 12 libraries and cuDNN are not
#    installed, so the link leaves their symbols to load time and this
#    pippy-run is not run.
# 4. sid: runs runtime/gpu-check.sh --device cpu there: the runtime-only
#    pippy-run built against the newest libtorch (runtime/TorchCompat.h
#    holds the differences) trains the zoo models against that PyTorch's
#    eager, f32 and bf16, on one rank and on two.
# 5. Both: the zoo models as that PyTorch saves them (TorchScript), imported
#    with this machine's pippy-import (libtorch 1.13) and trained with
#    pippy-run on one and two ranks against that PyTorch's numbers
#    (compare.py).
#
# The mounts live in a mount namespace of their own (unshare), so they end
# with the check and removing TOP never reaches the source tree. Needs root
# (chroot and mounts) and Debian's archive; without root or unshare it says
# so and skips, and where sid's packages cannot be installed (unstable is so
# at times) it says so and checks trixie alone. Logs: TOP/*.log,
# TOP/compare/*.log and TOP/SUITE/logs; the output ends with each failed
# part and the last lines of its log.
set -euo pipefail

# The zoo models each PyTorch saves (its transformer layers call
# scaled_dot_product_attention, which 1.13 lacks), imported and trained here.
modules="gpt transformer resnet unet"

# In trixie's root: pippy-run against the CUDA libtorch, linked.
cuda_link() {
  echo "== pippy-run against Debian's CUDA libtorch 2.6 and CUDA 13/NCCL (linked, not run)"
  local tc=/opt/torch-cuda/usr needed
  # --allow-shlib-undefined: libtorch_cuda's own cuBLAS, cuFFT and NVTX are
  # not installed here; pippy's objects must still resolve in full. A cache
  # from another libtorch (an older check) would keep its paths.
  rm -f /build-cuda/CMakeCache.txt
  if ! { cmake -S /src -B /build-cuda -G Ninja -DPIPPY_RUNTIME_ONLY=ON \
    -DCMAKE_BUILD_TYPE=Release -DPIPPY_DEPS_DIR=/bundle/deps \
    -DPIPPY_ENABLE_NCCL=ON -DCMAKE_PREFIX_PATH=$tc \
    -DTorch_DIR=$tc/lib/x86_64-linux-gnu/cmake/Torch -Wno-dev \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined &&
    ninja -C /build-cuda pippy-run; } >/logs/build-cuda.log 2>&1; then
    grep -v 'warning: lib.*needed by' /logs/build-cuda.log | tail -40
    echo "torch2-check: pippy-run does not build against CUDA libtorch 2.6" |
      tee -a /logs/build-cuda.log >&2
    return 1
  fi
  needed=$(readelf -d /build-cuda/bin/pippy-run | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  grep -q -- -DPIPPY_TORCH_CUDA /build-cuda/build.ninja &&
    [[ "$needed" == *libtorch_cuda.so* && "$needed" == *libc10_cuda.so* &&
      "$needed" == *libnccl.so* ]] || {
    echo "torch2-check: pippy-run built without the CUDA libtorch or NCCL (needs: $needed)" |
      tee -a /logs/build-cuda.log >&2
    return 1
  }
  echo "built with PIPPY_TORCH_CUDA and NCCL; pippy-run needs: $needed"
}

# Notes a failed part for the summary: SUITE, what failed, and its log. In a
# root, FAILURES is unset and the list is /logs/failed, read afterwards with
# its paths moved under the root.
failed() { echo "$1|$2|$3" >>"${failures:-/logs/failed}"; }

# Each check gpu-check's last line names as FAILED, with its log; or, where
# it names none (its build failed), its output.
gpu_check_failed() {
  local names name
  names=$(tail -1 /logs/gpu-check.out | sed -n 's/^gpu-check: FAILED: \(.*\) (logs: .*/\1/p')
  [ -n "$names" ] || { failed "$1" "runtime/gpu-check.sh --device cpu" /logs/gpu-check.out; return; }
  for name in $names; do
    failed "$1" "gpu-check's $name" "/logs/$name.log"
  done
}

# In a root: SUITE's checks, then its PyTorch saves the zoo models.
inside() {
  local suite=$1 cuda=$2
  if [ "$suite" = trixie ]; then
    if [ -n "$cuda" ]; then
      cuda_link || failed trixie "pippy-run against the CUDA libtorch" /logs/build-cuda.log
    else
      echo "== no CUDA with NCCL at /usr/local/cuda here: the GPU build is not checked"
    fi
  else
    OUT=/logs bash /src/runtime/gpu-check.sh --device cpu --bundle /bundle \
      --build /build --skip-speed 2>&1 | tee /logs/gpu-check.out || gpu_check_failed "$suite"
  fi
  echo "== modules saved by PyTorch $(python3 -c 'import torch; print(torch.__version__)'), with its numbers"
  rm -rf /modules
  for model in $modules; do
    python3 "/src/test/models/$model.py" "/modules/$model" >"/logs/save-$model.log" 2>&1 ||
      failed "$suite" "saving $model" "/logs/save-$model.log"
  done
}
[ "${1:-}" = --inside ] && { inside "$2" "${3:-}"; exit 0; }

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
top="${2:-$build-torch2}"
mirror=${PIPPY_DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=(python3-torch libtorch-dev libgloo-dev cmake ninja-build g++ make)
# A root's commands see only this environment: none of the caller's PATH,
# CUDA_HOME or LIBRARY_PATH, which differ between a session's shell and a CI
# job's (a CUDA libtorch's CMake config found nvcc through PATH alone).
root_env=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root)
# Runs a command in ROOT with that environment (the mounts are run_inside's).
in_root() { local root=$1; shift; env -i "${root_env[@]}" chroot "$root" "$@"; }

# Makes ROOT from SUITE once; returns 1 (with the log's tail) where it fails.
make_root() {
  local suite=$1 root=$2 start
  [ -f "$root.done" ] && return 0
  echo "torch2-check: making a Debian $suite root with its PyTorch in $root (once)"
  start=$(date +%s)
  rm -rf "$root"
  debootstrap --variant=minbase --components=main,contrib "$suite" "$root" \
    "$mirror" >"$root-debootstrap.log" 2>&1 ||
    { tail -20 "$root-debootstrap.log"; echo "torch2-check: debootstrap of $suite failed" >&2; return 1; }
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # A mirror's copy of unstable may be older than its Release's validity.
  in_root "$root" env DEBIAN_FRONTEND=noninteractive bash -c \
    "apt-get -o Acquire::Check-Valid-Until=false update -q &&
     apt-get install -y -q --no-install-recommends ${packages[*]} && apt-get clean" \
    >"$root-packages.log" 2>&1 ||
    { tail -20 "$root-packages.log"; echo "torch2-check: installing ${packages[*]} in $suite failed" >&2; return 1; }
  if [ "$suite" = trixie ]; then
    # Not installed: it conflicts with the CPU libtorch, and its CUDA 12
    # libraries and cuDNN (non-free, partly fetched from NVIDIA) are not
    # needed to link.
    in_root "$root" bash -euc 'rm -rf /opt/torch-cuda /tmp/debs && mkdir /tmp/debs &&
      cd /tmp/debs && apt-get download -q libtorch-cuda-2.6 libtorch-cuda-dev &&
      for deb in ./*.deb; do dpkg-deb -x "$deb" /opt/torch-cuda; done &&
      rm -rf /tmp/debs' >>"$root-packages.log" 2>&1 ||
      { tail -20 "$root-packages.log"; echo "torch2-check: unpacking libtorch-cuda failed" >&2; return 1; }
  fi
  touch "$root.done"
  echo "torch2-check: root made in $(($(date +%s) - start)) s"
}

# SUITE's checks in ROOT: the source and CUDA mounted read-only, /proc, and
# a /dev/shm for the ranks' shared-memory rings; this script again inside.
run_inside() {
  local suite=$1 root=$2 cuda=/usr/local/cuda
  [ -f "$cuda/include/nccl.h" ] || cuda=""
  rm -rf "$root/bundle"
  cp -a "$top/bundle" "$root/bundle"
  mkdir -p "$root/src" "$root/logs" "$root/usr/local/cuda"
  rm -f "$root/logs/failed"
  unshare --mount --propagation private bash -euc '
    root=$1 repo=$2 cuda=$3 suite=$4
    bind_ro() { mount --bind "$1" "$2" && mount -o remount,bind,ro "$2"; }
    bind_ro "$repo" "$root/src"
    [ -z "$cuda" ] || bind_ro "$cuda" "$root/usr/local/cuda"
    mount -t proc proc "$root/proc"
    mkdir -p "$root/dev/shm"
    mount -t tmpfs shm "$root/dev/shm"
    exec env -i "${@:5}" chroot "$root" bash /src/scripts/torch2-check.sh --inside "$suite" "${cuda:+cuda}"' \
    torch2-check "$root" "$repo" "$cuda" "$suite" "${root_env[@]}"
}

# This machine's pippy-import (libtorch 1.13) reads each module ROOT's
# PyTorch saved, and pippy-run trains it to that PyTorch's numbers, on one
# rank and on two.
compare_modules() {
  local suite=$1 root=$2 model ranks split work
  for model in $modules; do
    for ranks in 1 2; do
      split=()
      [ $ranks = 1 ] || split=("stages=2" --nproc 2 --schedule 1f1b)
      work="$top/compare/$suite-$model-$ranks"
      mkdir -p "$work"
      echo "== $model saved by $suite's PyTorch, on $ranks rank(s)"
      /usr/bin/python3 "$repo/test/models/compare.py" "$model" "$root/modules/$model" \
        "$build/bin" --work "$work" "${split[@]}" 2>&1 | tee "$work.log" | sed 's/^/  /' ||
        failed "$suite" "$model saved by its PyTorch, on $ranks rank(s)" "$work.log"
    done
  done
}

# The end of the output names each failed part with its log's last lines
# (a CI log may keep only the end) and the disk left.
summary() {
  local suite what log
  if [ ! -s "$failures" ]; then
    echo "torch2-check: all checks passed"
    return 0
  fi
  echo "torch2-check: these parts FAILED:"
  while IFS='|' read -r suite what log; do
    echo "-- $suite: $what (log: $log)"
    # The first error and the lines after it (CMake gives its reason above
    # a call stack, which is all a log's tail may show), then the tail.
    grep -m1 -A4 -E 'CMake Error|error:|Error:|Traceback' "$log" 2>/dev/null |
      cut -c1-200 | sed 's/^/   | /' || true
    tail -6 "$log" 2>/dev/null | cut -c1-200 | sed 's/^/   /'
  done <"$failures"
  echo "torch2-check: disk free where the roots are: $(df -h --output=avail "$top" | tail -1 | tr -d ' ')"
  echo "torch2-check: some checks FAILED" >&2
  return 1
}

if [ "$(id -u)" != 0 ] || ! command -v debootstrap >/dev/null ||
  ! unshare --mount --propagation private true 2>/dev/null ||
  ! chroot / true 2>/dev/null; then
  echo "torch2-check: skipped (needs root that may chroot and mount in a namespace of its own, and debootstrap)"
  exit 0
fi
mkdir -p "$top"
top="$(cd "$top" && pwd)"
failures="$top/failed"
rm -f "$failures"
# Before trixie and sid had roots of their own, trixie's was TOP/root.
rm -rf "$top/root" "$top/root.done" "$top/torch-cuda.done"
bash "$repo/scripts/gpu-bundle.sh" "$build" "$top/bundle" >"$top/bundle.log" 2>&1 ||
  { cat "$top/bundle.log"; echo "torch2-check: the bundle failed" >&2; exit 1; }

for suite in trixie sid; do
  root="$top/$suite"
  if ! make_root "$suite" "$root"; then
    [ "$suite" = sid ] || exit 1
    echo "torch2-check: sid's root could not be made (above): its newest PyTorch is not checked this time"
    continue
  fi
  run_inside "$suite" "$root" ||
    failed "$suite" "entering its root (unshare, mounts, chroot)" /dev/null
  if [ -f "$root/logs/failed" ]; then
    sed "s#|/logs/#|$root/logs/#" "$root/logs/failed" >>"$failures"
  fi
  compare_modules "$suite" "$root"
done
summary

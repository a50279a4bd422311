#!/usr/bin/env bash
# Builds pippy's NCCL engine and its self-test on a machine with a GPU, CUDA
# and NCCL, without the rest of pippy (no MLIR, no libtorch), and runs it:
# the one-rank checks, a world of two ranks started as two processes (on one
# GPU NCCL must refuse it with an error, on two or more it is a real ring),
# and the timings. NCCL is taken from NCCL_HOME, the CUDA toolkit, the system
# or PyTorch's nvidia-nccl wheel, whichever has it first.
#
#   bash runtime/nccl/device-check.sh [LOG_DIR]
#
# Exits non-zero when the one-rank checks or a two-rank run fail (on one GPU:
# when a rank hangs instead of failing with NCCL's error).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
logs=${1:-${OUT:-/tmp/pippy-nccl-logs}}
mkdir -p "$logs"
work=$(mktemp -d /tmp/pippy-nccl-build-XXXXXX)
trap 'rm -rf "$work"' EXIT

nvidia-smi -L || true
cuda=${CUDA_HOME:-/usr/local/cuda}

find_nccl() {
  local wheel
  wheel=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  for root in ${NCCL_HOME:-} "$cuda" /usr "$wheel"; do
    [ -n "$root" ] && [ -f "$root/include/nccl.h" ] || continue
    for lib in "$root/lib64" "$root/lib" /usr/lib/x86_64-linux-gnu; do
      for so in libnccl.so libnccl.so.2; do
        if [ -f "$lib/$so" ]; then
          echo "$root/include $lib $so"
          return 0
        fi
      done
    done
  done
  return 1
}
read -r nccl_inc nccl_lib nccl_so < <(find_nccl) || {
  echo "device-check: no nccl.h with a libnccl found" >&2
  exit 1
}
echo "device-check: NCCL headers $nccl_inc, library $nccl_lib/$nccl_so"

# nvcc links the CUDA runtime statically; a plain C++ compiler needs it found.
if command -v nvcc >/dev/null || [ -x "$cuda/bin/nvcc" ]; then
  cxx=$(command -v nvcc || echo "$cuda/bin/nvcc")
  flags=(-std=c++17 -O2 -Xcompiler -fexceptions)
  libs=()
else
  cxx=${CXX:-g++}
  flags=(-std=c++17 -O2 -fexceptions -I"$cuda/include")
  libs=(-L"$cuda/lib64" -lcudart -Xlinker -rpath="$cuda/lib64")
fi
selftest=$work/pippy-nccl-selftest
"$cxx" "${flags[@]}" -I"$nccl_inc" "$here/NcclComm.cpp" \
  "$here/nccl-selftest.cpp" -o "$selftest" -L"$nccl_lib" -l:"$nccl_so" \
  -Xlinker -rpath="$nccl_lib" "${libs[@]}" 2>&1 | tee "$logs/build.log"
[ -x "$selftest" ] || { echo "device-check: the build failed" >&2; exit 1; }
export LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

status=0
echo "== one rank"
timeout 120 "$selftest" 2>&1 | tee "$logs/one-rank.log" || status=1

echo "== a world of two ranks, as two processes"
devices=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
store=$(mktemp -d /tmp/pippy-nccl-store-XXXXXX)
for r in 0 1; do
  NCCL_DEBUG=WARN timeout 60 "$selftest" --world 2 --rank $r --store "$store" \
    --timeout-ms 10000 >"$logs/world2-rank$r.log" 2>&1 &
  pids[$r]=$!
done
for r in 0 1; do
  wait "${pids[$r]}"
  rc[$r]=$?
  sed "s/^/[rank$r] /" "$logs/world2-rank$r.log"
  echo "[rank$r] exit ${rc[$r]}"
done
rm -rf "$store"
if [ "$devices" -ge 2 ]; then
  [ "${rc[0]}" -eq 0 ] && [ "${rc[1]}" -eq 0 ] || status=1
else
  # One GPU: each rank must end with an error of its own, not time out (124).
  for r in 0 1; do
    [ "${rc[$r]}" -eq 1 ] || status=1
  done
fi

echo "== timings"
timeout 120 "$selftest" --bench 2>&1 | tee "$logs/bench.log" || status=1

if [ -n "${PIPPY_PREBUILT_SELFTEST:-}" ]; then
  echo "== the self-test built by pippy's CMake build elsewhere"
  ldd "$PIPPY_PREBUILT_SELFTEST" | grep -E 'nccl|cudart'
  timeout 120 "$PIPPY_PREBUILT_SELFTEST" 2>&1 | tee "$logs/prebuilt.log" ||
    status=1
fi
echo "device-check: exit $status"
exit $status

#!/usr/bin/env bash
# Builds pippy-opt with AddressSanitizer and UBSan (build-asan/) and runs the
# parser over every Torch-MLIR sample, the dialect tests, malformed and
# truncated files and truncated bytecode. Prints the number of sanitizer
# reports (expected: 0).
#
# allow_user_poisoning=0: Debian's MLIR libraries are not instrumented, but
# LLVM's allocator headers poison memory when compiled with ASan, so inline
# allocator code from our objects and theirs disagree and ASan reports
# use-after-poison inside MLIRContext's constructor. Manual poisoning is
# switched off; heap overflows, use-after-free and leaks are still caught.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DPIPPY_ENABLE_SANITIZERS=ON >/dev/null
ninja -C build-asan pippy-opt
export ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=1
opt=build-asan/bin/pippy-opt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
reports=0
check() { # runs pippy-opt, counts sanitizer reports, ignores its exit code
  local found
  "$opt" "$@" >/dev/null 2>"$tmp/err" || true
  found=$(grep -c 'Sanitizer\|runtime error' "$tmp/err" || true)
  reports=$((reports + found))
}
for f in test/Samples/Inputs/torch-mlir/*.mlir test/Dialect/Torch/ops.mlir \
         test/Dialect/Torch/types.mlir test/Dialect/Pippy/ops.mlir; do
  check --split-input-file "$f"
  check --split-input-file --mlir-print-op-generic "$f"
done
for f in test/Dialect/Torch/invalid.mlir test/Dialect/Pippy/invalid.mlir; do
  check --split-input-file --verify-diagnostics "$f"
done
/usr/lib/llvm-22/bin/split-file test/Dialect/Torch/bad-input.test "$tmp/bad"
for f in "$tmp"/bad/*.mlir; do check "$f"; done
"$opt" test/Dialect/Pippy/ops.mlir --emit-bytecode -o "$tmp/ops.mlirbc"
size=$(stat -c %s "$tmp/ops.mlirbc")
for ((n = 1; n < size; n += 53)); do
  head -c "$n" "$tmp/ops.mlirbc" >"$tmp/cut.mlirbc"
  check "$tmp/cut.mlirbc"
done
for ((n = 1; n < 4000; n += 61)); do
  head -c "$n" test/Dialect/Torch/ops.mlir >"$tmp/cut.mlir"
  check "$tmp/cut.mlir"
done
echo "sanitizer reports: $reports"
[ "$reports" -eq 0 ]

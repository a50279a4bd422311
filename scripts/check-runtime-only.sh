#!/usr/bin/env bash
# Proves that pippy-run builds and runs without LLVM or MLIR.
#
#   scripts/check-runtime-only.sh [FULL_BUILD=build] [RUNTIME_BUILD=build-runtime-only]
#
# 1. Configures a second build with -DPIPPY_RUNTIME_ONLY=ON and builds it.
# 2. Fails if any compile or link command of that build names LLVM or MLIR
#    (an include folder, a define, a library), or if the pippy-run it made
#    loads a library of either.
# 3. Lowers a two-stage pipeline with the full build's pippy-run and trains
#    it with the runtime-only one, which must print the same losses as the
#    full build running the IR.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
full="$(cd "${1:-$repo/build}" && pwd)"
runtime="${2:-$repo/build-runtime-only}"
jobs="${JOBS:-$(nproc)}"

echo "runtime-only build in $runtime"
mkdir -p "$runtime"
cmake -S "$repo" -B "$runtime" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPIPPY_RUNTIME_ONLY=ON >"$runtime/configure.log" 2>&1 ||
  { cat "$runtime/configure.log"; exit 1; }
cmake --build "$runtime" -j "$jobs" --target pippy-run

# Every command ninja would run for pippy-run: compiles and links.
commands="$runtime/pippy-run.commands"
ninja -C "$runtime" -t commands pippy-run >"$commands"
if grep -inE 'llvm|mlir' "$commands"; then
  echo "FAIL: the runtime-only build names LLVM or MLIR in the commands above" >&2
  exit 1
fi
echo "no compile or link command of pippy-run names LLVM or MLIR ($(wc -l <"$commands") commands)"
if ldd "$runtime/bin/pippy-run" | grep -iE 'llvm|mlir'; then
  echo "FAIL: the runtime-only pippy-run loads LLVM or MLIR" >&2
  exit 1
fi
echo "the runtime-only pippy-run loads no LLVM or MLIR library"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$repo/test/Run/Inputs/make_files.py" "$work"
cp "$repo/test/Run/Inputs/pipe.mlir" "$work/pipe.mlir"
losses() { grep 'step [0-9]*/' | sed 's/samples.*//'; }
"$full/bin/pippy-run" "$work/pipe.mlir" --nproc 2 --schedule 1f1b \
  --microbatches 4 --emit-executables "$work/ex"
"$full/bin/pippy-run" "$work/pipe.mlir" --nproc 2 --schedule 1f1b \
  --microbatches 4 --steps 3 --data "$work/pipe-data.safetensors" | losses >"$work/full.txt"
"$runtime/bin/pippy-run" "$work/ex" --steps 3 \
  --data "$work/pipe-data.safetensors" | losses >"$work/runtime.txt"
if ! diff "$work/full.txt" "$work/runtime.txt"; then
  echo "FAIL: the runtime-only pippy-run trains differently from the full build" >&2
  exit 1
fi
cat "$work/runtime.txt"
# An IR is refused by name: this build cannot lower.
if "$runtime/bin/pippy-run" "$work/pipe.mlir" --nproc 2 \
  --data "$work/pipe-data.safetensors" 2>"$work/ir.err"; then
  echo "FAIL: the runtime-only pippy-run accepted an IR" >&2
  exit 1
fi
cat "$work/ir.err"
echo "runtime-only build: ok"

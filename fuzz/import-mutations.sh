#!/usr/bin/env bash
# Fuzzes pippy-import on mutated TorchScript archives under AddressSanitizer
# and UBSan: builds pippy-import in build-asan/ (as scripts/asan-check.sh
# does), writes the importer tests' small modules as seeds, and imports
# COUNT mutants of them (fuzz/pt_mutations.py says how they are made and
# sorted). Leak checking is off: libtorch keeps global state it never frees.
#
#   fuzz/import-mutations.sh [COUNT=300] [OUT_DIR=/tmp/pippy-fuzz] [SEED=1]
#
# Everything (seeds, findings with their stderr) goes under
# OUT_DIR/import-out. Exits non-zero when a mutant crashed pippy-import, hung
# it, drew a sanitizer report, or failed without one error line.
set -euo pipefail
count="${1:-300}"
out="${2:-/tmp/pippy-fuzz}/import-out"
seed="${3:-1}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir -DPIPPY_ENABLE_SANITIZERS=ON >/dev/null
ninja -C build-asan pippy-import
mkdir -p "$out/seeds"
/usr/bin/python3 test/Import/Inputs/make_models.py "$out/seeds" >/dev/null
/usr/bin/python3 fuzz/pt_mutations.py build-asan/bin/pippy-import "$count" \
  "$out" "$seed" "$out/seeds/tiny.pt=2x8xf32" \
  "$out/seeds/index_shapes.pt=2x4xf32" "$out/seeds/int_offset.pt=2x3xsi64"

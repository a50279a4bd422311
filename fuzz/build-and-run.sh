#!/usr/bin/env bash
# Builds the safetensors libFuzzer target with clang++-14 against Debian's
# LLVM 22, writes a seed corpus of valid files and fuzzes for a while.
#
#   fuzz/build-and-run.sh [SECONDS=60] [OUT_DIR=/tmp/pippy-fuzz]
#
# Everything (binary, corpus, crash reproducers, log) goes under
# OUT_DIR/fuzz-out, outside the repository. Exits non-zero when the fuzzer
# finds a crash.
set -euo pipefail

seconds="${1:-60}"
out_root="${2:-/tmp/pippy-fuzz}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
llvm_prefix="${LLVM_PREFIX:-/usr/lib/llvm-22}"
cxx="${CXX_FUZZ:-clang++-14}"

out="$out_root/fuzz-out"
corpus="$out/corpus"
seeds="$out/seeds"
artifacts="$out/artifacts"
mkdir -p "$corpus" "$seeds" "$artifacts"

# LLVM's defines (_GNU_SOURCE, __STDC_*_MACROS, the C++11 ABI) without
# -std/-fno-exceptions/-I, which are given explicitly.
llvm_defines=()
for flag in $("$llvm_prefix/bin/llvm-config" --cxxflags); do
  case "$flag" in
  -D*) llvm_defines+=("$flag") ;;
  esac
done

echo "building $out/safetensors-fuzzer"
"$cxx" -std=c++17 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  "${llvm_defines[@]}" \
  -I"$repo/include" -isystem "$llvm_prefix/include" \
  "$repo/fuzz/SafetensorsFuzzer.cpp" "$repo/lib/Support/Safetensors.cpp" \
  -L"$llvm_prefix/lib" -lLLVM -Wl,-rpath,"$llvm_prefix/lib" \
  -o "$out/safetensors-fuzzer"

echo "writing seeds to $seeds"
python3 - "$seeds" <<'PY'
import json, os, struct, sys

out = sys.argv[1]

def write(name, tensors, metadata=None, pad=True):
    """tensors: list of (name, dtype, shape, bytes), laid out in order."""
    header, data = {}, b""
    for tname, dtype, shape, raw in tensors:
        header[tname] = {"dtype": dtype, "shape": shape,
                         "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)

write("empty.safetensors", [])
write("metadata-only.safetensors", [], {"format": "pt"})
write("linear.safetensors", [
    ("fc.weight", "F32", [2, 3], bytes(range(24))),
    ("fc.bias", "F32", [3], bytes(range(12))),
], {"format": "pt", "epoch": "3"})
write("scalar-empty.safetensors", [
    ("step", "I64", [], bytes(8)),
    ("empty", "F16", [0], b""),
    ("mask", "BOOL", [2, 2], b"\x01\x00\x00\x01"),
], pad=False)
dtypes = [("BOOL", 1), ("U8", 1), ("I8", 1), ("I16", 2), ("I32", 4),
          ("I64", 8), ("F16", 2), ("BF16", 2), ("F32", 4), ("F64", 8),
          ("F8_E4M3", 1), ("F8_E5M2", 1)]
write("all-dtypes.safetensors",
      [("t_" + d, d, [2], bytes([7]) * (2 * s)) for d, s in dtypes])
write("escapes.safetensors",
      [("a\\u00e9\"b", "U8", [1, 1, 1], b"\x2a")], {"k\n": "v\u2603"})
PY

echo "fuzzing for ${seconds}s"
cd "$out"
set +e
./safetensors-fuzzer "$corpus" "$seeds" \
  -max_len=4096 -max_total_time="$seconds" -print_final_stats=1 \
  -artifact_prefix="$artifacts/" 2>&1 | tee "$out/fuzz.log"
status=${PIPESTATUS[0]}
set -e
if [[ $status -ne 0 ]]; then
  echo "fuzzer failed (exit $status); reproducers in $artifacts" >&2
fi
exit "$status"

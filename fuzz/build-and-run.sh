#!/usr/bin/env bash
# Builds pippy's libFuzzer targets with clang++-14 (no LLVM or MLIR: the
# readers are the runtime's), writes seed corpora of valid files and fuzzes
# each for a while:
#   safetensors  the safetensors reader (weights, data, checkpoints)
#   executable   the stage executable verifier (seeds lowered by pippy-run)
#
#   fuzz/build-and-run.sh [SECONDS=60] [OUT_DIR=/tmp/pippy-fuzz] [TARGET=all]
#
# The executable seeds come from the pippy-run in PIPPY_BIN (build/bin).
# Everything (binaries, corpora, crash reproducers, logs) goes under
# OUT_DIR/fuzz-out, outside the repository. Exits non-zero when a fuzzer
# finds a crash.
set -euo pipefail

seconds="${1:-60}"
out_root="${2:-/tmp/pippy-fuzz}"
target="${3:-all}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${PIPPY_BIN:-$repo/build/bin}"
cxx="${CXX_FUZZ:-clang++-14}"
case "$target" in
all | safetensors | executable) ;;
*) echo "unknown fuzz target '$target'; expected all, safetensors or executable" >&2; exit 2 ;;
esac

out="$out_root/fuzz-out"
mkdir -p "$out/include/pippy/Executable"
flags=(-std=c++17 -g -O1 -fno-omit-frame-pointer
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
  -I"$repo/include" -I"$out/include")

# Fuzzes binary $1 on corpus folder $2 with seeds $3 for $seconds.
fuzz() {
  local name="$1" corpus="$out/$1-corpus" seeds="$2"
  mkdir -p "$corpus" "$out/artifacts"
  echo "fuzzing $name for ${seconds}s"
  set +e
  (cd "$out" && "./$name" "$corpus" "$seeds" -max_len=65536 \
    -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$name-") 2>&1 | tee "$out/$name.log"
  local status=${PIPESTATUS[0]}
  set -e
  if [[ $status -ne 0 ]]; then
    echo "$name failed (exit $status); reproducers in $out/artifacts" >&2
  fi
  return "$status"
}

status=0
if [[ $target != executable ]]; then
seeds="$out/safetensors-seeds"
mkdir -p "$seeds"
echo "building $out/safetensors-fuzzer"
"$cxx" "${flags[@]}" "$repo/fuzz/SafetensorsFuzzer.cpp" \
  "$repo/lib/Support/Safetensors.cpp" \
  "$repo/lib/Support/SafetensorsFormat.cpp" \
  "$repo/lib/Support/SafetensorsSchema.cpp" \
  "$repo/lib/Support/SafetensorsWriter.cpp" "$repo/lib/Support/AtomicFile.cpp" \
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

fuzz safetensors-fuzzer "$seeds" || status=$?
fi

if [[ $target != safetensors ]]; then
seeds="$out/executable-seeds"
mkdir -p "$seeds"
echo "building $out/executable-fuzzer"
flatc --cpp --gen-mutable --scoped-enums -o "$out/include/pippy/Executable" \
  "$repo/include/pippy/Executable/Executable.fbs"
"$cxx" "${flags[@]}" "$repo/fuzz/ExecutableFuzzer.cpp" \
  "$repo/lib/Executable/Verify.cpp" "$repo/lib/Executable/Text.cpp" \
  -o "$out/executable-fuzzer"
echo "lowering seeds into $seeds with $bin/pippy-run"
cp "$repo/test/Run/Inputs/pipe.mlir" "$out/pipe.mlir"
for ranks in 1 2; do
  for schedule in gpipe 1f1b; do
    dir="$out/lowered-$ranks-$schedule"
    "$bin/pippy-run" "$out/pipe.mlir" --nproc "$ranks" --schedule "$schedule" \
      --microbatches 3 --emit-executables "$dir" >/dev/null
    for f in "$dir"/*.pipx; do cp "$f" "$seeds/$ranks-$schedule-$(basename "$f")"; done
  done
done
fuzz executable-fuzzer "$seeds" || status=$?
fi
exit "$status"

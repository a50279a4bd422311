#!/usr/bin/env bash
# Makes gpu-bundle/, what runtime/gpu-check.sh needs on a GPU host that has
# PyTorch, CUDA and NCCL but nothing else of pippy's (no MLIR, no
# FlatBuffers, no network), from this machine's full build:
#
#   bash scripts/gpu-bundle.sh [BUILD=build] [BUNDLE=gpu-bundle]
#
#   deps/include/{flatbuffers,nlohmann}  headers the runtime-only build needs
#   deps/Executable_generated.h          the executable schema, generated
#   MODEL/exe1, MODEL/exe2               stage executables of zoo models
#                                        (gpt, transformer, resnet, unet) on
#                                        1 rank, and split in 2 stages on 2
#                                        ranks (1F1B), for the generator's
#                                        micro-batches
#   gpt-speed/exe1, gpt-speed-small/exe1 the GPT of the speed check
#                                        (bench/gpu/gpt_speed.py), and a
#                                        zoo-sized one for a CPU dry run
#
# Executables hold no weights: the host writes them from the same model
# definitions and seeds (test/models/device_check.py). The bundle is a few
# MB, ignored by git, and travels with the working tree (`carry`).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
bundle="${2:-$repo/gpu-bundle}"
py=/usr/bin/python3
rm -rf "$bundle"
mkdir -p "$bundle/deps/include"
cp -r /usr/include/flatbuffers /usr/include/nlohmann "$bundle/deps/include/"
cp "$build/include/pippy/Executable/Executable_generated.h" "$bundle/deps/"

# A field of a JSON file: field FILE KEY.
field() { "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for model in gpt transformer resnet unet; do
  "$py" "$repo/test/models/$model.py" "$work/$model" >/dev/null
  ref="$work/$model/$model.ref.json"
  shapes=$(field "$ref" input_shapes)
  m=$(field "$ref" microbatches)
  "$build/bin/pippy-import" "$work/$model/$model.pt" --input-shapes "$shapes" \
    -o "$work/$model.mlir" --weights "$work/$model.weights.safetensors"
  "$build/bin/pippy-opt" "$work/$model.mlir" --pippy-split="stages=2" \
    -o "$work/$model.pipe.mlir"
  "$build/bin/pippy-run" "$work/$model.mlir" --microbatches "$m" \
    --emit-executables "$bundle/$model/exe1" >/dev/null
  "$build/bin/pippy-run" "$work/$model.pipe.mlir" --nproc 2 --schedule 1f1b \
    --microbatches "$m" --emit-executables "$bundle/$model/exe2" >/dev/null
  echo "gpu-bundle: $model ($shapes, $m micro-batches): exe1, exe2"
done
# The speed check's GPT (about 100M parameters), and the zoo-sized one its
# dry run on a CPU uses.
for size in "" --small; do
  name=gpt-speed${size:+-small}
  "$py" "$repo/bench/gpu/gpt_speed.py" trace "$work/$name" $size
  spec="$work/$name/gpt-speed.json"
  shapes=$(field "$spec" input_shapes)
  m=$(field "$spec" microbatches)
  "$build/bin/pippy-import" "$work/$name/gpt-speed.pt" --input-shapes "$shapes" \
    -o "$work/$name.mlir" --weights "$work/$name.weights.safetensors"
  "$build/bin/pippy-run" "$work/$name.mlir" --microbatches "$m" \
    --emit-executables "$bundle/$name/exe1" >/dev/null
  rm -f "$work/$name.weights.safetensors"
done
du -sh "$bundle"

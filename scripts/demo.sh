#!/usr/bin/env bash
# `make demo`: import the embedded default model (examples/gpt), then train it
# with pippy-run and show the loss falling.
set -euo pipefail
build=${1:-build}
bin="$build/bin"
out="$build/demo"
mkdir -p "$out"

echo "== generating the default model (examples/gpt/gpt.py)"
/usr/bin/python3 examples/gpt/gpt.py "$out"

echo "== pippy-import"
"$bin/pippy-import" "$out/gpt.pt" --input-shapes 4x16xsi64 \
  -o "$out/gpt.mlir" --weights "$out/gpt.safetensors"
echo "wrote $out/gpt.mlir ($(grep -c 'torch\.aten\.' "$out/gpt.mlir") ATen ops, $(grep -c 'pippy\.param' "$out/gpt.mlir") parameters)"

echo "== pippy-run: 40 steps of 4 micro-batches, AdamW"
"$bin/pippy-run" "$out/gpt.mlir" --nproc 1 --microbatches 4 --steps 40 \
  --data "$out/data.safetensors" --loss cross_entropy --optimizer adamw \
  --lr 0.003 --metrics "$out/metrics.json" \
  --save-weights "$out/gpt.trained.safetensors"

echo "== done: metrics in $out/metrics.json, weights in $out/gpt.trained.safetensors"
echo "(runs in one process for now; splitting into stages and running them on"
echo " several processes with 1F1B is the next milestone)"

#!/usr/bin/env bash
# `make demo`: import the embedded default model (examples/gpt), split it into
# two stages, lower them to stage executables, train them with 1F1B on two
# local processes, and write the trace.
set -euo pipefail
build=${1:-build}
bin="$build/bin"
out="$build/demo"
mkdir -p "$out"
start=$(date +%s)

echo "== generating the default model (examples/gpt/gpt.py)"
/usr/bin/python3 examples/gpt/gpt.py "$out"

echo "== pippy-import"
"$bin/pippy-import" "$out/gpt.pt" --input-shapes 4x16xsi64 \
  -o "$out/gpt.mlir" --weights "$out/gpt.safetensors"
echo "wrote $out/gpt.mlir ($(grep -c 'torch\.aten\.' "$out/gpt.mlir") ATen ops, $(grep -c 'pippy\.param' "$out/gpt.mlir") parameters)"

echo "== pippy-opt --pippy-split: two balanced stages"
"$bin/pippy-opt" "$out/gpt.mlir" --pippy-split="stages=2 policy=balanced" \
  -o "$out/gpt.pipe.mlir"
"$bin/pippy-opt" "$out/gpt.pipe.mlir" --pippy-report -o /dev/null

echo "== lowering: one stage executable per rank (1F1B, 4 micro-batches)"
"$bin/pippy-run" "$out/gpt.pipe.mlir" --nproc 2 --schedule 1f1b \
  --microbatches 4 --emit-executables "$out/exe"
"$bin/pippy-opt" --print-executable "$out/exe/rank0.pipx" | sed -n '2,8p'

echo "== pippy-run: 2 processes from the executables, 40 steps, AdamW"
"$bin/pippy-run" "$out/exe" --steps 40 --data "$out/data.safetensors" \
  --loss cross_entropy --optimizer adamw --lr 0.003 \
  --metrics "$out/metrics.json" --trace "$out/trace.json" \
  --save-weights "$out/gpt.trained.safetensors"

echo "== done in $(( $(date +%s) - start )) s"
echo "metrics:  $out/metrics.json"
echo "trace:    $out/trace.json (open in https://ui.perfetto.dev or chrome://tracing)"
echo "weights:  $out/gpt.trained.safetensors"

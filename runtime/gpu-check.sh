#!/usr/bin/env bash
# The GPU check, in one call on a GPU host (docs/GPU.md):
#
#   bash runtime/gpu-check.sh [--device cuda|cpu] [--bundle DIR] [--build DIR]
#                             [--skip-speed]
#
# 1. Builds the runtime-only pippy-run (no LLVM or MLIR) against this host's
#    PyTorch (Torch_DIR from `python3 -c 'import torch; ...'`), taking
#    FlatBuffers, nlohmann-json and the schema header from the bundle
#    (scripts/gpu-bundle.sh, made on a machine with the full build).
# 2. (a) gpt, transformer, resnet and unet train on one rank on the device,
#        compared with PyTorch eager training the same model there (TF32
#        off, cuDNN deterministic): step-1 gradients, 3 losses and the final
#        weights within 1e-5 of their scale (test/models/device_check.py),
#        and --metrics' busy times within each step's time and equal to the
#        traced compute (CUDA events on a GPU), its GPU memory peak set;
#        gpt and resnet also with --dtype bf16 against PyTorch's autocast
#        (resnet not on PyTorch 1.13's CPU, whose autocast cannot run it);
#    (b) the same on two ranks sharing the device through --backend gloo;
#    (c) with two or more GPUs, gpt on two ranks through NCCL; on any GPU,
#        NCCL's self-test (runtime/nccl/device-check.sh);
#    (d) speed: a GPT of about 100M parameters, pippy-run --nproc 1 against
#        the same micro-batched loop in PyTorch eager (bench/gpu/gpt_speed.py;
#        target at most 1.05x).
#
# --device cpu runs the same checks on a CPU (a dry run of this script on a
# machine without a GPU; the speed check then uses the zoo-sized GPT, and
# (c) is skipped). Logs go to $OUT (or /tmp/pippy-gpu-check). Exits non-zero
# when a check fails.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
device=cuda bundle="$repo/gpu-bundle" build="" speed=1
while [ $# -gt 0 ]; do
  case "$1" in
  --device) device=$2; shift 2 ;;
  --bundle) bundle=$(cd "$2" && pwd); shift 2 ;;
  --build) build=$2; shift 2 ;;
  --skip-speed) speed=0; shift ;;
  *) echo "usage: $0 [--device cuda|cpu] [--bundle DIR] [--build DIR] [--skip-speed]" >&2; exit 2 ;;
  esac
done
build=${build:-$repo/build-gpu-$device}
logs=${OUT:-/tmp/pippy-gpu-check}
mkdir -p "$logs"
[ -d "$bundle/deps" ] || { echo "gpu-check: no bundle at $bundle (bash scripts/gpu-bundle.sh)" >&2; exit 2; }

py=python3
"$py" -c 'import torch' 2>/dev/null || py=/usr/bin/python3
echo "== host"
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

echo "== 1. runtime-only build in $build"
torch_dir=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')/Torch
cmake_args=(-DPIPPY_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release
  -DPIPPY_DEPS_DIR="$bundle/deps")
[ -f "$torch_dir/TorchConfig.cmake" ] && cmake_args+=(-DTorch_DIR="$torch_dir")
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
start=$(date +%s)
if ! { cmake -S "$repo" -B "$build" "${generator[@]}" "${cmake_args[@]}" &&
  cmake --build "$build" -j "$(nproc)" --target pippy-run; } >"$logs/build.log" 2>&1; then
  tail -40 "$logs/build.log"
  echo "gpu-check: the build failed (whole log: $logs/build.log)" >&2
  exit 1
fi
echo "built in $(($(date +%s) - start)) s"
bin="$build/bin"

failed=()
check() { # NAME COMMAND...: runs one check, its log kept
  local name=$1
  shift
  echo "== $name"
  if "$@" >"$logs/$name.log" 2>&1; then
    sed 's/^/  /' "$logs/$name.log"
  else
    sed 's/^/  /' "$logs/$name.log"
    echo "  FAILED: $name"
    failed+=("$name")
  fi
}
models="$repo/test/models"
for model in gpt transformer resnet unet; do
  check "a-$model-1rank" "$py" "$models/device_check.py" "$model" \
    "$bundle/$model/exe1" "$bin" "$logs/work/$model-1" --device "$device"
done
for model in gpt transformer resnet unet; do
  check "b-$model-2ranks-gloo" "$py" "$models/device_check.py" "$model" \
    "$bundle/$model/exe2" "$bin" "$logs/work/$model-2" --device "$device" \
    --backend gloo
done
# bf16: resnet's GroupNorm on bf16 input fails in PyTorch 1.13's CPU
# autocast itself (the reference), so on 1.13 CPUs only gpt is checked.
bf16_models=(gpt resnet)
if [ "$device" = cpu ] && "$py" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) >= 2)'; then
  bf16_models=(gpt)
  echo "== a-resnet-1rank-bf16: skipped: PyTorch 1.13's CPU autocast cannot run GroupNorm on bf16"
fi
for model in "${bf16_models[@]}"; do
  check "a-$model-1rank-bf16" "$py" "$models/device_check.py" "$model" \
    "$bundle/$model/exe1" "$bin" "$logs/work/$model-bf16" --device "$device" \
    --dtype bf16
done
if [ "$device" = cuda ]; then
  gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())')
  if [ "$gpus" -ge 2 ]; then
    check "c-gpt-2ranks-nccl" "$py" "$models/device_check.py" gpt \
      "$bundle/gpt/exe2" "$bin" "$logs/work/gpt-nccl" --device cuda \
      --backend nccl
  else
    echo "== c: one GPU: two NCCL ranks need two GPUs; the self-test runs"
  fi
  check "c-nccl-selftest" bash "$repo/runtime/nccl/device-check.sh" "$logs/nccl"
fi
if [ "$speed" = 1 ]; then
  if [ "$device" = cuda ]; then
    check "d-speed" "$py" "$repo/bench/gpu/gpt_speed.py" run \
      "$bundle/gpt-speed/exe1" "$bin" "$logs/work/speed" --device cuda
  else
    check "d-speed-small" "$py" "$repo/bench/gpu/gpt_speed.py" run \
      "$bundle/gpt-speed-small/exe1" "$bin" "$logs/work/speed" --device cpu \
      --small
  fi
fi
if [ ${#failed[@]} = 0 ]; then
  echo "gpu-check: all checks passed (logs: $logs)"
  exit 0
fi
echo "gpu-check: FAILED: ${failed[*]} (logs: $logs)"
exit 1

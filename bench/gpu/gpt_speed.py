#!/usr/bin/python3
"""The speed check of a GPU host (runtime/gpu-check.sh): a GPT of about 100M
parameters (test/models/gpt.py at vocabulary 8192, width 768, 12 layers of
12 heads, 256 tokens) trained by pippy-run --nproc 1 against the same
micro-batched SGD loop in PyTorch eager on the same device.

  gpt_speed.py trace OUT_DIR [--small]
      (on the machine with the full build) writes gpt-speed.pt and
      gpt-speed.json (input shapes, micro-batches), which
      scripts/gpu-bundle.sh imports and lowers.
  gpt_speed.py run EXE_DIR BIN_DIR WORK_DIR [--device cuda] [--steps N]
      [--small]
      (on the device's host) writes the weights and data from the same seed,
      times eager PyTorch, runs pippy-run on EXE_DIR with --metrics, and
      prints both median step times and their ratio (target: pippy at most
      1.05x eager's).

--small is a GPT of the zoo's size, for a dry run on a CPU.
"""
import json
import os
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "test", "models"))
import common  # noqa: E402
import gpt  # noqa: E402
import st  # noqa: E402
import torch  # noqa: E402

MB, M, WARMUP = 8, 4, 3


def build(small):
    if small:
        gpt.configure(64, 32, 8, 4, 2)
    else:
        gpt.configure(8192, 768, 256, 12, 12)
    common.seed()
    model = gpt.GPT()
    g = common.data_gen()
    rows = MB * M
    seq = torch.randint(0, gpt.VOCAB, (rows, gpt.SEQ + 1), generator=g)
    return model, seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


def trace(out, small):
    os.makedirs(out, exist_ok=True)
    model, x, _ = build(small)
    traced = torch.jit.trace(model, (x[:MB],))
    traced.save(os.path.join(out, "gpt-speed.pt"))
    params = sum(p.numel() for p in model.parameters())
    with open(os.path.join(out, "gpt-speed.json"), "w") as f:
        json.dump({"input_shapes": common.mlir_shape(x[:MB]),
                   "microbatches": M, "parameters": params}, f)
    print(f"gpt-speed: {params / 1e6:.1f}M parameters, micro-batches of "
          f"{MB} x {gpt.SEQ} tokens, {M} per step")


def eager_steps(model, x, y, device, steps):
    """Step times of the loop a user writes: M micro-batches, SGD."""
    model.to(device).train()
    x, y = x.to(device), y.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: 0)
    times = []
    for _ in range(steps):
        sync()
        begin = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for m in range(M):
            sl = slice(m * MB, (m + 1) * MB)
            out = model(x[sl])
            loss = torch.nn.functional.cross_entropy(
                out.flatten(0, -2), y[sl].flatten())
            (loss / M).backward()
        opt.step()
        sync()
        times.append(time.perf_counter() - begin)
    return times[WARMUP:]


def run(exe, bindir, work, device, steps, small):
    os.makedirs(work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model, x, y = build(small)
    weights = os.path.join(work, "gpt-speed.weights.safetensors")
    data = os.path.join(work, "gpt-speed.data.safetensors")
    common.save_weights(weights, model)
    st.save(data, {"input": x, "target": y})
    eager = eager_steps(model, x, y, device, steps)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    metrics = os.path.join(work, "gpt-speed.metrics.json")
    cmd = [os.path.join(bindir, "pippy-run"), exe, "--device",
           device.split(":")[0], "--data", data, "--weights", weights,
           "--steps", str(steps), "--optimizer", "sgd", "--lr", "0.01",
           "--metrics", metrics]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAILED: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        return 1
    pippy = [s["step_time_s"] for s in json.load(open(metrics))["steps"]]
    pippy = pippy[WARMUP:]
    e, p = statistics.median(eager), statistics.median(pippy)
    print(f"speed    eager {e * 1e3:.1f} ms, pippy-run {p * 1e3:.1f} ms per "
          f"step (medians of {len(pippy)} steps after {WARMUP}): "
          f"{p / e:.3f}x eager's (target at most 1.05)")
    print(f"command  {' '.join(cmd)}")
    return 0


def main():
    args = sys.argv[1:]
    small = "--small" in args
    args = [a for a in args if a != "--small"]
    device, steps = "cuda", 20
    for name in ("--device", "--steps"):
        if name in args:
            i = args.index(name)
            if name == "--device":
                device = args[i + 1]
            else:
                steps = int(args[i + 1])
            del args[i:i + 2]
    if args[:1] == ["trace"] and len(args) == 2:
        return trace(args[1], small)
    if args[:1] == ["run"] and len(args) == 4:
        return run(*args[1:], device, steps, small)
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Trains one zoo model with pippy-run on a device, from stage executables
lowered elsewhere, and compares it with PyTorch training the same model on
the same device (runtime/gpu-check.sh runs it on a GPU host; with --device
cpu it runs anywhere).

Usage: device_check.py MODEL EXE_DIR BIN_DIR WORK_DIR [--device cuda|cpu]
                       [--backend gloo|nccl] [--dtype f32|bf16]

The model comes from its generator (MODEL.py's build()), initialised from
its seed, so that no weights travel: the weights file is written here in
pippy-import's layout (its state, aliases and buffers), and the data from
the generator's own. PyTorch trains the eager model on the device with
TF32 off and cuDNN's deterministic algorithms; pippy-run trains EXE_DIR
(lowered for the generator's micro-batches, on as many ranks as it holds
executables) on the same device with --allow-tf32 off. The step-1
gradients, the losses and the final weights are compared as compare.py
compares them (1e-5 of each tensor's scale, losses 1e-5 relative). The
run's --metrics and --trace must agree: each step's busy time per rank is
within its step time and is the sum of its traced compute, and on a GPU the
metrics hold the device's peak memory. Exits non-zero if anything differs.
"""
import glob
import importlib
import json
import os
import re
import subprocess
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import compare  # noqa: E402
import st  # noqa: E402
import torch  # noqa: E402


def flag(args, name, default):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i:i + 2]
        return value
    return default


def write_inputs(name, model, data_inputs, targets, work):
    """The weights in pippy-import's layout and the data, on the host."""
    base = os.path.join(work, name)
    common.save_weights(base + ".weights.safetensors", model)
    data = common._named("input", data_inputs)
    data["target"] = targets
    st.save(base + ".data.safetensors", data)
    return base


def check_times(metrics, trace, device):
    """The busy times of --metrics against the steps' times and the traced
    compute (F, B, I, W and STEP events; on a GPU, times of CUDA events)."""
    compute = re.compile(r"\d+(?:[FBIW]\d+|STEP)$")
    traced = {}
    for e in json.load(open(trace))["traceEvents"]:
        if e.get("ph") == "X" and compute.match(e["name"]):
            key = (e["args"]["step"], e["pid"])
            traced[key] = traced.get(key, 0) + e["dur"] * 1e-6
    ok = True
    for s in metrics["steps"]:
        for r, (busy, wall) in enumerate(zip(s["rank_busy_s"],
                                             s["rank_step_time_s"])):
            summed = traced.get((s["step"], r), 0)
            if not (0 < busy <= wall and abs(summed - busy) <= 1e-6 +
                    1e-3 * busy):
                print(f"MISMATCH step {s['step']} rank {r}: busy {busy:.6f} "
                      f"s, step {wall:.6f} s, traced compute {summed:.6f} s")
                ok = False
    peaks = metrics.get("peak_device_memory_bytes")
    if device == "cuda" and not (peaks and all(p > 0 for p in peaks)):
        print(f"MISMATCH: peak_device_memory_bytes {peaks} on a GPU")
        ok = False
    print(f"times    busy within each step and equal to the traced compute: "
          f"{'yes' if ok else 'NO'}; peak device memory {peaks}, "
          f"activations {metrics['peak_activation_bytes']}")
    return ok


def main():
    args = sys.argv[1:]
    device = flag(args, "--device", "cuda")
    backend = flag(args, "--backend", None)
    dtype = flag(args, "--dtype", "f32")
    if len(args) != 4:
        sys.exit(__doc__)
    name, exe, bindir, work = args
    os.makedirs(work, exist_ok=True)
    nproc = len(glob.glob(os.path.join(exe, "rank*.pipx")))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False

    built = importlib.import_module(name).build()
    model, example_inputs, data_inputs, targets, loss = built[:5]
    kw = built[5] if len(built) > 5 else {}
    microbatches, steps = kw.get("microbatches", 2), kw.get("steps", 3)
    lr = kw.get("lr", 0.05)
    model.train()
    data_inputs = common._as_tuple(data_inputs)
    base = write_inputs(name, model, data_inputs, targets, work)
    mb = common._as_tuple(example_inputs)[0].shape[0]
    model.to(device)
    losses, grads, _ = common.train(model, data_inputs, targets, loss, lr,
                                    microbatches, steps, mb, dtype, device)
    final = common.state(model)

    cmd = [os.path.join(bindir, "pippy-run"), exe, "--device", device,
           "--dtype", dtype, "--weights", base + ".weights.safetensors",
           "--data", base + ".data.safetensors", "--steps", str(steps),
           "--loss", loss, "--optimizer", "sgd", "--lr", str(lr),
           "--timeout", "120", "--metrics", base + ".metrics.json",
           "--trace", base + ".trace.json",
           "--save-grads", base + ".pippy-grads.safetensors",
           "--save-weights", base + ".pippy-final.safetensors"]
    if backend:
        cmd += ["--backend", backend]
    print(f"run      {name} on {nproc} rank{'s' if nproc > 1 else ''}, "
          f"--device {device}" + (f" --backend {backend}" if backend else "")
          + (f" --dtype {dtype}" if dtype != "f32" else ""), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"FAILED: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        return 1
    ok = compare.compare_tensors(
        "grads", compare.load_grads(base + ".pippy-grads.safetensors", nproc),
        grads)
    metrics = json.load(open(base + ".metrics.json"))
    ok &= compare.check_losses([s["loss"] for s in metrics["steps"]], losses)
    ok &= compare.compare_tensors(
        "weights", st.load(base + ".pippy-final.safetensors")[0], final)
    ok &= check_times(metrics, base + ".trace.json", device)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

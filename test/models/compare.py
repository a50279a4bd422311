#!/usr/bin/python3
"""Runs one zoo model through pippy-import and pippy-run --nproc 1 and
compares everything with PyTorch's reference numbers.

Usage: compare.py MODEL ZOO_DIR BIN_DIR [SPLIT_POINTS] [--nproc N]
                  [--schedule gpipe|1f1b] [--torch-mlir] [PIPPY_RUN_FLAG ...]

With --torch-mlir the model comes from MODEL.torch.mlir (Torch-MLIR's text,
see torchmlir.py) through pippy-opt --pippy-lift-params instead of from
MODEL.pt through pippy-import; pippy's parameter names (the resource keys)
are mapped to PyTorch's by MODEL.torch.mlir.names.json, and the literals
that MODEL.torch.mlir.buffers lists (if it exists) are lifted as buffers;
integer buffers stay constants of the IR, so the final weights leave them
out.

With SPLIT_POINTS (`h.1:begin,h.2:begin`), the imported graph IR is split
into a pipeline with pippy-opt (--pippy-annotate-split-points,
--pippy-outline-stages) and the pipeline is run instead; with
`stages=N policy=P` it is split by --pippy-split. With --nproc N the
pipeline runs on N processes (one stage each) with the given schedule, for
inference and training alike; each rank writes its own step-1 gradients
(FILE.rankR), which are merged here (a tied weight's replicas must agree).
Flags after the split points (`--defer-weight-grads`) go to the training
run.

ZOO_DIR holds the generator's files (MODEL.pt, MODEL.data.safetensors,
MODEL.ref.json, ...); BIN_DIR holds pippy-import and pippy-run. Checks, each
printed on one line:
  output  forward output on the first micro-batch (pippy-run --infer)
  grads   every parameter gradient of step 1 (--save-grads)
  losses  the per-step losses of the SGD steps (--metrics)
  weights every weight after the steps (--save-weights)
Tensors match when max|a-b| <= 1e-5 * max|b|, losses within 1e-5 relative
(DESIGN.md). Exits non-zero if anything differs.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
import torch  # noqa: E402

TOL = 1e-5


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stdout.write(f"FAILED: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        sys.exit(1)
    return proc.stdout


def compare_tensors(what, got, ref):
    """Returns the worst relative error and the failing names."""
    bad = []
    worst = 0.0
    if set(got) != set(ref):
        bad.append(f"names differ: missing {sorted(set(ref) - set(got))}, "
                   f"extra {sorted(set(got) - set(ref))}")
    for name in sorted(set(got) & set(ref)):
        a, b = got[name].double(), ref[name].double()
        if a.shape != b.shape:
            bad.append(f"{name}: shape {list(a.shape)} vs {list(b.shape)}")
            continue
        scale = b.abs().max().item() if b.numel() else 0.0
        err = (a - b).abs().max().item() if b.numel() else 0.0
        rel = err / scale if scale > 0 else err
        worst = max(worst, rel)
        if err > TOL * scale:
            bad.append(f"{name}: max|a-b| {err:.3e} > 1e-5 * {scale:.3e}")
    status = "ok" if not bad else "MISMATCH"
    print(f"{what:8s} {status} ({len(ref)} tensors, worst relative error "
          f"{worst:.2e})")
    for line in bad:
        print(f"  {line}")
    return not bad


def load_grads(path, nproc):
    if nproc == 1:
        return st.load(path)[0]
    merged = {}
    for r in range(nproc):
        for name, t in st.load(f"{path}.rank{r}")[0].items():
            if name in merged and not torch.equal(merged[name], t):
                print(f"grads    MISMATCH: ranks disagree on tied '{name}'")
                sys.exit(1)
            merged[name] = t
    return merged


def main():
    args = sys.argv[1:]
    flags = {"--nproc": "1", "--schedule": "1f1b"}
    for flag in flags:
        if flag in args:
            i = args.index(flag)
            flags[flag] = args[i + 1]
            del args[i:i + 2]
    nproc, schedule = int(flags["--nproc"]), flags["--schedule"]
    torch_mlir = "--torch-mlir" in args
    if torch_mlir:
        args.remove("--torch-mlir")
    model, zoo, bindir = args[:3]
    points = args[3] if len(args) > 3 and not args[3].startswith("--") \
        else None
    extra = args[4 if points else 3:]  # more pippy-run flags, for training
    if any(not a.startswith("--") for a in extra[:1]):
        sys.exit(f"compare.py: unexpected argument {extra[0]!r}")
    p = lambda suffix: os.path.join(zoo, model + suffix)
    ref = json.load(open(p(".ref.json")))
    mlir, weights = p(".mlir"), p(".imported.safetensors")
    rename = lambda tensors: tensors  # noqa: E731
    if torch_mlir:
        # Float buffers the lifting cannot recognise are listed beside.
        buffers = (open(p(".torch.mlir.buffers")).read().split()
                   if os.path.exists(p(".torch.mlir.buffers")) else [])
        lift = f"weights={weights}" + (f" buffers={','.join(buffers)}"
                                       if buffers else "")
        run([os.path.join(bindir, "pippy-opt"), p(".torch.mlir"),
             f"--pippy-lift-params={lift}", "-o", mlir])
        names = json.load(open(p(".torch.mlir.names.json")))
        rename = lambda tensors: {names.get(k, k): v  # noqa: E731
                                  for k, v in tensors.items()}
    else:
        run([os.path.join(bindir, "pippy-import"), p(".pt"), "--input-shapes",
             ref["input_shapes"], "-o", mlir, "--weights", weights])
    if points:
        pipe = p(".pipe.mlir")
        passes = ([f"--pippy-split={points}"] if points.startswith("stages=")
                  else [f"--pippy-annotate-split-points=points={points}",
                        "--pippy-outline-stages"])
        run([os.path.join(bindir, "pippy-opt"), mlir] + passes + ["-o", pipe])
        stages = open(pipe).read().count("pippy.stage ")
        print(f"split    {stages} stages at {points}")
        mlir = pipe

    # Forward on the first micro-batch.
    data, _ = st.load(p(".data.safetensors"))
    mb = ref["micro_batch"]
    first = {k: v[:mb] for k, v in data.items() if k.startswith("input")}
    st.save(p(".first.safetensors"), first)
    dist = ["--nproc", str(nproc), "--schedule", schedule, "--timeout", "60"]
    if nproc > 1:
        print(f"run      {nproc} ranks, {schedule}")
    run([os.path.join(bindir, "pippy-run"), mlir, "--infer", "--data",
         p(".first.safetensors"), "--output", p(".out.safetensors")] + dist)
    ok = compare_tensors("output", st.load(p(".out.safetensors"))[0],
                         st.load(p(".ref.safetensors"))[0])

    # Training: step-1 gradients, losses, final weights.
    run([os.path.join(bindir, "pippy-run"), mlir] + dist + [
         "--microbatches", str(ref["microbatches"]), "--steps",
         str(ref["steps"]), "--data", p(".data.safetensors"), "--loss",
         ref["loss"], "--optimizer", "sgd", "--lr", str(ref["lr"]),
         "--metrics", p(".metrics.json"), "--save-grads",
         p(".pippy-grads.safetensors"), "--save-weights",
         p(".pippy-final.safetensors")] + extra)
    ok &= compare_tensors("grads", rename(load_grads(
                              p(".pippy-grads.safetensors"), nproc)),
                          st.load(p(".grads.safetensors"))[0])
    losses = [s["loss"] for s in json.load(open(p(".metrics.json")))["steps"]]
    # Relative error; a reference loss of exactly 0 (a contrastive loss over
    # one-row micro-batches) is compared absolutely.
    worst = max((abs(a - b) / abs(b) if b else abs(a))
                for a, b in zip(losses, ref["losses"]))
    same = len(losses) == len(ref["losses"]) and worst <= TOL
    print(f"losses   {'ok' if same else 'MISMATCH'} "
          f"({', '.join(f'{l:.6f}' for l in losses)}; reference "
          f"{', '.join(f'{l:.6f}' for l in ref['losses'])})")
    ok &= same
    final_ref = st.load(p(".final.safetensors"))[0]
    got = rename(st.load(p(".pippy-final.safetensors"))[0])
    if torch_mlir:
        # Integer literals (an index buffer) stay constants of the IR.
        final_ref = {k: v for k, v in final_ref.items()
                     if k in got or v.is_floating_point()}
    ok &= compare_tensors("weights", got, final_ref)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

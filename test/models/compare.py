#!/usr/bin/python3
"""Runs one zoo model through pippy-import and pippy-run --nproc 1 and
compares everything with PyTorch's reference numbers.

Usage: compare.py MODEL ZOO_DIR BIN_DIR [SPLIT_POINTS] [--nproc N] [--dp D]
                  [--tp T] [--schedule gpipe|1f1b] [--torch-mlir] [--work DIR]
                  [--forward-only] [--tol T] [--loss-tol L]
                  [PIPPY_RUN_FLAG ...]

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
`stages=N policy=P` it is split by --pippy-split, and with `markers` at the
model's own pipe_split() calls (--pippy-outline-stages). With --nproc N the
pipeline runs on N processes (one stage each) with the given schedule, for
inference and training alike; each rank writes its own step-1 gradients
(FILE.rankR), which are merged here (a tied weight's replicas must agree).
Flags after the split points (`--defer-weight-grads`) go to the training
run. With --dp D training runs D data-parallel replicas of the N-rank
pipeline (N x D processes, pippy-run --dp D), each replica its share of
every step's micro-batches; replica 0 writes the gradients, weights and
metrics. With --tp T the IR is sharded first (pippy-opt
--pippy-tensor-parallel="tp=T") and every run has T tensor-parallel ranks per
pipeline rank (N x D x T processes). --forward-only checks the output alone (a model whose training draws
random numbers, which PyTorch's cannot match).

ZOO_DIR holds the generator's files (MODEL.pt, MODEL.data.safetensors,
MODEL.ref.json, ...); BIN_DIR holds pippy-import and pippy-run. What this
script writes (MODEL.mlir, MODEL.pipe.mlir, the run's outputs) goes to
--work DIR, by default its own folder ZOO_DIR/compare, never over a file of
the user's beside the model (a MODEL.mlir imported by hand). matrix.py runs the same checks over the
zoo's rank matrix. Checks, each printed on one line:
  output  forward output on the first micro-batch (pippy-run --infer)
  grads   every parameter gradient of step 1 (--save-grads)
  losses  the per-step losses of the SGD steps (--metrics)
  weights every weight after the steps (--save-weights)
Tensors match when max|a-b| <= 1e-5 * max|b|, losses within 1e-5 relative
(DESIGN.md), with one floor: an error of at most 1e-7 of the largest max|b|
of the comparison (FLOOR x TOL; about one float32 rounding step of it) is no
difference. A tensor whose exact value is zero, such as an attention key's
bias (softmax ignores a shift of every score) and its gradient, holds float32
rounding noise of the terms summed into it; a run that sums them in another
order (data-parallel replicas, tensor-parallel partial sums,
--defer-weight-grads) gets other noise of the same size, 1e-9 to 1e-8 of the
model's scale, not a difference. --tol and --loss-tol loosen the two
bounds where a run rounds differently by design (bfloat16 partial sums of
tensor-parallel ranks). A zoo generated with --dtype bf16 (MODEL.ref.json
"dtype") has PyTorch's autocast numbers, and every run gets pippy-run
--dtype bf16. Exits non-zero if anything differs.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
import torch  # noqa: E402

TOL = 1e-5
FLOOR = 1e-2


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stdout.write(f"FAILED: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        sys.exit(1)
    return proc.stdout


def compare_tensors(what, got, ref, tol=TOL):
    """Returns the worst relative error and the failing names."""
    bad = []
    worst = 0.0
    if set(got) != set(ref):
        bad.append(f"names differ: missing {sorted(set(ref) - set(got))}, "
                   f"extra {sorted(set(got) - set(ref))}")
    largest = max((t.double().abs().max().item() for t in ref.values()
                    if t.numel()), default=0.0)
    for name in sorted(set(got) & set(ref)):
        a, b = got[name].double(), ref[name].double()
        if a.shape != b.shape:
            bad.append(f"{name}: shape {list(a.shape)} vs {list(b.shape)}")
            continue
        scale = max(b.abs().max().item() if b.numel() else 0.0,
                    FLOOR * largest)
        err = (a - b).abs().max().item() if b.numel() else 0.0
        rel = err / scale if scale > 0 else err
        worst = max(worst, rel)
        if err > tol * scale:
            bad.append(f"{name}: max|a-b| {err:.3e} > {tol:g} * {scale:.3e}")
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


class Model:
    """One zoo model's files: inputs read from ZOO_DIR, everything this
    script writes under WORK_DIR (by default ZOO_DIR itself)."""

    def __init__(self, name, zoo, work, bindir, torch_mlir):
        self.name, self.zoo, self.work = name, zoo, work
        self.bindir, self.torch_mlir = bindir, torch_mlir
        self.ref = json.load(open(self.input(".ref.json")))
        self.rename = lambda tensors: tensors  # noqa: E731
        self.tol, self.loss_tol = TOL, TOL
        os.makedirs(work, exist_ok=True)

    def input(self, suffix):
        return os.path.join(self.zoo, self.name + suffix)

    def output(self, suffix):
        return os.path.join(self.work, self.name + suffix)

    def tool(self, name):
        return os.path.join(self.bindir, name)


def import_graph(m):
    """Imports the model (or lifts its Torch-MLIR text) into graph IR;
    returns the IR's path."""
    mlir, weights = m.output(".mlir"), m.output(".imported.safetensors")
    if not m.torch_mlir:
        run([m.tool("pippy-import"), m.input(".pt"), "--input-shapes",
             m.ref["input_shapes"], "-o", mlir, "--weights", weights])
        return mlir
    # Float buffers the lifting cannot recognise are listed beside.
    listed = m.input(".torch.mlir.buffers")
    buffers = open(listed).read().split() if os.path.exists(listed) else []
    lift = f"weights={weights}" + (f" buffers={','.join(buffers)}"
                                   if buffers else "")
    run([m.tool("pippy-opt"), m.input(".torch.mlir"),
         f"--pippy-lift-params={lift}", "-o", mlir])
    names = json.load(open(m.input(".torch.mlir.names.json")))
    m.rename = lambda tensors: {names.get(k, k): v  # noqa: E731
                                for k, v in tensors.items()}
    return mlir


def split(m, mlir, points):
    """Splits graph IR into a pipeline at SPLIT_POINTS; returns its path."""
    pipe = m.output(".pipe.mlir")
    if points == "markers":  # the model's own pipe_split() calls
        passes = ["--pippy-outline-stages"]
    elif points.startswith("stages="):
        passes = [f"--pippy-split={points}"]
    else:
        passes = [f"--pippy-annotate-split-points=points={points}",
                  "--pippy-outline-stages"]
    run([m.tool("pippy-opt"), mlir] + passes + ["-o", pipe])
    stages = open(pipe).read().count("pippy.stage ")
    print(f"split    {stages} stages at {points}")
    return pipe


def check_forward(m, mlir, dist):
    """The forward output on the first micro-batch (pippy-run --infer)."""
    data, _ = st.load(m.input(".data.safetensors"))
    mb = m.ref["micro_batch"]
    first = {k: v[:mb] for k, v in data.items() if k.startswith("input")}
    st.save(m.output(".first.safetensors"), first)
    run([m.tool("pippy-run"), mlir, "--infer", "--data",
         m.output(".first.safetensors"), "--output",
         m.output(".out.safetensors")] + dist)
    return compare_tensors("output", st.load(m.output(".out.safetensors"))[0],
                           st.load(m.input(".ref.safetensors"))[0], m.tol)


def check_losses(losses, reference, tol=TOL):
    # Relative error; a reference loss of exactly 0 (a contrastive loss over
    # one-row micro-batches) is compared absolutely.
    worst = max((abs(a - b) / abs(b) if b else abs(a))
                for a, b in zip(losses, reference))
    same = len(losses) == len(reference) and worst <= tol
    print(f"losses   {'ok' if same else 'MISMATCH'} "
          f"({', '.join(f'{l:.6f}' for l in losses)}; reference "
          f"{', '.join(f'{l:.6f}' for l in reference)})")
    return same


def check_training(m, mlir, dist, nproc, extra):
    """Step-1 gradients, losses and final weights of the SGD steps."""
    ref = m.ref
    run([m.tool("pippy-run"), mlir] + dist + [
         "--microbatches", str(ref["microbatches"]), "--steps",
         str(ref["steps"]), "--data", m.input(".data.safetensors"), "--loss",
         ref["loss"], "--optimizer", "sgd", "--lr", str(ref["lr"]),
         "--metrics", m.output(".metrics.json"), "--save-grads",
         m.output(".pippy-grads.safetensors"), "--save-weights",
         m.output(".pippy-final.safetensors")] + extra)
    ok = compare_tensors("grads", m.rename(load_grads(
                             m.output(".pippy-grads.safetensors"), nproc)),
                         st.load(m.input(".grads.safetensors"))[0], m.tol)
    metrics = json.load(open(m.output(".metrics.json")))
    ok &= check_losses([s["loss"] for s in metrics["steps"]], ref["losses"],
                       m.loss_tol)
    final_ref = st.load(m.input(".final.safetensors"))[0]
    got = m.rename(st.load(m.output(".pippy-final.safetensors"))[0])
    if m.torch_mlir:
        # Integer literals (an index buffer) stay constants of the IR.
        final_ref = {k: v for k, v in final_ref.items()
                     if k in got or v.is_floating_point()}
    return compare_tensors("weights", got, final_ref, m.tol) and ok


def dist_flags(nproc, schedule, dtype="f32"):
    """pippy-run's flags for a run on nproc ranks (with the reference's
    precision)."""
    return ["--nproc", str(nproc), "--schedule", schedule, "--timeout", "60",
            "--dtype", dtype]


def shard(m, mlir, tp):
    """Shards the IR's linear pairs over tp ranks; returns its path."""
    sharded = m.output(".tp.mlir")
    run([m.tool("pippy-opt"), mlir, f"--pippy-tensor-parallel=tp={tp}", "-o",
         sharded])
    roles = {"column": 0, "row": 0, "vocabulary": 0, "replicated": 0}
    for line in open(sharded):
        for role in roles:
            roles[role] += line.count(f'pippy.tensor_parallel = "{role}')
    print(f"sharded  {roles['column']} column, {roles['row']} row, "
          f"{roles['vocabulary']} vocabulary, {roles['replicated']} "
          f"replicated layers")
    return sharded


def check_run(m, mlir, nproc, schedule, extra, dp=1, tp=1):
    """Runs MLIR (graph IR or a pipeline) and compares it with PyTorch."""
    tensor = ["--tp", str(tp)] if tp > 1 else []
    dtype = m.ref.get("dtype", "f32")
    dist = dist_flags(nproc * tp, schedule, dtype) + tensor
    if nproc * tp > 1:
        print(f"run      {nproc} ranks" +
              (f" x {tp} tensor-parallel" if tp > 1 else "") +
              f", {schedule}")
    ok = check_forward(m, mlir, dist)
    if dp > 1:
        print(f"run      {dp} replicas of {nproc} ranks, {schedule}")
        dist = dist_flags(nproc * dp * tp, schedule, dtype) + \
            ["--dp", str(dp)] + tensor
    return check_training(m, mlir, dist, nproc, extra) and ok


def main():
    args = sys.argv[1:]
    flags = {"--nproc": "1", "--dp": "1", "--tp": "1", "--schedule": "1f1b",
             "--work": None, "--tol": str(TOL), "--loss-tol": str(TOL)}
    for flag in flags:
        if flag in args:
            i = args.index(flag)
            flags[flag] = args[i + 1]
            del args[i:i + 2]
    switches = {s: s in args for s in ("--torch-mlir", "--forward-only")}
    args = [a for a in args if a not in switches]
    torch_mlir = switches["--torch-mlir"]
    name, zoo, bindir = args[:3]
    points = args[3] if len(args) > 3 and not args[3].startswith("--") \
        else None
    extra = args[4 if points else 3:]  # more pippy-run flags, for training
    if any(not a.startswith("--") for a in extra[:1]):
        sys.exit(f"compare.py: unexpected argument {extra[0]!r}")
    work = flags["--work"] or os.path.join(zoo, "compare")
    m = Model(name, zoo, work, bindir, torch_mlir)
    m.tol, m.loss_tol = float(flags["--tol"]), float(flags["--loss-tol"])
    mlir = import_graph(m)
    if points:
        mlir = split(m, mlir, points)
    nproc, tp = int(flags["--nproc"]), int(flags["--tp"])
    if tp > 1:
        mlir = shard(m, mlir, tp)
    if switches["--forward-only"]:
        ok = check_forward(m, mlir, dist_flags(nproc, flags["--schedule"],
                                               m.ref.get("dtype", "f32")))
    else:
        ok = check_run(m, mlir, nproc, flags["--schedule"], extra,
                       int(flags["--dp"]), tp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

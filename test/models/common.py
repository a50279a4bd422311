"""Shared code of the model-zoo generators (see README.md for the semantics).

Each generator script does, in this order:
    torch.manual_seed(0)          # before building the model (common.seed())
    model = Model()               # deterministic init from the seed above
    data  = ...                   # from a separate torch.Generator (data_gen())
    generate(name, model, example_inputs, data_inputs, targets, loss, out_dir)

Models compared with PyTorch must be deterministic in train mode: no
dropout (or p=0); the zoos' --real-rates models and dropnet, run under
pippy-run --seed, are compared with each other instead. BatchNorm
trains with batch statistics per micro-batch (bnnet); the reference output
of the first micro-batch is eval mode's, as pippy-run --infer computes it.
Floats are float32 except in mlp64 (float64); integer inputs and targets are
int64. Any dtype pippy names (common._MLIR_DTYPES) is accepted.
"""
import contextlib
import ctypes
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

# One intra-op thread, in OpenMP and in OpenBLAS (which torch.set_num_threads
# leaves alone), as each pippy-run rank has: deterministic reductions that
# sum in the same order on both sides (a BatchNorm over a 1x1 feature map
# amplifies the last bit into visible differences).
torch.set_num_threads(1)
try:
    ctypes.CDLL("libopenblas.so.0").openblas_set_num_threads(1)
except (OSError, AttributeError):
    pass  # another BLAS: torch.set_num_threads covers it

_MLIR_DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int64: "si64",
    torch.int32: "si32",
    torch.int16: "si16",
    torch.int8: "si8",
    torch.uint8: "ui8",
    torch.bool: "i1",
}

LOSSES = ("cross_entropy", "mse")


def seed():
    """Seed the global RNG; call right before building the model."""
    torch.manual_seed(0)


def data_gen(s=1):
    """A generator for data, independent of the model-init RNG stream."""
    g = torch.Generator()
    g.manual_seed(s)
    return g


def mlir_shape(t):
    """MLIR-style shape string: "4x32xf32"; a 0-d tensor gives "f32"."""
    return "x".join([str(d) for d in t.shape] + [_MLIR_DTYPES[t.dtype]])


def compute_loss(loss, out, target):
    """Loss of one micro-batch (mean over its elements). With several
    outputs the loss is taken on the first (depth first through nested
    tuples), as pippy-run does."""
    out = _as_tuple(out)[0]
    if loss == "cross_entropy":
        return F.cross_entropy(out.flatten(0, -2), target.flatten())
    if loss == "mse":
        return F.mse_loss(out, target)
    raise ValueError("unknown loss %r" % (loss,))


def _as_tuple(x):
    """The tensors of an output, nested tuples flattened depth first (as
    pippy-import flattens them)."""
    if not isinstance(x, (tuple, list)):
        return (x,)
    return tuple(t for e in x for t in _as_tuple(e))


def _detached(x):
    """Tensors, nested in tuples and lists as they may be, detached."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    if isinstance(x, (tuple, list)):
        return type(x)(_detached(v) for v in x)
    return x


def _named(prefix, xs):
    xs = _as_tuple(xs)
    if len(xs) == 1:
        return {prefix: xs[0]}
    return {"%s.%d" % (prefix, i): x for i, x in enumerate(xs)}


def aliases(model):
    """{alias_name: first_name} for every parameter/buffer reachable under
    more than one name (first_name = the name named_parameters()/
    named_buffers() reports). torch 1.13 has no remove_duplicate= on
    named_parameters, so walk every module occurrence by hand."""
    first = {}
    for n, p in model.named_parameters():
        first[id(p)] = n
    for n, b in model.named_buffers():
        first.setdefault(id(b), n)
    out = {}
    for mname, mod in model.named_modules(remove_duplicate=False):
        for kind in (mod._parameters, mod._buffers):
            for pname, t in kind.items():
                if t is None:
                    continue
                full = mname + "." + pname if mname else pname
                if full != first[id(t)]:
                    out[full] = first[id(t)]
    return out


def state(model):
    """Parameters then buffers, first names only, detached copies (on the
    host)."""
    d = {}
    for n, p in model.named_parameters():
        d[n] = p.detach().cpu().clone()
    for n, b in model.named_buffers():
        d[n] = b.detach().cpu().clone()
    return d


def _check_dtypes(tensors, what):
    for t in tensors:
        if t.dtype not in _MLIR_DTYPES:
            raise TypeError("%s: tensors of dtype %s have no pippy dtype" % (what, t.dtype))


def _precision(dtype, device="cpu"):
    """The context a forward runs in: nothing for f32; for bf16 PyTorch's
    autocast, as pippy-run --dtype bf16 runs its forwards."""
    if dtype == "f32":
        return contextlib.nullcontext()
    assert dtype == "bf16", dtype
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def rows_of(data_inputs, targets, start, n):
    """`n` rows of the data from `start`, wrapping at its end, as pippy-run
    reads --data."""
    idx = (torch.arange(n) + start) % targets.shape[0]
    return (tuple(d.index_select(0, idx) for d in data_inputs),
            targets.index_select(0, idx))


def save_weights(path, model):
    """The model's weights in pippy-import's layout: its state, with the
    aliases of tied weights and the names of its buffers."""
    st.save(path, state(model),
            {"aliases": json.dumps(aliases(model), sort_keys=True),
             "buffers": json.dumps([n for n, _ in model.named_buffers()])})


def train(model, data_inputs, targets, loss, lr, microbatches, steps, mb,
          dtype="f32", device="cpu"):
    """The reference training: SGD, step loss = mean over micro-batches of
    the mean loss, each micro-batch's forward (and loss) under `dtype`'s
    precision, on `device` (the rows are moved there).
    Returns the step losses and the step-1 gradients (on the host, with
    the names of parameters that got none)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses, grads, unused = [], {}, []
    for k in range(steps):
        opt.zero_grad()
        total = 0.0
        xs, ys = rows_of(data_inputs, targets, k * microbatches * mb,
                         microbatches * mb)
        xs, ys = tuple(x.to(device) for x in xs), ys.to(device)
        for m in range(microbatches):
            sl = slice(m * mb, (m + 1) * mb)
            with _precision(dtype, device):
                out = model(*[x[sl] for x in xs])
                lm = compute_loss(loss, out, ys[sl])
            (lm / microbatches).backward()
            # The step loss is summed in double, as pippy-run reports it
            # (in bfloat16 the sum itself would round).
            total = total + float(lm) / microbatches
        losses.append(total)
        if k == 0:
            for n, p in model.named_parameters():
                if p.grad is None:
                    unused.append(n)
                    grads[n] = torch.zeros_like(p).cpu()
                else:
                    # Embedding(sparse=True) has a sparse gradient: saved
                    # dense, as pippy-run trains it.
                    grads[n] = p.grad.detach().to_dense().cpu().clone()
        opt.step()
    return losses, grads, unused


def generate(name, model, example_inputs, data_inputs, targets, loss, out_dir,
             lr=0.05, microbatches=2, steps=3, traced_model=None, dtype="f32"):
    """Write the zoo files for one model into out_dir (see README.md).

    example_inputs: tuple of tensors at micro-batch size (dim 0 = mb).
    data_inputs:    tuple of tensors (dim 0 = rows), targets: tensor, same rows.
    traced_model:   the module to trace, if not `model` itself (a copy of it
                    made traceable); PyTorch's reference runs `model`.
    dtype:          "bf16": the reference forwards and losses run under
                    torch.autocast (the model and its trace stay f32).
    The caller must have called torch.manual_seed(0) before building `model`.
    """
    t0 = time.time()
    assert loss in LOSSES, loss
    os.makedirs(out_dir, exist_ok=True)
    base = os.path.join(out_dir, name)
    example_inputs = _as_tuple(example_inputs)
    data_inputs = _as_tuple(data_inputs)
    assert len(example_inputs) == len(data_inputs)
    mb = example_inputs[0].shape[0]
    rows = targets.shape[0]
    for e, d in zip(example_inputs, data_inputs):
        assert e.shape[0] == mb, "example inputs disagree on micro-batch size"
        assert d.shape[0] == rows, "data inputs and targets disagree on rows"
        assert e.shape[1:] == d.shape[1:] and e.dtype == d.dtype
    _check_dtypes(list(data_inputs) + [targets] + list(state(model).values()), name)

    model.train()  # traced in train mode (BatchNorm uses batch statistics)

    # 1. initial weights (before anything can touch them)
    initial = state(model)
    st.save(base + ".weights.safetensors", initial,
            {"aliases": json.dumps(aliases(model), sort_keys=True)})

    # 2. traced TorchScript module at micro-batch size, grad enabled; the
    # example run updates buffers in place (BatchNorm's running statistics),
    # which are put back after it
    to_trace = traced_model if traced_model is not None else model
    to_trace.train()
    with torch.enable_grad():
        traced = torch.jit.trace(to_trace, example_inputs)
    with torch.no_grad():
        for n, b in to_trace.named_buffers():
            b.copy_(initial[n])
    traced.save(base + ".pt")

    # 3. data
    data = _named("input", data_inputs)
    data["target"] = targets
    st.save(base + ".data.safetensors", data)

    # 4. reference forward on the first micro-batch, in eval mode as
    # pippy-run --infer runs it (running statistics, no dropout)
    x0, _ = rows_of(data_inputs, targets, 0, mb)
    model.eval()
    # Under autocast with gradients on: torch 1.13's no-grad fast path of
    # nn.TransformerEncoderLayer fails under CPU autocast (it mixes bf16
    # and f32); the regular path computes the same function.
    with torch.set_grad_enabled(dtype != "f32"), _precision(dtype):
        out0 = model(*x0)
    out0 = _detached(out0)
    model.train()
    outs = _as_tuple(out0)
    st.save(base + ".ref.safetensors", _named("output", outs))

    # 5. training
    losses, grads, unused = train(model, data_inputs, targets, loss, lr,
                                  microbatches, steps, mb, dtype)
    st.save(base + ".grads.safetensors", grads,
            {"unused": json.dumps(unused)} if unused else None)

    st.save(base + ".final.safetensors", state(model),
            {"aliases": json.dumps(aliases(model), sort_keys=True)})

    ref = {
        "losses": losses,
        "loss": loss,
        "microbatches": microbatches,
        "lr": lr,
        "steps": steps,
        "micro_batch": mb,
        "input_shapes": ",".join(mlir_shape(x) for x in example_inputs),
        "output_shapes": ",".join(mlir_shape(o) for o in outs),
        "target_shape": mlir_shape(targets[:mb]),
        "rows": rows,
        "torch_version": torch.__version__,
        "dtype": dtype,
    }
    with open(base + ".ref.json", "w") as f:
        json.dump(ref, f, indent=1)
        f.write("\n")
    return ref, time.time() - t0


def _report(name, result):
    ref, dt = result
    print("%s: losses %s (%.2fs)" % (
        name, ", ".join("%.6f" % l for l in ref["losses"]), dt))


def main(name, build):
    """Entry point of a generator: build() -> (model, example_inputs,
    data_inputs, targets, loss[, kwargs]). `OUT_DIR --microbatches M`
    calls build(microbatches=M) (generators whose build takes it);
    `--dtype bf16` makes the reference numbers autocast's."""
    usage = "usage: %s OUT_DIR [--microbatches M] [--dtype f32|bf16]" % sys.argv[0]
    args = sys.argv[1:]
    kwargs, dtype = {}, "f32"
    while len(args) >= 3 and args[-2] in ("--microbatches", "--dtype"):
        if args[-2] == "--microbatches":
            kwargs["microbatches"] = int(args[-1])
        elif args[-1] in ("f32", "bf16"):
            dtype = args[-1]
        else:
            sys.exit(usage)
        args = args[:-2]
    if len(args) != 1:
        sys.exit(usage)
    sys.argv[1:] = args
    res = build(**kwargs)
    kw = dict(res[5]) if len(res) > 5 else {}
    kw["dtype"] = dtype
    _report(name, generate(name, *res[:5], out_dir=sys.argv[1], **kw))


# The zoos of several models (torchvision_zoo.py, torchtext_zoo.py,
# torchaudio_zoo.py): micro-batches of 2 rows, 2 per step, 3 steps.
ZOO_MB, ZOO_M, ZOO_STEPS = 2, 2, 3
ZOO_ROWS = ZOO_MB * ZOO_M * ZOO_STEPS


def zoo_main(models, build, doc):
    """Entry point of a zoo: `--list` prints its models' names; `MODEL
    OUT_DIR [--real-rates]` generates build(MODEL, real) -> (model,
    example_inputs, data_inputs, targets, loss), with dropout and
    stochastic depth at the library's own rates if real (for pippy-run
    --seed), at 0 otherwise."""
    args = sys.argv[1:]
    if args == ["--list"]:
        print("\n".join(models))
        sys.exit(0)
    real = "--real-rates" in args
    args = [a for a in args if a != "--real-rates"]
    if len(args) != 2 or args[0] not in models:
        sys.exit(doc)
    name, out_dir = args
    _report(name, generate(name, *build(name, real), out_dir=out_dir,
                           microbatches=ZOO_M, steps=ZOO_STEPS))

"""Checks a generated zoo: /usr/bin/python3 check_zoo.py OUT_DIR [--kinds]

For every model: all files exist and load; weights/grads/final name sets and
shapes match a freshly built model (and the initial weights are bit-equal,
so generation is deterministic); data and shape strings agree; the saved
TorchScript module reproduces ref "output" bit-exactly on the first
micro-batch; re-running the 3 SGD steps through the loaded TorchScript module
reproduces the recorded losses, gradients and final weights; and one SGD step
along the recorded gradients lowers the loss of the step-0 batch.
With --kinds, prints the node kinds of each traced.inlined_graph.
"""
import importlib
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import st  # noqa: E402

MODELS = ["mlp", "resnet", "gpt", "unet", "transformer", "lstm", "embbag", "twoio",
          "params", "sharedbuf", "viewmut", "datadep", "fnet", "mlp64", "nestedout", "tiedconv", "intscale", "tiedtypes",
          "tmgpt", "tmcnn", "tmprims", "tmattn", "tmearly", "listout", "tuplemods",
          "bnnet"]
# Models whose traced module rounds differently from the eager model the
# references come from; their forward and retraining through the .pt are
# compared to 1e-6 relative instead of bit for bit. datadep reads sizes into Python
# numbers (`nonzero(...).shape[0] * 0.01`), which the trace records as
# tensor arithmetic.
TRACE_INEXACT = {"datadep"}
# Models whose trace keeps training-mode BatchNorm (batch statistics, and
# running statistics updated by every call): the reference output is eval
# mode's, so their .pt forward is not compared with it.
TRAIN_MODE_TRACE = {"bnnet"}
SUFFIXES = [".pt", ".data.safetensors", ".weights.safetensors",
            ".ref.safetensors", ".grads.safetensors", ".final.safetensors",
            ".ref.json"]


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def check_st_roundtrip(tmp):
    ts = {
        "f32": torch.randn(3, 4), "f64": torch.randn(2, dtype=torch.float64),
        "f16": torch.randn(5).half(), "bf16": torch.randn(3, 1).bfloat16(),
        "i64": torch.arange(7), "i32": torch.arange(3, dtype=torch.int32),
        "i16": torch.arange(3, dtype=torch.int16) - 1,
        "i8": torch.arange(3, dtype=torch.int8) - 1,
        "u8": torch.arange(3, dtype=torch.uint8), "b": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
        "strided": torch.randn(4, 6).t(),
    }
    p = os.path.join(tmp, "roundtrip.safetensors")
    st.save(p, ts, {"k": "v"})
    with open(p, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
    assert (8 + n) % 8 == 0
    back, md = st.load(p)
    assert md == {"k": "v"} and list(back) == list(ts)
    for k in ts:
        assert back[k].dtype == ts[k].dtype and torch.equal(back[k], ts[k]), k
    print("st round trip: ok")


def batch(data, ninputs, start, n):
    rows = data["target"].shape[0]
    idx = (torch.arange(n) + start) % rows
    if ninputs == 1:
        xs = (data["input"].index_select(0, idx),)
    else:
        xs = tuple(data["input.%d" % i].index_select(0, idx) for i in range(ninputs))
    return xs, data["target"].index_select(0, idx)


def load_into(module, tensors):
    with torch.no_grad():
        for n, p in module.named_parameters():
            if n in tensors:
                p.copy_(tensors[n])
        for n, b in module.named_buffers():
            if n in tensors:
                b.copy_(tensors[n])


def check_model(out, name, kinds_out):
    base = os.path.join(out, name)
    for s in SUFFIXES:
        if not os.path.isfile(base + s):
            fail("%s%s missing" % (name, s))
    ref = json.load(open(base + ".ref.json"))
    M, mb, lr, steps = ref["microbatches"], ref["micro_batch"], ref["lr"], ref["steps"]
    data, _ = st.load(base + ".data.safetensors")
    w0, wmd = st.load(base + ".weights.safetensors")
    grads, grads_meta = st.load(base + ".grads.safetensors")
    unused = set(json.loads((grads_meta or {}).get("unused", "[]")))
    final, fmd = st.load(base + ".final.safetensors")
    refout, _ = st.load(base + ".ref.safetensors")
    al = json.loads(wmd.get("aliases", "{}"))
    assert json.loads(fmd.get("aliases", "{}")) == al

    # a freshly built model has the same names, shapes and initial values
    gen = importlib.import_module(name)
    model, ex, dins, tgt, loss = gen.build()[:5]
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    assert list(w0) == names, (name, list(w0), names)
    assert list(final) == names
    assert list(grads) == [n for n, _ in model.named_parameters()]
    sd = common.state(model)
    for n in names:
        assert torch.equal(sd[n], w0[n]), "%s: %s not reproducible" % (name, n)
        assert final[n].shape == w0[n].shape and final[n].dtype == w0[n].dtype
    for n, p in model.named_parameters():
        assert grads[n].shape == w0[n].shape and torch.isfinite(grads[n]).all()
        if p.requires_grad and n not in unused:
            assert grads[n].abs().sum() > 0, "%s: zero gradient for %s" % (name, n)
        else:  # frozen or unused: PyTorch's gradient is None, stored as zeros
            assert grads[n].abs().sum() == 0, "%s: gradient for %s" % (name, n)
    assert al == common.aliases(model)

    # data
    ninputs = len(dins) if isinstance(dins, tuple) else 1
    keys = ["input"] if ninputs == 1 else ["input.%d" % i for i in range(ninputs)]
    assert sorted(data) == sorted(keys + ["target"])
    rows = data["target"].shape[0]
    assert rows == ref["rows"] and all(data[k].shape[0] == rows for k in keys)
    xs0, y0 = batch(data, ninputs, 0, mb)
    assert ref["input_shapes"] == ",".join(common.mlir_shape(x) for x in xs0)
    assert ref["target_shape"] == common.mlir_shape(y0)
    assert len(ref["losses"]) == steps and all(math.isfinite(l) for l in ref["losses"])

    # TorchScript module: bit-exact forward on the first micro-batch
    ts = torch.jit.load(base + ".pt")
    tsp = dict(ts.named_parameters())
    for n, t in tsp.items():
        first = al.get(n, n)
        assert torch.equal(t.detach(), w0[first]), "%s: .pt %s differs" % (name, n)
    with torch.no_grad():
        o = ts(*xs0)
    outs = common._as_tuple(o)  # nested tuples flattened, as pippy does
    okeys = ["output"] if len(outs) == 1 else ["output.%d" % i for i in range(len(outs))]
    assert sorted(refout) == sorted(okeys)
    def same(a, b):
        if name not in TRACE_INEXACT:
            return torch.equal(a, b)
        scale = b.abs().max().item() if b.numel() else 0.0
        return (a - b).abs().max().item() <= 1e-6 * scale if b.numel() else True

    for k, t in zip(okeys, outs):
        if name in TRAIN_MODE_TRACE:
            break
        if not same(t, refout[k]):
            fail("%s: .pt forward differs from %s (max abs %g)"
                 % (name, k, (t - refout[k]).abs().max()))
    assert ref["output_shapes"] == ",".join(common.mlir_shape(t) for t in outs)

    # retrain through the TorchScript module, compare losses/grads/final
    ts = torch.jit.load(base + ".pt")  # buffers as before the forward
    ts.train()
    opt = torch.optim.SGD(ts.parameters(), lr=lr)
    losses = []
    for k in range(steps):
        opt.zero_grad()
        xs, ys = batch(data, ninputs, k * M * mb, M * mb)
        total = 0.0
        for m in range(M):
            sl = slice(m * mb, (m + 1) * mb)
            lm = common.compute_loss(ref["loss"], ts(*[x[sl] for x in xs]), ys[sl])
            (lm / M).backward()
            total = total + float(lm) / M
        losses.append(total)
        if k == 0:
            for n, p in ts.named_parameters():
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                g = g.to_dense()  # saved dense, see common.py
                if n in grads and not same(g, grads[n]):
                    fail("%s: grad %s differs (max abs %g)"
                         % (name, n, (g - grads[n]).abs().max()))
        opt.step()
    if not all(same(torch.tensor(a), torch.tensor(b))
               for a, b in zip(losses, ref["losses"])):
        fail("%s: losses %s != ref %s" % (name, losses, ref["losses"]))
    for n, p in ts.named_parameters():
        if n in final:
            assert same(p.detach(), final[n]), "%s: final %s differs" % (name, n)

    # one SGD step along the recorded gradient lowers the step-0 batch loss
    w1 = {n: (w0[n] - lr * grads[n]) if n in grads else w0[n] for n in w0}
    load_into(model, w1)
    xs, ys = batch(data, ninputs, 0, M * mb)
    with torch.no_grad():
        after = sum(float(common.compute_loss(ref["loss"], model(*[x[m * mb:(m + 1) * mb] for x in xs]),
                                              ys[m * mb:(m + 1) * mb])) for m in range(M)) / M
    assert after < ref["losses"][0], (name, after, ref["losses"][0])

    g = ts.inlined_graph
    kinds = sorted({n.kind() for n in g.nodes()})
    kinds_out[name] = kinds
    print("%-12s ok  losses %s  step-0 batch loss %.6f -> %.6f  %d graph nodes"
          % (name, ", ".join("%.6f" % l for l in ref["losses"]), ref["losses"][0],
             after, len(list(g.nodes()))))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit("usage: check_zoo.py OUT_DIR [--kinds]")
    out = args[0]
    check_st_roundtrip(out)
    os.remove(os.path.join(out, "roundtrip.safetensors"))

    # gpt: tied lm_head stored once, recorded as an alias
    w, md = st.load(os.path.join(out, "gpt.weights.safetensors"))
    assert "wte.weight" in w and "lm_head.weight" not in w
    assert json.loads(md["aliases"]) == {"lm_head.weight": "wte.weight"}, md

    kinds = {}
    for name in MODELS:
        check_model(out, name, kinds)
    if "--kinds" in sys.argv:
        allk = sorted(set().union(*kinds.values()))
        for name in MODELS:
            print("%s: %s" % (name, " ".join(kinds[name])))
        print("all: %s" % " ".join(allk))
    print("all models ok")


if __name__ == "__main__":
    main()

"""Writes a model in Torch-MLIR's text format, as its FX importer prints a
frozen program (`torch_mlir.fx.export_and_import`): one `func.func @main`
of `torch.aten.*` ops at value semantics, every weight a
`torch.vtensor.literal(dense_resource<torch_tensor_<shape>_<dtype>>)`
whose bytes sit in the file's `dialect_resources` section, Python numbers
and lists as `torch.constant.*` and `torch.prim.ListConstruct` ops.

A model's forward is written once against a backend `A` whose methods are
ATen ops. `TorchBackend` calls `torch.ops.aten` (what the nn.Module runs,
and what the reference numbers come from); `Emitter` runs the same calls
and prints each as an op. So the IR and the reference are one computation.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int64: "si64",
           torch.bool: "i1"}
# torch.dtype as Torch-MLIR writes it: an int (c10::ScalarType).
SCALAR_TYPE = {torch.float32: 6, torch.float64: 7, torch.int64: 4, torch.bool: 11}


def _prims_reference():
    """What each `prims.<name>` computes, as differentiable PyTorch calls:
    PyTorch's own ATen implementation of the prim where torch._prims has
    one, else the ATen op it names. `collapse` merges dims start..end with
    end included, as in Torch-MLIR's text (`prims.collapse %x, 1, 3` of a
    [1,8,2,2,2,2] tensor is [1,32,2,2]; torch 1.13's collapse_view excluded
    end)."""
    import torch._prims as P
    return {
        "convert_element_type": lambda a, dtype: a.to(dtype),
        "collapse": lambda a, start, end: a.flatten(start, end),
        "split_dim": P._split_dim_aten,
        "squeeze": P._squeeze_aten,
        "view_of": P._view_of_aten,
        "broadcast_in_dim": P._broadcast_in_dim_aten,
        "sum": lambda inp, dims, dtype: torch.sum(inp, dims, dtype=dtype),
        "var": lambda inp, dims, correction, dtype: torch.var(
            inp, dims, correction=int(correction)).to(dtype or inp.dtype),
        "sqrt": torch.sqrt,
        "rsqrt": torch.rsqrt,
        "iota": lambda length, start, step, dtype, device, requires_grad:
            torch.arange(start, start + length * step, step, dtype=dtype,
                         device=device).requires_grad_(requires_grad),
    }


def _sdpa(q, k, v, mask, dropout_p, is_causal, scale=None, enable_gqa=False):
    """scaled_dot_product_attention as PyTorch documents it (dropout 0)."""
    assert dropout_p == 0.0
    if enable_gqa and k.size(-3) != q.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, -math.inf)
    if mask is not None:
        scores = (scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool
                  else scores + mask)
    return torch.softmax(scores, -1) @ v


def _rms_norm(x, shape, weight=None, eps=None):
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    dims = list(range(x.dim() - len(shape), x.dim()))
    out = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return out if weight is None else out * weight


def _safe_softmax(x, dim, dtype=None):
    out = torch.softmax(x, dim, dtype=dtype)
    return out.masked_fill((x == -math.inf).all(dim, keepdim=True), 0)


# ATen operators newer than torch 1.13 (torch.export writes them), as
# PyTorch documents them.
NEWER_ATEN = {
    "scaled_dot_product_attention": _sdpa,
    "_native_batch_norm_legit_no_training":
        lambda x, w, b, mean, var, momentum, eps:
            torch.ops.aten.native_batch_norm(x, w, b, mean, var, False, momentum, eps),
    "rms_norm": _rms_norm,
    "_safe_softmax": _safe_softmax,
    "_unsafe_index.Tensor": lambda x, indices: torch.ops.aten.index.Tensor(x, indices),
}


class OptionalTensors(list):
    """A Tensor?[] operand (`!torch.list<optional<vtensor>>`)."""


# Prims torch 1.13 runs (forward only) with the operands Torch-MLIR gives:
# the generator checks the references above against them.
_PRIMS_CHECKED = ("convert_element_type", "split_dim", "squeeze", "view_of",
                  "broadcast_in_dim", "sum", "sqrt", "rsqrt")


def _call(fn, args):
    """Calls an operator overload with every schema argument in order, as
    Torch-MLIR lists them; keyword-only ones go by name."""
    schema = fn._schema.arguments
    pos = [a for a, s in zip(args, schema) if not s.kwarg_only]
    kw = {s.name: a for a, s in zip(args, schema) if s.kwarg_only}
    return fn(*pos, **kw)


class TorchBackend:
    """ATen ops (and prims, see _prims_reference) on tensors. With check,
    each prim in _PRIMS_CHECKED is also run by torch.ops.prims and must give
    the same tensor."""

    prims = None

    def __init__(self, check=False):
        self.check = check

    def call(self, op, args):
        if op.startswith("prims."):
            name = op[len("prims."):]
            if TorchBackend.prims is None:
                TorchBackend.prims = _prims_reference()
            out = TorchBackend.prims[name](*args)
            if self.check and name in _PRIMS_CHECKED:
                with torch.no_grad():
                    own = _call(getattr(torch.ops.prims, name).default, args)
                assert own.shape == out.shape and own.dtype == out.dtype \
                    and torch.equal(own, out), name
            return out
        if op in NEWER_ATEN:
            return NEWER_ATEN[op](*args)
        name, _, overload = op.partition(".")
        return _call(getattr(getattr(torch.ops.aten, name), overload or "default"),
                     args)

    def param(self, t):
        return t


def _vtensor(t):
    return "!torch.vtensor<[%s],%s>" % (",".join(str(d) for d in t.shape),
                                        _DTYPES[t.dtype])


class Value:
    def __init__(self, name, tensor):
        self.name, self.tensor = name, tensor


class Emitter:
    """Runs ATen ops through TorchBackend and prints each one."""

    def __init__(self):
        self.lines = []
        self.resources = {}  # key -> hex blob
        self.keys = {}  # id(tensor) -> resource key
        self.consts = {}  # (type, value) -> ssa name
        self.count = 0
        self.torch = TorchBackend(check=True)

    def _fresh(self, prefix=""):
        self.count += 1
        return "%%%s%d" % (prefix, self.count)

    def arg(self, tensor, i):
        return Value("%%arg%d" % i, tensor)

    def param(self, t):
        """A weight: one literal per use, one resource per tensor."""
        key = self.keys.get(id(t))
        if key is None:
            base = "torch_tensor_%s_%s" % ("_".join(str(d) for d in t.shape),
                                           t.dtype)
            key, n = base, 0
            while key in self.resources:
                n += 1
                key = "%s_%d" % (base, n)
            data = t.detach().contiguous().numpy().tobytes()
            # The blob's first 4 bytes: its alignment, the element size.
            align = t.element_size().to_bytes(4, "little").hex().upper()
            self.resources[key] = "0x" + align + data.hex().upper()
            self.keys[id(t)] = key
        name = self._fresh()
        self.lines.append(
            "%s = torch.vtensor.literal(dense_resource<%s> : tensor<%sx%s>) : %s"
            % (name, key, "x".join(str(d) for d in t.shape), _DTYPES[t.dtype],
               _vtensor(t)))
        return Value(name, t.detach())

    def _const(self, v):
        if isinstance(v, Value):
            return v.name, _vtensor(v.tensor)
        if isinstance(v, torch.dtype):
            v = SCALAR_TYPE[v]
        if isinstance(v, torch.device):
            key = ("!torch.Device", str(v))
            if key not in self.consts:
                self.consts[key] = "%cpu"
                self.lines.append('%%cpu = torch.constant.device "%s"' % v)
            return self.consts[key], "!torch.Device"
        if v is None:
            kind, text, name = "!torch.none", "torch.constant.none", "none"
        elif isinstance(v, bool):
            kind, text = "!torch.bool", "torch.constant.bool %s" % str(v).lower()
            name = str(v).lower()
        elif isinstance(v, int):
            kind, text, name = "!torch.int", "torch.constant.int %d" % v, "int"
        elif isinstance(v, float):
            # Round-trips exactly; -inf as MLIR's hexadecimal float.
            lit = ("0xFFF0000000000000" if v == -math.inf else "%.17e" % v)
            kind, text, name = "!torch.float", "torch.constant.float " + lit, "float"
        elif isinstance(v, str):
            kind, text, name = "!torch.str", 'torch.constant.str "%s"' % v, "str"
        elif isinstance(v, list):
            parts = [self._const(e) for e in v]
            ssa = self._fresh("list")
            elem = parts[0][1] if parts else "!torch.int"
            if isinstance(v, OptionalTensors):
                elem = "!torch.optional<vtensor>"
            elif elem.startswith("!torch.vtensor"):
                elem = "!torch.vtensor"
            self.lines.append("%s = torch.prim.ListConstruct %s : (%s) -> !torch.list<%s>"
                              % (ssa, ", ".join(p[0] for p in parts),
                                 ", ".join(p[1] for p in parts), elem[len("!torch."):]))
            return ssa, "!torch.list<%s>" % elem[len("!torch."):]
        else:
            raise TypeError(v)
        key = (kind, repr(v))
        if key not in self.consts:
            # Torch-MLIR's names: %int-1, %false, %none, %float3, ...
            ssa = ("%" + name + (str(v) if kind == "!torch.int" else "")
                   if kind in ("!torch.int", "!torch.bool", "!torch.none")
                   else self._fresh(name))
            self.lines.append("%s = %s" % (ssa, text))
            self.consts[key] = ssa
        return self.consts[key], kind

    def call(self, op, args):
        operands = [self._const(a) for a in args]

        def value(a):
            if isinstance(a, Value):
                return a.tensor
            if isinstance(a, list):
                return type(a)(value(e) for e in a)
            return a
        out = self.torch.call(op, [value(a) for a in args])
        outs = out if isinstance(out, tuple) else (out,)
        name = self._fresh()
        results = "%s:%d" % (name, len(outs)) if len(outs) > 1 else name
        namespace = "" if op.startswith("prims.") else "aten."
        self.lines.append("%s = torch.%s%s %s : %s -> %s" % (
            results, namespace, op, ", ".join(o[0] for o in operands),
            ", ".join(o[1] for o in operands),
            ", ".join(_vtensor(t) for t in outs)))
        if len(outs) == 1:
            return Value(name, out)
        return tuple(Value("%s#%d" % (name, i), t) for i, t in enumerate(outs))

    def text(self, inputs, result):
        """The module; `result` is a Value or a tuple of them (a function
        with several results, as the FX importer writes a tuple output)."""
        results = result if isinstance(result, tuple) else (result,)
        types = ", ".join(_vtensor(v.tensor) for v in results)
        args = ", ".join("%s: %s" % (v.name, _vtensor(v.tensor)) for v in inputs)
        body = "\n".join("    " + line for line in self.lines)
        blobs = ",\n".join('      %s: "%s"' % kv for kv in self.resources.items())
        return ("module {\n  func.func @main(%s) -> %s {\n%s\n    return %s : %s\n"
                "  }\n}\n\n{-#\n  dialect_resources: {\n    builtin: {\n%s\n    }\n"
                "  }\n#-}\n" % (args, types if len(results) == 1 else "(%s)" % types,
                                body, ", ".join(v.name for v in results), types, blobs))


def write(path, forward, params, example_inputs, names):
    """Prints `forward(Emitter, params, *inputs)` as Torch-MLIR text to path,
    and beside it (path + ".names.json") the resource key of every
    parameter mapped to its name in `names` ({id(tensor): name}). Returns
    {id(tensor): resource key}."""
    e = Emitter()
    inputs = [e.arg(t, i) for i, t in enumerate(example_inputs)]
    with torch.no_grad():
        out = forward(e, params, *inputs)
    with open(path, "w") as f:
        f.write(e.text(inputs, out))
    with open(path + ".names.json", "w") as f:
        json.dump({key: names[i] for i, key in e.keys.items()}, f, indent=1,
                  sort_keys=True)
        f.write("\n")
    return e.keys


class Model(nn.Module):
    """A zoo model whose forward is `graph(A, tensors, *inputs)` (a static
    method of the subclass), run on TorchBackend with its parameters and
    buffers by name."""

    def tensors(self):
        tensors = dict(self.named_parameters())
        tensors.update(self.named_buffers())
        return tensors

    def forward(self, *inputs):
        return type(self).graph(TorchBackend(), self.tensors(), *inputs)


def main(name, build, buffers=()):
    """Entry point of a Torch-MLIR zoo generator: common.main's files, then
    NAME.torch.mlir (with NAME.torch.mlir.names.json) from a freshly built
    model, since training changed the first one's weights, and
    NAME.torch.mlir.buffers with the resource keys of the float `buffers`
    (PyTorch names) lifting cannot recognise."""
    res = build()
    common.main(name, lambda: res)
    fresh = build()[0]
    tensors = fresh.tensors()
    path = os.path.join(sys.argv[1], name + ".torch.mlir")
    keys = write(path, type(fresh).graph, tensors, res[1],
                 {id(t): n for n, t in tensors.items()})
    if buffers:
        with open(path + ".buffers", "w") as f:
            f.write("".join(keys[id(tensors[b])] + "\n" for b in buffers))

#!/usr/bin/env python3
"""Writes the graph IR of a deep synthetic transformer, in the form pippy-import
produces, without torch, a TorchScript file or any weights.

The model (model.py builds the same one in PyTorch) is a stack of B
pre-LayerNorm blocks on float input [batch, seq, width] and a final LayerNorm:

    x = x + attn(ln_1(x))      # q, k, v, proj Linear(W, W); single head;
                               # causal mask buffer [seq, seq]; softmax
    x = x + mlp(ln_2(x))       # fc Linear(W, 4W), GELU, proj Linear(4W, W)

Each block is 51 ops: 17 `pippy.param` (16 parameters and the mask buffer) and
34 torch ops and constants; with the final LayerNorm, B blocks give 51*B + 7
ops in the function body (`--blocks 2000` is 102,007 ops). The text is what pippy-import prints for the
traced model: parameters first (then buffers), constants where TorchScript
puts them, SSA names as MLIR's printer makes them unique, and every op's
module path as a `NameLoc` alias (`#locN = loc("h.3.attn.q")`) defined at the
top of the file, so `gen_ir.py --blocks 2 --source m.pt --weights
m.safetensors` is byte for byte `pippy-import m.pt --input-shapes 2x16x64xf32
-o m.mlir --weights m.safetensors` for that model (check_gen.py verifies it).

Usage: gen_ir.py --blocks B [--width W] [--seq T] [--batch N] -o model.mlir
"""
import argparse
import math
import struct
import sys


def mlir_float(v):
    """A float the way MLIR prints an f64 attribute: 6-digit scientific form when
    that reads back exactly, else the full-precision digits."""
    short = "%.6e" % v
    if float(short) == v:
        return short
    return "%.17g" % v


class Writer:
    """Emits ops, numbering results and uniquing names like MLIR's printer."""

    def __init__(self):
        self.lines = []
        self.next_id = 0
        self.used = set()
        self.conflict = 0
        self.locs = {}  # module path -> alias number, in order of first use

    def loc(self, path):
        if path not in self.locs:
            self.locs[path] = len(self.locs) + 1
        return "loc(#loc%d)" % self.locs[path]

    def num(self):
        v = "%%%d" % self.next_id
        self.next_id += 1
        return v

    def named(self, name):
        if name in self.used:
            while True:
                probe = "%s_%d" % (name, self.conflict)
                self.conflict += 1
                if probe not in self.used:
                    name = probe
                    break
        self.used.add(name)
        return "%" + name

    def emit(self, text, path):
        self.lines.append("    %s %s\n" % (text, self.loc(path) if path else "loc(#loc)"))

    # --- op helpers -------------------------------------------------------
    def param(self, name, ty, path):
        v = self.num()
        self.emit('%s = pippy.param "%s" : %s' % (v, name, ty), path)
        return v

    def const_int(self, i, path):
        v = self.named("int%d" % i)
        self.emit("%s = torch.constant.int %d" % (v, i), path)
        return v

    def const_bool(self, b, path):
        v = self.named("true" if b else "false")
        self.emit("%s = torch.constant.bool %s" % (v, "true" if b else "false"), path)
        return v

    def const_float(self, f, path):
        if math.isinf(f):
            name = "float-Inf" if f < 0 else "floatInf"
            text = "0x%016X" % struct.unpack("<Q", struct.pack("<d", f))[0]
        else:
            text = mlir_float(f)
            name = "float" + text
        v = self.named(name)
        self.emit("%s = torch.constant.float %s" % (v, text), path)
        return v

    def const_none(self, path):
        v = self.named("none")
        self.emit("%s = torch.constant.none" % v, path)
        return v

    def const_str(self, s, path):
        v = self.named("str")
        self.emit('%s = torch.constant.str "%s"' % (v, s), path)
        return v

    def list_construct(self, elems, elem_type, result, path):
        v = self.num()
        self.emit("%s = torch.prim.ListConstruct %s : (%s) -> %s"
                  % (v, ", ".join(elems), ", ".join([elem_type] * len(elems)), result), path)
        return v

    def op(self, name, args, types, result, path):
        v = self.num()
        self.emit("%s = %s %s : %s -> %s" % (v, name, ", ".join(args), ", ".join(types), result),
                  path)
        return v


def vt(shape, dtype="f32"):
    return "!torch.vtensor<[%s],%s>" % (",".join(str(d) for d in shape), dtype)


def generate(blocks, width, seq, batch, source, weights):
    W, T, N = width, seq, batch
    w = Writer()
    x_t = vt([N, T, W])
    vec = vt([W])
    sq = vt([W, W])
    fc_w, fc_b, pj_w = vt([4 * W, W]), vt([4 * W]), vt([W, 4 * W])
    att_t, kt_t, mask_t = vt([N, T, T]), vt([N, W, T]), vt([T, T])
    hid_t = vt([N, T, 4 * W])

    # Parameters in named_parameters() order, then buffers (the masks).
    params = []
    for b in range(blocks):
        h = "h.%d" % b
        p = {}
        for sub, names in (("ln_1", (("weight", vec), ("bias", vec))),
                           ("attn.q", (("weight", sq), ("bias", vec))),
                           ("attn.k", (("weight", sq), ("bias", vec))),
                           ("attn.v", (("weight", sq), ("bias", vec))),
                           ("attn.proj", (("weight", sq), ("bias", vec))),
                           ("ln_2", (("weight", vec), ("bias", vec))),
                           ("mlp.fc", (("weight", fc_w), ("bias", fc_b))),
                           ("mlp.proj", (("weight", pj_w), ("bias", vec)))):
            for leaf, ty in names:
                p[sub + "." + leaf] = w.param("%s.%s.%s" % (h, sub, leaf), ty, "%s.%s" % (h, sub))
        params.append(p)
    lnf_w = w.param("ln_f.weight", vec, "ln_f")
    lnf_b = w.param("ln_f.bias", vec, "ln_f")
    for b in range(blocks):
        params[b]["attn.mask"] = w.param("h.%d.attn.mask" % b, mask_t, "h.%d.attn" % b)

    def layer_norm(x, wt, bs, path):
        t = w.const_bool(True, path)
        eps = w.const_float(1e-05, path)
        n = w.const_int(W, path)
        shape = w.list_construct([n], "!torch.int", "!torch.list<int>", path)
        return w.op("torch.aten.layer_norm", [x, shape, wt, bs, eps, t],
                    [x_t, "!torch.list<int>", vec, vec, "!torch.float", "!torch.bool"], x_t, path)

    def linear(x, wt, bs, in_t, w_t, b_t, out_t, path):
        return w.op("torch.aten.linear", [x, wt, bs], [in_t, w_t, b_t], out_t, path)

    x = "%arg0"
    scale = 1.0 / math.sqrt(W)
    for b in range(blocks):
        h = "h.%d" % b
        p = params[b]
        a = h + ".attn"
        one = w.const_int(1, h)
        y = layer_norm(x, p["ln_1.weight"], p["ln_1.bias"], h + ".ln_1")
        none = w.const_none(a)
        ninf = w.const_float(float("-inf"), a)
        m2 = w.const_int(-2, a)
        m1 = w.const_int(-1, a)
        zero = w.const_int(0, a)
        q = linear(y, p["attn.q.weight"], p["attn.q.bias"], x_t, sq, vec, x_t, a + ".q")
        k = linear(y, p["attn.k.weight"], p["attn.k.bias"], x_t, sq, vec, x_t, a + ".k")
        v = linear(y, p["attn.v.weight"], p["attn.v.bias"], x_t, sq, vec, x_t, a + ".v")
        kt = w.op("torch.aten.transpose.int", [k, m2, m1], [x_t, "!torch.int", "!torch.int"],
                  kt_t, a)
        s = w.op("torch.aten.matmul", [q, kt], [x_t, kt_t], att_t, a)
        # A Python float operand: a literal of its own, marked as a number.
        sc = w.num()
        w.emit("%s = torch.vtensor.literal(dense<%s> : tensor<f64>) "
               "{pippy.wrapped_number} : %s"
               % (sc, mlir_float(scale), vt([], "f64")), a)
        s = w.op("torch.aten.mul.Tensor", [s, sc], [att_t, vt([], "f64")], att_t, a)
        eq = w.op("torch.aten.eq.Scalar", [p["attn.mask"], zero], [mask_t, "!torch.int"],
                  vt([T, T], "i1"), a)
        s = w.op("torch.aten.masked_fill.Scalar", [s, eq, ninf],
                 [att_t, vt([T, T], "i1"), "!torch.float"], att_t, a)
        s = w.op("torch.aten.softmax.int", [s, m1, none], [att_t, "!torch.int", "!torch.none"],
                 att_t, a)
        o = w.op("torch.aten.matmul", [s, v], [att_t, x_t], x_t, a)
        o = linear(o, p["attn.proj.weight"], p["attn.proj.bias"], x_t, sq, vec, x_t,
                   a + ".proj")
        x = w.op("torch.aten.add.Tensor", [x, o, one], [x_t, x_t, "!torch.int"], x_t, h)
        y = layer_norm(x, p["ln_2.weight"], p["ln_2.bias"], h + ".ln_2")
        f = linear(y, p["mlp.fc.weight"], p["mlp.fc.bias"], x_t, fc_w, fc_b, hid_t, h + ".mlp.fc")
        approx = w.const_str("none", h + ".mlp.gelu")
        g = w.op("torch.aten.gelu", [f, approx], [hid_t, "!torch.str"], hid_t, h + ".mlp.gelu")
        o = linear(g, p["mlp.proj.weight"], p["mlp.proj.bias"], hid_t, pj_w, vec, x_t,
                   h + ".mlp.proj")
        x = w.op("torch.aten.add.Tensor", [x, o, one], [x_t, x_t, "!torch.int"], x_t, h)
    x = layer_norm(x, lnf_w, lnf_b, "ln_f")

    src = '"%s":0:0' % source
    out = ["#loc = loc(%s)\n" % src]
    for path, n in w.locs.items():
        out.append('#loc%d = loc("%s")\n' % (n, path))
    out += ['module attributes {pippy.weights = "%s"} {\n' % weights,
            "  func.func @forward(%%arg0: %s loc(%s)) -> %s {\n" % (x_t, src, x_t)]
    out += w.lines
    out.append("    return %s : %s loc(#loc)\n" % (x, x_t))
    out.append("  } loc(#loc)\n} loc(#loc)\n")
    return "".join(out), len(w.lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, required=True, help="number of transformer blocks")
    ap.add_argument("--width", type=int, default=64, help="hidden size W (default 64)")
    ap.add_argument("--seq", type=int, default=16, help="sequence length (default 16)")
    ap.add_argument("--batch", type=int, default=2, help="micro-batch size (default 2)")
    ap.add_argument("--source", default="model.pt",
                    help="file name recorded in the top-level location (default model.pt)")
    ap.add_argument("--weights", default="model.safetensors",
                    help="the module's pippy.weights attribute (default model.safetensors)")
    ap.add_argument("-o", "--output", required=True, help="output .mlir ('-' for stdout)")
    ap.add_argument("--print-ops", action="store_true",
                    help="print the number of ops in the function body to stdout")
    args = ap.parse_args(argv)
    if args.blocks < 1 or args.width < 1 or args.seq < 1 or args.batch < 1:
        ap.error("--blocks, --width, --seq and --batch must be positive")
    text, ops = generate(args.blocks, args.width, args.seq, args.batch, args.source, args.weights)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    if args.print_ops:
        print(ops)
    return 0


if __name__ == "__main__":
    sys.exit(main())

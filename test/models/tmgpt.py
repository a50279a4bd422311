"""tmgpt: a small GPT given to pippy as Torch-MLIR text (tmgpt.torch.mlir,
written by torchmlir.py as the FX importer prints a frozen program) rather
than TorchScript. Token and position embeddings, 2 pre-LN blocks
(native_layer_norm, a fused qkv linear, view/permute/select heads, causal
mask from ones/triu/masked_fill with -inf, _softmax, an addmm projection on
the flattened rows, tanh GELU MLP), final LayerNorm, and an lm head tied to
the token embedding (one resource read by two literals). The reference
numbers come from the same ATen calls run by PyTorch.
"""
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import torchmlir  # noqa: E402

MB, S, V, D, H, LAYERS = 2, 8, 32, 16, 2, 2
HD = D // H


def forward(A, P, tok):
    """The model, on backend A (torchmlir.TorchBackend or Emitter)."""
    p = lambda n: A.param(P[n])  # noqa: E731
    x = A.call("embedding", [p("wte"), tok, -1, False, False])
    x = A.call("add.Tensor", [x, p("wpe"), 1])
    mask = A.call("ones", [[S, S], torch.bool, None, None, None])
    mask = A.call("triu", [mask, 1])
    for i in range(LAYERS):
        h = A.call("native_layer_norm", [x, [D], p("h%d_ln1_w" % i),
                                         p("h%d_ln1_b" % i), 1e-5])[0]
        qkv = A.call("linear", [h, p("h%d_qkv_w" % i), p("h%d_qkv_b" % i)])
        qkv = A.call("view", [qkv, [MB, S, 3, H, HD]])
        qkv = A.call("permute", [qkv, [2, 0, 3, 1, 4]])
        q, k, v = (A.call("select.int", [qkv, 0, j]) for j in range(3))
        att = A.call("matmul", [q, A.call("transpose.int", [k, -2, -1])])
        att = A.call("mul.Scalar", [att, 1.0 / math.sqrt(HD)])
        att = A.call("masked_fill.Scalar", [att, mask, -math.inf])
        att = A.call("_softmax", [att, -1, False])
        y = A.call("matmul", [att, v])
        y = A.call("transpose.int", [y, 1, 2])
        y = A.call("clone", [y, 0])  # contiguous_format
        y = A.call("view", [y, [MB * S, D]])
        y = A.call("addmm", [p("h%d_proj_b" % i), y,
                             A.call("t", [p("h%d_proj_w" % i)]), 1, 1])
        x = A.call("add.Tensor", [x, A.call("view", [y, [MB, S, D]]), 1])
        h = A.call("native_layer_norm", [x, [D], p("h%d_ln2_w" % i),
                                         p("h%d_ln2_b" % i), 1e-5])[0]
        m = A.call("linear", [h, p("h%d_fc1_w" % i), p("h%d_fc1_b" % i)])
        m = A.call("gelu", [m, "tanh"])
        m = A.call("linear", [m, p("h%d_fc2_w" % i), p("h%d_fc2_b" % i)])
        x = A.call("add.Tensor", [x, m, 1])
    x = A.call("native_layer_norm", [x, [D], p("lnf_w"), p("lnf_b"), 1e-5])[0]
    return A.call("linear", [x, p("wte"), None])


class TmGpt(torchmlir.Model):
    graph = staticmethod(forward)

    def __init__(self):
        super().__init__()
        shapes = {"wte": (V, D), "wpe": (S, D), "lnf_w": (D,), "lnf_b": (D,)}
        for i in range(LAYERS):
            shapes.update({
                "h%d_ln1_w" % i: (D,), "h%d_ln1_b" % i: (D,),
                "h%d_qkv_w" % i: (3 * D, D), "h%d_qkv_b" % i: (3 * D,),
                "h%d_proj_w" % i: (D, D), "h%d_proj_b" % i: (D,),
                "h%d_ln2_w" % i: (D,), "h%d_ln2_b" % i: (D,),
                "h%d_fc1_w" % i: (4 * D, D), "h%d_fc1_b" % i: (4 * D,),
                "h%d_fc2_w" % i: (D, 4 * D), "h%d_fc2_b" % i: (D,)})
        for name, shape in shapes.items():
            if name.endswith("ln1_w") or name.endswith("ln2_w") or name == "lnf_w":
                init = 1.0 + 0.1 * torch.randn(shape)
            else:
                init = torch.randn(shape) * (0.3 if len(shape) == 2 else 0.05)
            setattr(self, name, nn.Parameter(init))


def build():
    common.seed()
    model = TmGpt()
    g = common.data_gen()
    rows = MB * 2 * 3
    tok = torch.randint(0, V, (rows, S), generator=g)
    target = torch.randint(0, V, (rows, S), generator=g)
    return model, (tok[:MB],), (tok,), target, "cross_entropy"


if __name__ == "__main__":
    torchmlir.main("tmgpt", build)

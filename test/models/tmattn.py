"""tmattn: attention as torch.export writes it for PyTorch 2, given as
Torch-MLIR text: ATen operators libtorch 1.13 does not have, which pippy-run
runs on ATen. rms_norm; scaled_dot_product_attention causal with grouped
keys and values (enable_gqa, 8 operands) and with an additive float bias
and an explicit scale (7 operands); _safe_softmax gating;
_native_batch_norm_legit_no_training over channels (its running statistics
are literals lifted as buffers, the bias table is listed in
tmattn.torch.mlir.buffers); _unsafe_index gathering a position table by an
integer literal; a tied-free Linear head.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import torchmlir  # noqa: E402

MB, S, V, D, H, KV = 2, 8, 32, 16, 4, 2
HD = D // H


def heads(A, x, n):
    """[MB,S,n*HD] -> [MB,n,S,HD]"""
    return A.call("transpose.int", [A.call("view", [x, [MB, S, n, HD]]), 1, 2])


def merge(A, y):
    y = A.call("transpose.int", [y, 1, 2])
    return A.call("view", [A.call("clone", [y, 0]), [MB, S, D]])


def forward(A, P, tok):
    p = lambda n: A.param(P[n])  # noqa: E731
    x = A.call("embedding", [p("emb"), tok, -1, False, False])
    pos = A.call("_unsafe_index.Tensor", [p("pos"), torchmlir.OptionalTensors([p("order")])])
    x = A.call("add.Tensor", [x, pos, 1])
    # grouped-query causal attention
    h = A.call("rms_norm", [x, [D], p("n1_w"), 1e-6])
    q = heads(A, A.call("linear", [h, p("q_w"), None]), H)
    k = heads(A, A.call("linear", [h, p("k_w"), None]), KV)
    v = heads(A, A.call("linear", [h, p("v_w"), None]), KV)
    y = A.call("scaled_dot_product_attention", [q, k, v, None, 0.0, True, None, True])
    x = A.call("add.Tensor", [x, A.call("linear", [merge(A, y), p("o_w"), p("o_b")]), 1])
    # attention with an additive bias and a given scale
    h = A.call("rms_norm", [x, [D], None, None])
    q = heads(A, A.call("linear", [h, p("q2_w"), None]), H)
    k = heads(A, A.call("linear", [h, p("k2_w"), None]), H)
    v = heads(A, A.call("linear", [h, p("v2_w"), None]), H)
    y = A.call("scaled_dot_product_attention", [q, k, v, p("bias"), 0.0, False, 0.4])
    x = A.call("add.Tensor", [x, merge(A, y), 1])
    # gating and a batch norm over the channels
    gate = A.call("_safe_softmax", [A.call("linear", [x, p("g_w"), p("g_b")]), -1, None])
    x = A.call("mul.Tensor", [x, gate])
    t = A.call("transpose.int", [x, 1, 2])  # [MB, D, S]
    t = A.call("_native_batch_norm_legit_no_training",
               [t, p("bn_w"), p("bn_b"), p("bn_mean"), p("bn_var"), 0.1, 1e-5])[0]
    x = A.call("transpose.int", [t, 1, 2])
    return A.call("linear", [x, p("head_w"), p("head_b")])


class TmAttn(torchmlir.Model):
    graph = staticmethod(forward)

    def __init__(self):
        super().__init__()
        shapes = {"emb": (V, D), "pos": (S, D), "n1_w": (D,),
                  "q_w": (D, D), "k_w": (KV * HD, D), "v_w": (KV * HD, D),
                  "o_w": (D, D), "o_b": (D,), "q2_w": (D, D), "k2_w": (D, D),
                  "v2_w": (D, D), "g_w": (D, D), "g_b": (D,), "bn_w": (D,),
                  "bn_b": (D,), "head_w": (V, D), "head_b": (V,)}
        for name, shape in shapes.items():
            init = (1 + 0.1 * torch.randn(shape) if name in ("n1_w", "bn_w")
                    else torch.randn(shape) * (0.3 if len(shape) == 2 else 0.05))
            setattr(self, name, nn.Parameter(init))
        self.register_buffer("order", torch.arange(S - 1, -1, -1))
        self.register_buffer("bias", -0.5 * (torch.arange(S)[:, None] - torch.arange(S)[None, :]).abs().float())
        self.register_buffer("bn_mean", 0.1 * torch.randn(D))
        self.register_buffer("bn_var", 0.5 + torch.rand(D))


def build():
    common.seed()
    model = TmAttn()
    g = common.data_gen()
    rows = MB * 2 * 3
    tok = torch.randint(0, V, (rows, S), generator=g)
    target = torch.randint(0, V, (rows, S), generator=g)
    return model, (tok[:MB],), (tok,), target, "cross_entropy"


if __name__ == "__main__":
    torchmlir.main("tmattn", build, buffers=('bias',))

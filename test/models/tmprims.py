"""tmprims: a model given as Torch-MLIR text whose normalisation and
reshapes are `torch.prims.*` ops, as PyTorch's decompositions write them
(libtorch 1.13 has no C++ prims; pippy-run runs them on ATen): a Linear, a
layer norm computed in float64 from prims.convert_element_type, prims.sum,
prims.var (float correction), prims.broadcast_in_dim and prims.rsqrt; then
prims.collapse / prims.split_dim / prims.squeeze / prims.view_of reshapes,
positions from prims.iota, prims.sqrt, and a Linear head on the mean over
the sequence.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import torchmlir  # noqa: E402

MB, S, IN, H, OUT = 4, 6, 8, 16, 5


def forward(A, P, x):
    """The model, on backend A (torchmlir.TorchBackend or Emitter)."""
    p = lambda n: A.param(P[n])  # noqa: E731
    h = A.call("linear", [x, p("w1"), p("b1")])  # [MB,S,H]
    c = A.call("prims.convert_element_type", [h, torch.float64])
    mean = A.call("div.Scalar", [A.call("prims.sum", [c, [2], None]), float(H)])
    var = A.call("prims.var", [c, [2], 0.0, None])
    mean = A.call("prims.broadcast_in_dim", [mean, [MB, S, H], [0, 1]])
    var = A.call("prims.broadcast_in_dim", [var, [MB, S, H], [0, 1]])
    n = A.call("mul.Tensor", [A.call("sub.Tensor", [c, mean, 1]),
                              A.call("prims.rsqrt", [A.call("add.Scalar", [var, 1e-5, 1])])])
    n = A.call("prims.convert_element_type", [n, torch.float32])
    n = A.call("mul.Tensor", [n, p("gamma")])
    f = A.call("prims.collapse", [n, 1, 2])  # [MB, S*H]
    f = A.call("tanh", [f])
    s = A.call("prims.split_dim", [f, 1, S])  # [MB, S, H]
    s = A.call("prims.squeeze", [A.call("unsqueeze", [s, 0]), [0]])
    s = A.call("prims.view_of", [s])
    pos = A.call("prims.iota", [S, 0, 1, torch.float32, torch.device("cpu"), False])
    pos = A.call("prims.broadcast_in_dim", [pos, [MB, S, H], [1]])
    s = A.call("add.Tensor", [s, A.call("mul.Tensor", [pos, p("pos_scale")]), 1])
    s = A.call("prims.sqrt", [A.call("add.Scalar", [A.call("mul.Tensor", [s, s]), 1.0, 1])])
    s = A.call("mean.dim", [s, [1], False, None])
    return A.call("linear", [s, p("w2"), p("b2")])


class TmPrims(torchmlir.Model):
    graph = staticmethod(forward)

    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(H, IN) * 0.3)
        self.b1 = nn.Parameter(torch.randn(H) * 0.1)
        self.gamma = nn.Parameter(1 + 0.1 * torch.randn(H))
        self.pos_scale = nn.Parameter(0.1 * torch.randn(H))
        self.w2 = nn.Parameter(torch.randn(OUT, H) * 0.3)
        self.b2 = nn.Parameter(torch.randn(OUT) * 0.1)


def build():
    common.seed()
    model = TmPrims()
    g = common.data_gen()
    rows = MB * 2 * 3
    x = torch.randn(rows, S, IN, generator=g)
    target = torch.randint(0, OUT, (rows,), generator=g)
    return model, (x[:MB],), (x,), target, "cross_entropy"


if __name__ == "__main__":
    torchmlir.main("tmprims", build)

"""tmearly: a model given as Torch-MLIR text whose function has two
results made far apart: the logits of the last Linear (the loss is taken on
them) and the first layer's activation. Split, the second is made in the
first stage; the pipeline sends it to the last stage, which yields every
result.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import torchmlir  # noqa: E402

MB, W, LAYERS, CLASSES = 4, 12, 4, 5


def forward(A, P, x):
    """The model, on backend A (torchmlir.TorchBackend or Emitter)."""
    p = lambda n: A.param(P[n])  # noqa: E731
    early = A.call("tanh", [A.call("linear", [x, p("first_w"), p("first_b")])])
    h = early
    for i in range(LAYERS):
        r = A.call("relu", [A.call("linear", [h, p("l%d_w" % i), p("l%d_b" % i)])])
        h = A.call("add.Tensor", [h, r, 1])
    return A.call("linear", [h, p("head_w"), p("head_b")]), early


class TmEarly(torchmlir.Model):
    graph = staticmethod(forward)

    def __init__(self):
        super().__init__()
        self.first_w = nn.Parameter(torch.randn(W, W) * 0.3)
        self.first_b = nn.Parameter(torch.randn(W) * 0.1)
        for i in range(LAYERS):
            setattr(self, "l%d_w" % i, nn.Parameter(torch.randn(W, W) * 0.3))
            setattr(self, "l%d_b" % i, nn.Parameter(torch.randn(W) * 0.1))
        self.head_w = nn.Parameter(torch.randn(CLASSES, W) * 0.3)
        self.head_b = nn.Parameter(torch.randn(CLASSES) * 0.1)


def build():
    common.seed()
    model = TmEarly()
    g = common.data_gen()
    rows = MB * 2 * 3
    x = torch.randn(rows, W, generator=g)
    target = torch.randint(0, CLASSES, (rows,), generator=g)
    return model, (x[:MB],), (x,), target, "cross_entropy"


if __name__ == "__main__":
    torchmlir.main("tmearly", build)

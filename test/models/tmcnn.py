"""tmcnn: a small CNN given to pippy as Torch-MLIR text (tmcnn.torch.mlir,
written by torchmlir.py). Two convolutions, each followed by a batch norm
in inference form (native_batch_norm with training=false: its running mean
and variance are literals that --pippy-lift-params must keep untrained),
ReLU; max_pool2d_with_indices (two results), a residual add, a spatial
mean, a fixed per-channel scale (a float buffer that only
`buffers=` can tell from a weight: tmcnn.torch.mlir.buffers lists it), and
a Linear head.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import torchmlir  # noqa: E402

MB, C, HW, CLASSES = 2, 8, 8, 5


def forward(A, P, x):
    """The model, on backend A (torchmlir.TorchBackend or Emitter)."""
    p = lambda n: A.param(P[n])  # noqa: E731

    def conv_bn_relu(x, i, cin):
        x = A.call("convolution", [x, p("c%d_w" % i), p("c%d_b" % i), [1, 1],
                                   [1, 1], [1, 1], False, [0, 0], 1])
        x = A.call("native_batch_norm", [x, p("bn%d_w" % i), p("bn%d_b" % i),
                                         p("bn%d_mean" % i), p("bn%d_var" % i),
                                         False, 0.1, 1e-5])[0]
        return A.call("relu", [x])

    h = conv_bn_relu(x, 0, 3)
    h = A.call("max_pool2d_with_indices", [h, [2, 2], [2, 2], [0, 0], [1, 1],
                                           False])[0]
    h = A.call("add.Tensor", [h, conv_bn_relu(h, 1, C), 1])
    h = A.call("mean.dim", [h, [2, 3], False, None])
    h = A.call("mul.Tensor", [h, p("scale")])
    return A.call("linear", [h, p("head_w"), p("head_b")])


class TmCnn(torchmlir.Model):
    graph = staticmethod(forward)

    def __init__(self):
        super().__init__()
        for i, cin in enumerate((3, C)):
            setattr(self, "c%d_w" % i, nn.Parameter(torch.randn(C, cin, 3, 3) * 0.3))
            setattr(self, "c%d_b" % i, nn.Parameter(torch.randn(C) * 0.1))
            setattr(self, "bn%d_w" % i, nn.Parameter(1 + 0.1 * torch.randn(C)))
            setattr(self, "bn%d_b" % i, nn.Parameter(0.1 * torch.randn(C)))
            self.register_buffer("bn%d_mean" % i, 0.1 * torch.randn(C))
            self.register_buffer("bn%d_var" % i, 0.5 + torch.rand(C))
        self.register_buffer("scale", 0.5 + torch.rand(C))
        self.head_w = nn.Parameter(torch.randn(CLASSES, C) * 0.3)
        self.head_b = nn.Parameter(torch.randn(CLASSES) * 0.1)


def build():
    common.seed()
    model = TmCnn()
    g = common.data_gen()
    rows = MB * 2 * 3
    x = torch.randn(rows, 3, HW, HW, generator=g)
    target = torch.randint(0, CLASSES, (rows,), generator=g)
    return model, (x[:MB],), (x,), target, "cross_entropy", {"lr": 0.01}


if __name__ == "__main__":
    torchmlir.main("tmcnn", build, buffers=('scale',))

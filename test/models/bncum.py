"""BatchNorm with momentum=None (a cumulative moving average of the batch
statistics) in training mode: a conv stem with BatchNorm2d(momentum=None),
a residual block with one cumulative and one ordinary BatchNorm2d, pooling,
BatchNorm1d(momentum=None) and a linear head. Tracing would bake each
layer's factor 1/num_batches_tracked in as a constant; pippy's
traceable_batch_norm() (python/pippy) gives those layers a forward that
computes it, and only the traced copy gets it: PyTorch's reference trains
the model as it is. Input 4x3x8x8 f32, 10 classes, cross_entropy.
Usage: /usr/bin/python3 bncum.py OUT_DIR"""
import copy
import os
import sys

import torch
import torch.nn as nn

import common

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from pippy import traceable_batch_norm  # noqa: E402

MB, M, STEPS = 4, 2, 3
C = 8


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c, momentum=None)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + x)


class BNCum(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, C, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(C, momentum=None)
        self.block = Block(C)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head_bn = nn.BatchNorm1d(C, momentum=None)
        self.fc = nn.Linear(C, classes)

    def forward(self, x):
        h = self.block(torch.relu(self.stem_bn(self.stem(x))))
        return self.fc(self.head_bn(torch.flatten(self.pool(h), 1)))


def build():
    common.seed()
    model = BNCum()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 3, 8, 8, generator=g) * 2 + 0.5
    y = torch.randint(0, 10, (rows,), generator=g)
    traced = traceable_batch_norm(copy.deepcopy(model))
    return model, (x[:MB],), (x,), y, "cross_entropy", {
        "microbatches": M, "steps": STEPS, "traced_model": traced}


if __name__ == "__main__":
    common.main("bncum", build)

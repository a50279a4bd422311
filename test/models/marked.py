"""An MLP whose forward marks its own stage boundaries with pippy's
pipe_split() (python/pippy), as PiPPy users write them: three stages,
the second boundary inside a module's forward. Input 4x16 f32, 6 classes,
cross_entropy.
Usage: /usr/bin/python3 marked.py OUT_DIR"""
import os
import sys

import torch
import torch.nn as nn

import common

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "python"))
from pippy import pipe_split  # noqa: E402

MB, M, STEPS = 4, 2, 3


class Body(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 32)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        pipe_split()
        return torch.relu(self.fc2(h)) + x


class Marked(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.body = Body()
        self.out = nn.Linear(32, 6)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        pipe_split()
        return self.out(self.body(h))


def build():
    common.seed()
    model = Marked()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 16, generator=g)
    y = torch.randint(0, 6, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("marked", build)

"""Odd parameters: a 0-d learnable scale, a frozen (requires_grad=False) Linear,
an unused Linear, a raw nn.Parameter matrix used via matmul in a late layer.
Input 4x16 f32, mse vs 4x8 target. Usage:
/usr/bin/python3 params.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class Params(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.scale = nn.Parameter(torch.tensor(1.5))
        self.frozen = nn.Linear(16, 16)
        self.frozen.weight.requires_grad_(False)
        self.frozen.bias.requires_grad_(False)
        self.unused = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 16)
        self.w = nn.Parameter(torch.randn(16, 8) * 0.2)

    def forward(self, x):
        h = torch.tanh(self.fc1(x)) * self.scale
        h = torch.relu(self.frozen(h))
        h = self.fc2(h) * self.scale
        return h @ self.w


def build():
    common.seed()
    model = Params()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 16, generator=g)
    y = torch.randn(rows, 8, generator=g)
    return model, (x[:MB],), (x,), y, "mse", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("params", build)

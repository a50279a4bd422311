"""Untrained tensors read by several stages: a buffer scales every layer and
a frozen (requires_grad=False) matrix projects the input and the output, so
after a split both are tied across stages but have no gradient to sum.
Input 4x12 f32, mse vs 4x12 target. Usage:
/usr/bin/python3 sharedbuf.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class SharedBuf(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(12, 12) for _ in range(4)])
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 12))
        self.proj = nn.Parameter(0.3 * torch.randn(12, 12), requires_grad=False)

    def forward(self, x):
        h = x @ self.proj
        for layer in self.layers:
            h = h + torch.tanh(layer(h) * self.scale)
        return h @ self.proj


def build():
    common.seed()
    model = SharedBuf()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 12, generator=g)
    y = torch.randn(rows, 12, generator=g)
    return model, (x[:MB],), (x,), y, "mse", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("sharedbuf", build)

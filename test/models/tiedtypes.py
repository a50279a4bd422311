"""Untrained tensors of dtypes Gloo's collectives lack, read by every
stage: a bool mask and a bfloat16 scale buffer. After a split each is a
tied group, broadcast from the first stage at start (as uint8 and float16
bytes). Input 4x12 f32, mse vs 4x12 target. Usage:
/usr/bin/python3 tiedtypes.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class TiedTypes(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(12, 12) for _ in range(4)])
        self.register_buffer("mask", torch.arange(12) % 3 != 0)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 12).to(torch.bfloat16))

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = h + torch.tanh(layer(h) * self.scale.float()) * self.mask
        return h


def build():
    common.seed()
    model = TiedTypes()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 12, generator=g)
    y = torch.randn(rows, 12, generator=g)
    return model, (x[:MB],), (x,), y, "mse", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("tiedtypes", build)

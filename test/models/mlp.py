"""MLP: Linear(32,64)/ReLU/Linear(64,32)/ReLU/Linear(32,10); input 4x32 f32,
10 classes, cross_entropy. Usage: /usr/bin/python3 mlp.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class MLP(nn.Module):
    def __init__(self, d_in=32, hidden=64, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 32)
        self.act2 = nn.ReLU()
        self.fc3 = nn.Linear(32, classes)

    def forward(self, x):
        return self.fc3(self.act2(self.fc2(self.act1(self.fc1(x)))))


def build():
    common.seed()
    model = MLP()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 32, generator=g)
    y = torch.randint(0, 10, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("mlp", build)

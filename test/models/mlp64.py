"""A float64 MLP (Linear/ReLU/Linear/Tanh/Linear): weights, inputs and
activations are all double. Input 4x8 f64, 4 classes. Usage:
/usr/bin/python3 mlp64.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class MLP64(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.relu(self.fc1(x)))))


def build():
    common.seed()
    model = MLP64().double()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", \
        {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("mlp64", build)

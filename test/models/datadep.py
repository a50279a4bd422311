"""Sizes that depend on the data: the mean of masked_select's positive
entries (divided by its numel), a count from nonzero's shape, boolean-mask
indexing, each feeding a Linear stack. Input 4x8 f32, 3 classes. Usage:
/usr/bin/python3 datadep.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class DataDep(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        sel = torch.masked_select(h, h > 0)            # [k]
        s = sel.sum() / (sel.numel() + 1)
        count = torch.nonzero(h > 0.5).shape[0]        # k2 rows
        h = self.fc2(h * s + count * 0.01)
        low = h[h < -0.2]                              # [k3]
        h = torch.relu(self.fc3(h)) + low.sum() * 0.1
        return self.head(h)


def build():
    common.seed()
    model = DataDep()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 8, generator=g)
    y = torch.randint(0, 3, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", \
        {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("datadep", build)

"""Nested tuple outputs: Linear/Tanh, an LSTM whose whole result is
returned, `(logits, (h, c))`, after a head on the last time step. The
importer flattens it to `(logits, h, c)`; the loss is on the first.
Input 2x6x8 f32, 4 classes. Usage: /usr/bin/python3 nestedout.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 2, 2, 3


class NestedOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 12)
        self.lstm = nn.LSTM(12, 12, batch_first=True)
        self.head = nn.Linear(12, 4)

    def forward(self, x):
        out, (h, c) = self.lstm(torch.tanh(self.proj(x)))
        return self.head(out[:, -1]), (h, c)


def build():
    common.seed()
    model = NestedOut()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 6, 8, generator=g)
    y = torch.randint(0, 4, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", \
        {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("nestedout", build)

"""One Conv1d weight used by the first and the last conv (no Linear at
all), so once split it is a tied weight on stages that have no linear
whose weight gradient --defer-weight-grads could defer. Input 4x2x6 f32,
mse vs 4x2x6. Usage: /usr/bin/python3 tiedconv.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class TiedConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Conv1d(2, 2, 3, padding=1, bias=False)
        self.mid = nn.Conv1d(2, 2, 3, padding=1)
        self.last = nn.Conv1d(2, 2, 3, padding=1, bias=False)
        self.last.weight = self.first.weight

    def forward(self, x):
        h = torch.tanh(self.first(x))
        h = torch.tanh(self.mid(h)) + h
        return self.last(h)


def build():
    common.seed()
    model = TiedConv()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 2, 6, generator=g)
    y = torch.randn(rows, 2, 6, generator=g)
    return model, (x[:MB],), (x,), y, "mse", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("tiedconv", build)

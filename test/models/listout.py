"""Lists of tensors among the outputs: a small feature pyramid returns its
levels as a list, and the logits again split by `unbind` (a list made by an
op), `(logits, [p1, p2, p3], [l0, l1, l2])`. The importer flattens it to
seven outputs; the loss is on the first. Input 2x3x8x8 f32, 3 classes.
Usage: /usr/bin/python3 listout.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 2, 2, 3


class ListOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1)
        self.c2 = nn.Conv2d(6, 8, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        p1 = torch.relu(self.c1(x))
        p2 = torch.relu(self.c2(p1))
        p3 = torch.relu(self.c3(p2))
        logits = self.head(p3.mean((2, 3)))
        return logits, [p1, p2, p3], list(logits.unbind(1))


def build():
    common.seed()
    model = ListOut()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 3, 8, 8, generator=g)
    y = torch.randint(0, 3, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", \
        {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("listout", build)

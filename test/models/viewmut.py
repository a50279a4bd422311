"""In-place writes into views of activations, each read again through the
base or through another view: slice assignment h[:, 0] = 0, h[:, 1:3] *= 2,
h[..., 2:].add_(1), index_put_ through a tensor index, masked_fill_ on a
narrow view, clamp_ on a select view, mul_ through view(-1), a transpose
and a permute written into, a slice taken before its base is written and
read after, and a row written through unsqueeze while a disjoint row is
read.
Input 4x6x8 f32, 5 classes. Usage: /usr/bin/python3 viewmut.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class ViewMut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.fc3 = nn.Linear(8, 8)
        self.fc4 = nn.Linear(8, 8)
        self.head = nn.Linear(8, 5)
        self.register_buffer("idx", torch.tensor([0, 3, 5]))

    def forward(self, x):
        h = self.fc1(x)                       # [B,6,8]
        h[:, 0] = 0.0
        h[:, 1:3] *= 2.0
        h[..., 2:].add_(1.0)
        early = h[:, :, :4]                   # read after h is written
        h.view(-1).mul_(0.5)
        h.transpose(1, 2)[:, 0].sub_(0.25)    # column 0 of every row
        g = torch.tanh(self.fc2(h + early.sum(-1, keepdim=True))) * 1.0
        g[:, self.idx] = g[:, self.idx] * 0.5 + 0.25
        g.narrow(2, 0, 3).masked_fill_(x[:, :, :3] > 1.0, 0.0)
        g.select(1, 4).clamp_(min=-0.2, max=0.2)
        g.permute(2, 0, 1)[1].mul_(3.0)
        u = self.fc3(g)
        last = u[:, -1]                       # disjoint from the write
        u.unsqueeze(1)[:, :, 0].mul_(2.0)     # row 0 of every sample
        u = self.fc4(u + last.unsqueeze(1))
        return self.head(u.mean(1))


def build():
    common.seed()
    model = ViewMut()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 6, 8, generator=g)
    y = torch.randint(0, 5, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", \
        {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("viewmut", build)

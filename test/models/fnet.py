"""FNet-style Fourier mixing: a Linear then fft2 makes a complex64 tensor,
which the next block (its own module, `mix2`, so a split point can go
before it) reads through `.real` and an rfft magnitude. Split at
`mix2:begin`, the complex tensor crosses stages forward and its gradient
crosses back. Input 4x8x8 f32, 4 classes. Usage:
/usr/bin/python3 fnet.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class Mix1(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.fft.fft2(self.fc(x))


class Mix2(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8 + 5, 8)

    def forward(self, z, x):
        h = self.norm(z.real + x)
        mag = torch.fft.rfft(h, dim=-1).abs()
        return torch.relu(self.fc(torch.cat([h, mag], -1)))


class FNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix1 = Mix1()
        self.mix2 = Mix2()
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.mix2(self.mix1(x), x).mean(1))


def build():
    common.seed()
    model = FNet()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 8, 8, generator=g)
    y = torch.randint(0, 4, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", \
        {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("fnet", build)

"""Random ops in training: an MLP with nn.Dropout(0.3) after each hidden
layer, residual blocks kept or dropped per row (stochastic depth, as
torchvision's StochasticDepth draws it: `empty(...).bernoulli_(0.8)`), and
Gaussian and uniform noise added to the activations.
Like torchvision's, they are off in eval mode. PyTorch's own random stream
cannot be matched; pippy-run draws each call from (--seed, step,
micro-batch, op), so its runs agree with each other on any split and
schedule, and its --infer (each draw its expected value) computes eval
mode's output (test/Zoo/dropnet.test). Input 4x16 f32, 6
classes, cross_entropy.
Usage: /usr/bin/python3 dropnet.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3
SURVIVAL = 0.8


class Residual(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        if not self.training:  # as torchvision's stochastic depth
            return x + h
        keep = torch.empty(x.shape[0], 1).bernoulli_(SURVIVAL)
        return x + h * keep / SURVIVAL


class Noise(nn.Module):
    """Noise injection, with each way a model draws noise: randn_like,
    rand_like, and the in-place uniform_ and normal_ on a fresh tensor."""

    def forward(self, x):
        if not self.training:
            return x
        noise = (torch.randn_like(x) + (torch.rand_like(x) - 0.5)
                 + torch.empty_like(x).uniform_(-0.5, 0.5)
                 + torch.empty_like(x).normal_(0.0, 1.0))
        return x + 0.05 * noise


class DropNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.drop1 = nn.Dropout(0.3)
        self.res1 = Residual(32)
        self.res2 = Residual(32)
        self.noise = Noise()
        self.hid = nn.Linear(32, 32)
        self.drop2 = nn.Dropout(0.3)
        self.out = nn.Linear(32, 6)

    def forward(self, x):
        h = self.drop1(torch.relu(self.inp(x)))
        h = self.noise(self.res2(self.res1(h)))
        return self.out(self.drop2(torch.relu(self.hid(h))))


def build():
    common.seed()
    model = DropNet()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 16, generator=g)
    y = (x[:, :6].argmax(dim=1) + 0) % 6  # learnable: the largest of 6 features
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("dropnet", build)

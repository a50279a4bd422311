"""Small residual CNN (no BatchNorm): conv stem, 2 residual blocks
(Conv2d+GroupNorm+ReLU twice, skip add), adaptive avg pool, linear head.
Input 2x3x16x16 f32, 10 classes, cross_entropy.
Usage: /usr/bin/python3 resnet.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 2, 2, 3
C = 16


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(4, c)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(4, c)
        self.relu2 = nn.ReLU()

    def forward(self, x):
        h = self.relu1(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        return self.relu2(h + x)


class ResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, C, 3, padding=1)
        self.stem_norm = nn.GroupNorm(4, C)
        self.stem_relu = nn.ReLU()
        self.block1 = Block(C)
        self.block2 = Block(C)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(C, classes)

    def forward(self, x):
        h = self.stem_relu(self.stem_norm(self.stem(x)))
        h = self.block2(self.block1(h))
        return self.fc(torch.flatten(self.pool(h), 1))


def build():
    common.seed()
    model = ResNet()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 3, 16, 16, generator=g)
    y = torch.randint(0, 10, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("resnet", build)

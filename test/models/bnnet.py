"""Small CNN with BatchNorm in training mode: conv stem with BatchNorm2d, 2
residual blocks (Conv2d+BatchNorm2d+ReLU twice, skip add), adaptive avg
pool, BatchNorm1d, linear head. Each micro-batch's forward normalises with
its own batch statistics and updates the running statistics and
num_batches_tracked, which pippy must carry as stage state; --infer uses
the running statistics (eval semantics). Input 4x3x8x8 f32, 10 classes,
cross_entropy.
Usage: /usr/bin/python3 bnnet.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3
C = 8


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c, momentum=0.3)
        self.relu2 = nn.ReLU()

    def forward(self, x):
        h = self.relu1(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return self.relu2(h + x)


class BNNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, C, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(C)
        self.stem_relu = nn.ReLU()
        self.block1 = Block(C)
        self.block2 = Block(C)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head_bn = nn.BatchNorm1d(C)
        self.fc = nn.Linear(C, classes)

    def forward(self, x):
        h = self.stem_relu(self.stem_bn(self.stem(x)))
        h = self.block2(self.block1(h))
        return self.fc(self.head_bn(torch.flatten(self.pool(h), 1)))


def build():
    common.seed()
    model = BNNet()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 3, 8, 8, generator=g) * 2 + 0.5
    y = torch.randint(0, 10, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("bnnet", build)

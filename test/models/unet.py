"""U-Net-style model with long skip connections: encoder at 16x16 and 8x8
(avg-pool downsampling), 4x4 bottleneck, decoder with nearest-neighbour
F.interpolate upsampling and torch.cat with the encoder features (each skip
spans several layers), GroupNorm everywhere, 1x1 output conv.
Input 2x3x16x16 f32, output 2x3x16x16, mse against a random target.
Usage: /usr/bin/python3 unet.py OUT_DIR"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import common

MB, M, STEPS = 2, 2, 3


class ConvBlock(nn.Module):
    """Conv3x3 -> GroupNorm -> ReLU, twice."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm1 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(4, cout)

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(x)))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = ConvBlock(3, 16)      # 16x16
        self.enc2 = ConvBlock(16, 32)     # 8x8
        self.mid = ConvBlock(32, 32)      # 4x4 (bottleneck)
        self.dec2 = ConvBlock(64, 32)     # 8x8, cat(up(mid), e2)
        self.dec1 = ConvBlock(48, 16)     # 16x16, cat(up(d2), e1)
        self.out = nn.Conv2d(16, 3, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.avg_pool2d(e1, 2))
        m = self.mid(F.avg_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(m, scale_factor=2.0, mode="nearest"), e2], dim=1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2.0, mode="nearest"), e1], dim=1))
        return self.out(d1)


def build():
    common.seed()
    model = UNet()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 3, 16, 16, generator=g)
    y = torch.randn(rows, 3, 16, 16, generator=g)
    return model, (x[:MB],), (x,), y, "mse", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("unet", build)

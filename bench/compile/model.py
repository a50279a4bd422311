"""The model gen_ir.py writes the graph IR of, in PyTorch (check_gen.py traces
and imports it; run.py traces it with torch.fx). Needs torch."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def build(blocks, width=64, seq=16):
    """A stack of `blocks` pre-LayerNorm transformer blocks (single-head causal
    attention, GELU MLP) and a final LayerNorm, on input [batch, seq, width]."""
    W, T = width, seq

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k = nn.Linear(W, W), nn.Linear(W, W)
            self.v, self.proj = nn.Linear(W, W), nn.Linear(W, W)
            self.scale = 1.0 / math.sqrt(W)
            self.register_buffer("mask", torch.tril(torch.ones(T, T)))

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            att = (q @ k.transpose(-2, -1)) * self.scale
            att = att.masked_fill(self.mask == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            return self.proj(att @ v)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.gelu, self.proj = nn.Linear(W, 4 * W), nn.GELU(), nn.Linear(4 * W, W)

        def forward(self, x):
            return self.proj(self.gelu(self.fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(W), Attn()
            self.ln_2, self.mlp = nn.LayerNorm(W), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.h = nn.ModuleList([Block() for _ in range(blocks)])
            self.ln_f = nn.LayerNorm(W)

        def forward(self, x):
            for blk in self.h:
                x = blk(x)
            return self.ln_f(x)

    return Model()

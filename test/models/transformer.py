"""Transformer encoder: Linear(16,32) input projection over a 2x8x16 input,
2 x nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
dropout=0.0, batch_first=True), mean pool over the sequence, Linear(32,5) head,
cross_entropy. Usage: /usr/bin/python3 transformer.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 2, 2, 3
SEQ, D_IN, D, CLASSES = 8, 16, 32, 5


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(D_IN, D)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model=D, nhead=4, dim_feedforward=64,
                                       dropout=0.0, batch_first=True)
            for _ in range(2)])
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x):
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(dim=1))


def build(microbatches=M):
    common.seed()
    model = Encoder()
    g = common.data_gen()
    rows = MB * microbatches * STEPS
    x = torch.randn(rows, SEQ, D_IN, generator=g)
    y = torch.randint(0, CLASSES, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": microbatches, "steps": STEPS}


if __name__ == "__main__":
    common.main("transformer", build)

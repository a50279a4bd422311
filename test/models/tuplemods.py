"""Modules that return tuples, as HuggingFace blocks do, read back by their
caller: a token module returning a bool mask and int64 positions, three
pre-LN blocks each returning `(hidden, aux)` where the caller keeps
`out[0]` and sums `out[1]`, sparse embeddings (`sparse=True`) of the
positions and of the tokens, the latter tied to the output head, and a
second output (the summed aux losses).
Split points after a tuple-returning module (`tokens:end`,
`blocks.0:end`) leave only tensors live. Usage:
/usr/bin/python3 tuplemods.py OUT_DIR"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import common

MB, M, STEPS = 2, 2, 3
V, D, T = 16, 8, 6


class Tokens(nn.Module):
    def forward(self, tok):
        mask = tok > 0
        pos = torch.cumsum(mask.long(), 1) * mask.long()
        return mask, pos


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 2 * D)
        self.fc2 = nn.Linear(2 * D, D)

    def forward(self, h, mask):
        y = self.fc2(F.gelu(self.fc1(self.ln(h))))
        return h + y * mask.unsqueeze(-1), y.pow(2).mean()


class TupleMods(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = Tokens()
        self.emb = nn.Embedding(V, D, sparse=True)
        self.pos = nn.Embedding(T + 1, D, sparse=True)
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tok):
        mask, pos = self.tokens(tok)
        h = self.emb(tok) + self.pos(pos)
        aux = torch.zeros(())
        for block in self.blocks:
            out = block(h, mask)
            h = out[0]
            aux = aux + out[1]
        return self.head(h), aux


def build():
    common.seed()
    model = TupleMods()
    g = common.data_gen()
    rows = MB * M * STEPS
    tok = torch.randint(0, V, (rows, T), generator=g)
    y = torch.randint(0, V, (rows, T), generator=g)
    return model, (tok[:MB],), (tok,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("tuplemods", build)

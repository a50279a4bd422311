"""EmbeddingBag(mean) + Embedding sum pooling + Linear; integer input 4x6 int64,
cross_entropy over 3 classes. Usage:
/usr/bin/python3 embbag.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class EmbBag(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(20, 8, mode="mean")
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(16, 16)
        self.act = nn.Mish()
        self.head = nn.Linear(16, 3)

    def forward(self, tok):
        a = self.bag(tok)
        b = self.emb(tok).sum(dim=1)
        return self.head(self.act(self.fc(torch.cat([a, b], dim=1))))


def build():
    common.seed()
    model = EmbBag()
    g = common.data_gen()
    rows = MB * M * STEPS
    tok = torch.randint(0, 20, (rows, 6), generator=g)
    y = torch.randint(0, 3, (rows,), generator=g)
    return model, (tok[:MB],), (tok,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("embbag", build)

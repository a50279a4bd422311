"""Two inputs, two outputs: x (2x6x8 f32) and a boolean-free mask source
(2x6 int64 tokens). chunk/split/stack/masked_fill/where/softmax/log_softmax.
Outputs: logits 2x5 (loss on output 0, cross_entropy) and aux 2x6. Usage:
/usr/bin/python3 twoio.py OUT_DIR"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import common

MB, M, STEPS = 2, 2, 3


class TwoIO(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.fc = nn.Linear(8, 12)
        self.gate = nn.Linear(4, 4)
        self.score = nn.Linear(4, 1)
        self.mix = nn.Linear(8, 8)
        self.head = nn.Linear(8, 5)

    def forward(self, x, tok):
        h = x + self.emb(tok)
        a, b, c = self.fc(h).chunk(3, dim=-1)          # 3 x [B,6,4]
        g = torch.sigmoid(self.gate(b))
        u = torch.where(a > 0, a * g, c)
        s = self.score(u).squeeze(-1)                   # [B,6]
        s = s.masked_fill(tok == 0, -1e4)
        w = F.softmax(s, dim=-1)
        p, q = torch.split(u, [2, 2], dim=-1)
        st = torch.stack([p, q * 2.0], dim=2).reshape(u.shape[0], 6, 4)
        pooled = torch.cat([(w.unsqueeze(-1) * st).sum(1), u.max(dim=1)[0]], -1)
        logits = self.head(F.softplus(self.mix(pooled)))
        aux = F.log_softmax(s, dim=-1)
        return logits, aux


def build():
    common.seed()
    model = TwoIO()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 6, 8, generator=g)
    tok = torch.randint(0, 10, (rows, 6), generator=g)
    y = torch.randint(0, 5, (rows,), generator=g)
    return model, (x[:MB], tok[:MB]), (x, tok), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("twoio", build)

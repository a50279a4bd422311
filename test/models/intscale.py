"""Python numbers applied to integer tensors: token ids times 0.5, a
boolean mask times 2.5 and a token count times 0.01 are float32 in PyTorch
(the numbers do not promote to float64), fed to Linears with an embedding.
Input 4x6 si64, 3 classes. Usage: /usr/bin/python3 intscale.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 4, 2, 3


class IntScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, tok):
        h = self.emb(tok).mean(-1) + tok * 0.5 + (tok > 4) * 2.5
        h = torch.tanh(self.fc1(h)) + tok.sum(1, keepdim=True) * 0.01
        return self.fc2(h)


def build():
    common.seed()
    model = IntScale()
    g = common.data_gen()
    rows = MB * M * STEPS
    tok = torch.randint(0, 10, (rows, 6), generator=g)
    y = torch.randint(0, 3, (rows,), generator=g)
    return model, (tok[:MB],), (tok,), y, "cross_entropy", \
        {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("intscale", build)

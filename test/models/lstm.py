"""LSTM classifier: Linear(8,16)/Tanh, nn.LSTM(16,16,batch_first), last
timestep, Linear(16,4). Input 2x6x8 f32, cross_entropy. Usage:
/usr/bin/python3 lstm.py OUT_DIR"""
import torch
import torch.nn as nn

import common

MB, M, STEPS = 2, 2, 3


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.act = nn.Tanh()
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.mid = nn.Linear(16, 16)
        self.act2 = nn.ELU()
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = self.act(self.inp(x))
        h, _ = self.lstm(h)
        h = h[:, -1]
        return self.head(self.act2(self.mid(h)))


def build():
    common.seed()
    model = LSTMNet()
    g = common.data_gen()
    rows = MB * M * STEPS
    x = torch.randn(rows, 6, 8, generator=g)
    y = torch.randint(0, 4, (rows,), generator=g)
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": M, "steps": STEPS}


if __name__ == "__main__":
    common.main("lstm", build)

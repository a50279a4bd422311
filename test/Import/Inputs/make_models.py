"""Writes small TorchScript modules for the importer's tests into OUT_DIR.

  tiny.pt        Linear -> ReLU -> Linear with a residual add and a buffer
  tuple_out.pt   returns a tuple of two tensors
  scripted_if.pt scripted control flow that cannot be inlined
  inplace_buf.pt writes to a buffer in place
"""
import sys

import torch
import torch.nn as nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 4)
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x):
        h = self.act(self.fc1(x)) + x
        return self.fc2(h) * self.scale


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y, y.relu()


class ScriptedIf(nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):
            return x * 2
        return x


class InplaceBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count.add_(1)
        return x + self.count


def main(out):
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    torch.jit.trace(Tiny(), (x,)).save(f"{out}/tiny.pt")
    torch.jit.trace(TupleOut(), (torch.randn(2, 4),)).save(f"{out}/tuple_out.pt")
    torch.jit.script(ScriptedIf()).save(f"{out}/scripted_if.pt")
    torch.jit.trace(InplaceBuffer(), (torch.randn(2, 4),),
                    check_trace=False).save(f"{out}/inplace_buf.pt")


if __name__ == "__main__":
    main(sys.argv[1])

"""Writes small TorchScript modules for the importer's tests into OUT_DIR.

  tiny.pt        Linear -> ReLU -> Linear with a residual add and a buffer
  tuple_out.pt   returns a tuple of two tensors
  scripted_if.pt scripted control flow that cannot be inlined
  inplace_buf.pt writes to a buffer in place
  inplace_bufview.pt writes to a buffer in place through a slice of it
  out_buf.pt writes to a buffer through an out= op
  out_act.pt writes results into fresh tensors through out= ops
  index_shapes.pt indexes with integer tensors and with a boolean mask
  chunk_write.pt writes into a chunk's piece, then reads the chunked tensor
  int_div.pt     divides by an integer input (zeros would fail)
  int_offset.pt  looks up an embedding at an integer input minus one
  int_far.pt     looks up an embedding at an integer input plus 9 (fails on
                 zeros and on ones)
  count_ramp.pt  (scripted) an arange as long as a count read out of a tensor
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


class InplaceBufferView(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count[0:1].add_(1)
        return x + self.count


class ChunkWrite(nn.Module):
    def forward(self, x):
        h = x * 2
        a, b = h.chunk(2, dim=1)
        a.mul_(3)
        return b + h.sum()


class IntDiv(nn.Module):
    def forward(self, x, n):
        return x * torch.div(n, n, rounding_mode="floor")


class IntOffset(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4)

    def forward(self, tokens):
        return self.emb(tokens - 1)


class IntFar(IntOffset):
    def forward(self, tokens):
        return self.emb(tokens + 9)


class CountRamp(nn.Module):
    def forward(self, x):
        n = int((x > 0).sum())
        return x * torch.arange(n, dtype=x.dtype).sum()


class OutBuffer(nn.Module):
    """spectral_norm-style: an out= op writes into a buffer."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("u", torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            torch.div(self.u + 1.0, 1.5, out=self.u)
        return self.fc(x) * self.u


class OutActivation(nn.Module):
    """out= ops into fresh tensors, then read."""
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        tmp = torch.empty_like(x)
        torch.add(x, 1.0, alpha=2.0, out=tmp)
        prod = torch.empty(2, 4)
        torch.mul(tmp, x, out=prod)
        return self.fc(prod) + tmp


class IndexShapes(nn.Module):
    """Integer-tensor indexing (static shape) and a boolean mask (not)."""
    def __init__(self):
        super().__init__()
        self.register_buffer("perm", torch.tensor([3, 1, 0, 2]))
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x[:, self.perm])
        rows = h[torch.tensor([1, 0])]
        picked = h[h > 0]
        return rows * picked.sum()


def main(out):
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    torch.jit.trace(Tiny(), (x,)).save(f"{out}/tiny.pt")
    torch.jit.trace(TupleOut(), (torch.randn(2, 4),)).save(f"{out}/tuple_out.pt")
    torch.jit.script(ScriptedIf()).save(f"{out}/scripted_if.pt")
    torch.jit.trace(InplaceBuffer(), (torch.randn(2, 4),),
                    check_trace=False).save(f"{out}/inplace_buf.pt")
    torch.jit.trace(InplaceBufferView(), (torch.randn(2, 4),),
                    check_trace=False).save(f"{out}/inplace_bufview.pt")
    torch.jit.trace(ChunkWrite(), (torch.randn(2, 4),)).save(
        f"{out}/chunk_write.pt")
    torch.jit.trace(IntDiv(), (torch.randn(2, 3), torch.ones(2, 3, dtype=torch.long))).save(
        f"{out}/int_div.pt")
    torch.jit.trace(IntOffset(), (torch.ones(2, 3, dtype=torch.long),)).save(
        f"{out}/int_offset.pt")
    torch.jit.trace(IntFar(), (torch.full((2, 3), -6, dtype=torch.long),)).save(
        f"{out}/int_far.pt")
    torch.jit.script(CountRamp()).save(f"{out}/count_ramp.pt")
    torch.jit.trace(OutBuffer(), (torch.randn(2, 4),),
                    check_trace=False).save(f"{out}/out_buf.pt")
    torch.jit.trace(OutActivation(), (torch.randn(2, 4),)).save(
        f"{out}/out_act.pt")
    torch.jit.trace(IndexShapes(), (torch.randn(2, 4),),
                    check_trace=False).save(f"{out}/index_shapes.pt")


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/python3
"""The default model of `make demo`: a small GPT-style decoder whose lm_head
is tied to the token embedding, traced at micro-batch size, with a data set
it can learn (each sequence counts upwards modulo the vocabulary, so the next
token is predictable and the loss falls quickly).

Usage: gpt.py OUT_DIR
Writes OUT_DIR/gpt.pt and OUT_DIR/data.safetensors (input, target).
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "test", "models"))
import st  # noqa: E402

VOCAB, DIM, SEQ, LAYERS, HEADS = 64, 64, 16, 4, 4
MICRO_BATCH, ROWS = 4, 512


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.ln_2 = nn.LayerNorm(DIM)
        self.fc = nn.Linear(DIM, 4 * DIM)
        self.out = nn.Linear(4 * DIM, DIM)
        self.register_buffer("mask", torch.tril(torch.ones(SEQ, SEQ)))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln_1(x)).chunk(3, dim=-1)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        att = att.masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.h = nn.Sequential(*[Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("pos", torch.arange(SEQ))

    def forward(self, tokens):
        x = self.wte(tokens) + self.wpe(self.pos)
        return self.lm_head(self.ln_f(self.h(x)))


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = GPT()
    g = torch.Generator().manual_seed(1)
    start = torch.randint(0, VOCAB, (ROWS, 1), generator=g)
    seq = (start + torch.arange(SEQ + 1)) % VOCAB
    st.save(os.path.join(out, "data.safetensors"),
            {"input": seq[:, :-1].contiguous(), "target": seq[:, 1:].contiguous()})
    traced = torch.jit.trace(model, (seq[:MICRO_BATCH, :-1],))
    traced.save(os.path.join(out, "gpt.pt"))
    params = sum(p.numel() for p in model.parameters())
    print(f"gpt: {LAYERS} blocks, {params} parameters, vocabulary {VOCAB}, "
          f"sequence {SEQ}; {ROWS} training rows")


if __name__ == "__main__":
    main(sys.argv[1])

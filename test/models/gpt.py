"""GPT-style decoder: token embedding (vocab 64, dim 32) + learned positional
embedding (seq 8), 2 pre-LN blocks (hand-written causal self-attention with a
registered causal-mask buffer, GELU MLP), final LayerNorm, lm_head tied to the
token embedding (lm_head.weight IS wte.weight). No dropout at all.
Input 2x8 int64 tokens, target 2x8 int64 (next token), cross_entropy over
logits [2,8,64]. Usage: /usr/bin/python3 gpt.py OUT_DIR"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import common

MB, M, STEPS = 2, 2, 3
VOCAB, DIM, SEQ, HEADS, LAYERS = 64, 32, 8, 4, 2


def configure(vocab, dim, seq, heads, layers):
    """Other sizes for the modules built after it (bench/gpu/gpt_speed.py's
    GPT of about 100M parameters)."""
    global VOCAB, DIM, SEQ, HEADS, LAYERS
    VOCAB, DIM, SEQ, HEADS, LAYERS = vocab, dim, seq, heads, layers


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(DIM, DIM)
        self.k = nn.Linear(DIM, DIM)
        self.v = nn.Linear(DIM, DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.hd = DIM // HEADS
        self.scale = 1.0 / math.sqrt(self.hd)
        self.register_buffer(
            "mask", torch.tril(torch.ones(SEQ, SEQ)).view(1, 1, SEQ, SEQ))

    def forward(self, x):
        B, T, C = x.shape
        hd = self.hd
        q = self.q(x).view(B, T, HEADS, hd).transpose(1, 2)
        k = self.k(x).view(B, T, HEADS, hd).transpose(1, 2)
        v = self.v(x).view(B, T, HEADS, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(DIM, 4 * DIM)
        self.gelu = nn.GELU()
        self.proj = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        return self.proj(self.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(DIM)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(DIM)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.register_buffer("pos", torch.arange(SEQ, dtype=torch.long))
        for n, p in self.named_parameters():
            if n.endswith("weight") and p.dim() == 2:
                nn.init.normal_(p, mean=0.0, std=0.2)
            elif n.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(self.pos[:T])
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


def build(microbatches=M):
    common.seed()
    model = GPT()
    g = common.data_gen()
    rows = MB * microbatches * STEPS
    seq = torch.randint(0, VOCAB, (rows, SEQ + 1), generator=g)
    x, y = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
    return model, (x[:MB],), (x,), y, "cross_entropy", {"microbatches": microbatches, "steps": STEPS}


if __name__ == "__main__":
    common.main("gpt", build)

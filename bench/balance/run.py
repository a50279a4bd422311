#!/usr/bin/python3
"""Balance benchmark: predicted and measured stage times of the three split
policies on two models whose costs are uneven.

Usage:
    /usr/bin/python3 bench/balance/run.py --bin build/bin [--steps 12]
        [--work /tmp/pippy-bench-balance] [--out results.json]

Models (traced, imported with pippy-import):
  gpt     a GPT-style decoder: a 16384 x 256 token embedding whose weight the
          lm_head shares (tied), 4 blocks, sequence 64, micro-batch 4
  tenfold 4 cheap layers (Linear(64, 64) + ReLU on 256 rows per sample), then
          4 layers about ten times as costly with the same parameters
          (a Linear(64, 64) query attending over the 256 rows); so the
          parameter count says nothing about cost

Each is split into 2 stages by --pippy-split policy=balanced, params and
uniform, and by policy=balanced with profile=F, F being the per-op times
`pippy-run --profile` measured during the balanced split's run ("profiled"). For every split the predicted stage costs come from --pippy-report
(format=json), and the measured ones from a 2-rank 1F1B run's --trace: the
mean forward + backward time per micro-batch of each stage, through the
interpreter, after the first step. The slowest stage decides a pipeline's
speed, so the table compares the slowest stages.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "models"))
import st  # noqa: E402


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) / (q.size(-1) ** 0.5)
        n = x.size(1)
        mask = torch.ones(n, n).tril() == 0
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        x = x + self.proj(att @ v)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=16384, d=256, layers=4, seq=64):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.Sequential(*[Block(d) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        pos = torch.arange(idx.size(1))
        return self.lm_head(self.ln_f(self.h(self.wte(idx) + self.wpe(pos))))


class Cheap(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Costly(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(64, 64)

    def forward(self, x):
        att = (self.q(x) @ x.transpose(-2, -1) / 8.0).softmax(-1)
        return att @ x


def tenfold():
    return nn.Sequential(*[Cheap() for _ in range(4)],
                         *[Costly() for _ in range(4)])


def sh(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def build(work, name):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    mb, rows = 4, 64
    if name == "gpt":
        model = GPT()
        x = torch.randint(0, 16384, (rows, 64), generator=g)
        y = torch.randint(0, 16384, (rows, 64), generator=g)
        shapes, loss = f"{mb}x64xsi64", "cross_entropy"
    else:
        model = tenfold()
        x = torch.randn(rows, 256, 64, generator=g)
        y = torch.randn(rows, 256, 64, generator=g)
        shapes, loss = f"{mb}x256x64xf32", "mse"
    torch.jit.trace(model, (x[:mb],)).save(f"{work}/{name}.pt")
    st.save(f"{work}/{name}.data.safetensors", {"input": x, "target": y})
    return shapes, loss


def measure(trace_path, stages):
    events = [e for e in json.load(open(trace_path))["traceEvents"]
              if e.get("ph") == "X"]
    per = []
    for s in range(stages):
        f = [e["dur"] for e in events if e["name"].startswith(f"{s}F")]
        b = [e["dur"] for e in events if e["name"].startswith(f"{s}B")]
        # Drop the first step's micro-batches (warm-up).
        f, b = f[len(f) // 12:], b[len(b) // 12:]
        per.append((statistics.mean(f) + statistics.mean(b)) / 1000.0)
    return per


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--work", default="/tmp/pippy-bench-balance")
    ap.add_argument("--out")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = "1"
    b, w = args.bin, args.work
    results = {}
    for name in ("gpt", "tenfold"):
        shapes, loss = build(w, name)
        sh([f"{b}/pippy-import", f"{w}/{name}.pt", "--input-shapes", shapes,
            "-o", f"{w}/{name}.mlir", "--weights", f"{w}/{name}.safetensors"])
        profile = f"{w}/{name}.profile.json"
        for policy in ("balanced", "params", "uniform", "profiled"):
            pipe = f"{w}/{name}.{policy}.mlir"
            spec = (f"stages=2 profile={profile}" if policy == "profiled"
                    else f"stages=2 policy={policy}")
            sh([f"{b}/pippy-opt", f"{w}/{name}.mlir",
                f"--pippy-split={spec}", "-o", pipe])
            report = json.loads(sh([f"{b}/pippy-opt", pipe,
                                    "--pippy-report=format=json", "-o",
                                    "/dev/null"]))
            predicted = [s["predicted"] for s in report["stages"]]
            trace = f"{w}/{name}.{policy}.trace.json"
            metrics = f"{w}/{name}.{policy}.metrics.json"
            sh([f"{b}/pippy-run", pipe, "--nproc", "2", "--schedule", "1f1b",
                "--microbatches", "4", "--steps", str(args.steps), "--data",
                f"{w}/{name}.data.safetensors", "--loss", loss, "--lr",
                "0.01", "--trace", trace, "--metrics", metrics] +
               (["--profile", profile] if policy == "balanced" else []))
            measured = measure(trace, 2)
            steps = json.load(open(metrics))["steps"][1:]
            step_ms = statistics.median(s["step_time_s"] for s in steps) * 1e3
            results[f"{name}/{policy}"] = {
                "predicted": predicted, "measured_ms": measured,
                "step_ms": step_ms}
            print(f"{name:8s} {policy:9s} predicted "
                  f"{predicted[0]:>12d} {predicted[1]:>12d} "
                  f"(max {max(predicted):>12d})  measured F+B per "
                  f"micro-batch {measured[0]:7.2f} {measured[1]:7.2f} ms "
                  f"(max {max(measured):7.2f})  step {step_ms:7.1f} ms",
                  flush=True)
    if args.out:
        json.dump(results, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()

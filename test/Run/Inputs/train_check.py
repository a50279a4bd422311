"""Trains a small model with PyTorch and with pippy-run under the same
options and compares per-step losses and final weights.

Usage: train_check.py OUT_DIR BIN_DIR CASE [NPROC [SCHEDULE]]
CASE is one of:
  adamw          AdamW with torch.optim's defaults (weight decay 0.01)
  sgd-momentum   SGD with momentum 0.9 and weight decay 1e-3
  clip           SGD with --clip-grad-norm 0.05
  loss-none      forward(input, target) returns its own MSE loss
  loss-tuple     the same as (loss, output), HuggingFace's form
  aux            SGD with momentum and weight decay on a model with an
                 auxiliary head returned as a second output (not in the loss)
                 and a side branch detached after the split: PyTorch leaves
                 their gradients None, so neither decay nor momentum moves
                 them
  auxtied        the same with a Linear applied in both stages (a tied
                 weight when split) that feeds only the second output
With NPROC 2 the model is split before fc2 and trained on two processes
(SCHEDULE gpipe or 1f1b, default 1f1b): optimizer state stays on each stage,
and --clip-grad-norm clips by the norm over both.
Prints one line per check; exits non-zero on a mismatch.
"""
import json
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import st  # noqa: E402

torch.set_num_threads(1)
MB, M, STEPS, ROWS = 4, 3, 4, 20


class Net(nn.Module):
    def __init__(self, own_loss):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)
        self.own_loss = own_loss

    def forward(self, x, target=None):
        y = self.fc2(torch.tanh(self.fc1(x)))
        if self.own_loss == "tuple":
            return F.mse_loss(y, target), y
        if self.own_loss:
            return F.mse_loss(y, target)
        return y


class AuxNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.aux = nn.Linear(16, 2)
        self.side = nn.Linear(6, 3)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        a = self.aux(h)
        s = self.side(x)
        return self.fc2(h) + s.detach(), a


class AuxTiedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.shared = nn.Linear(6, 6)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        a = self.shared(x)
        return self.fc2(h), self.shared(a)


def main():
    out, bindir, case = sys.argv[1:4]
    nproc = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    schedule = sys.argv[5] if len(sys.argv) > 5 else "1f1b"
    own = case in ("loss-none", "loss-tuple")
    torch.manual_seed(0)
    model = AuxNet() if case == "aux" else AuxTiedNet() \
        if case == "auxtied" else Net(
        "tuple" if case == "loss-tuple" else own)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(ROWS, 6, generator=g)
    if own:
        target = torch.randn(ROWS, 3, generator=g)
        traced = torch.jit.trace(model, (x[:MB], target[:MB]))
    else:
        target = torch.randint(0, 3, (ROWS,), generator=g)
        traced = torch.jit.trace(model, (x[:MB],))
    traced.save(f"{out}/{case}.pt")
    # With --loss none the target is forward's last argument.
    st.save(f"{out}/{case}.data.safetensors", {"input": x, "target": target})

    flags = {"adamw": ["--optimizer", "adamw", "--lr", "0.01"],
             "sgd-momentum": ["--optimizer", "sgd", "--lr", "0.05",
                              "--momentum", "0.9", "--weight-decay", "0.001"],
             "clip": ["--optimizer", "sgd", "--lr", "0.5",
                      "--clip-grad-norm", "0.05"],
             "loss-none": ["--optimizer", "sgd", "--lr", "0.1",
                           "--loss", "none"],
             "loss-tuple": ["--optimizer", "sgd", "--lr", "0.1",
                            "--loss", "none"],
             "aux": ["--optimizer", "sgd", "--lr", "0.05", "--momentum",
                     "0.9", "--weight-decay", "0.01"],
             "auxtied": ["--optimizer", "sgd", "--lr", "0.05", "--momentum",
                         "0.9", "--weight-decay", "0.01"]}[case]
    if case == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    elif case == "sgd-momentum":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                              weight_decay=0.001)
    elif case in ("aux", "auxtied"):
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9,
                              weight_decay=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.5 if case == "clip"
                              else 0.1)

    # --infer with a model that returns its loss: one 0-d result per
    # micro-batch, stacked (the initial weights).
    with torch.no_grad():
        first_losses = torch.stack([model(x[m * MB:(m + 1) * MB],
                                          target[m * MB:(m + 1) * MB])
                                    for m in range(M)]) \
            if case == "loss-none" else None

    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        total = 0.0
        for m in range(M):
            idx = torch.arange(step * M * MB + m * MB,
                               step * M * MB + (m + 1) * MB) % ROWS
            if case == "loss-tuple":
                loss = model(x[idx], target[idx])[0]
            elif own:
                loss = model(x[idx], target[idx])
            elif case in ("aux", "auxtied"):
                loss = F.cross_entropy(model(x[idx])[0], target[idx])
            else:
                loss = F.cross_entropy(model(x[idx]), target[idx])
            (loss / M).backward()
            total += loss.item() / M
        if case == "clip":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
        opt.step()
        losses.append(total)

    shapes = "4x6xf32,4x3xf32" if own else "4x6xf32"
    subprocess.run([f"{bindir}/pippy-import", f"{out}/{case}.pt",
                    "--input-shapes", shapes, "-o", f"{out}/{case}.mlir",
                    "--weights", f"{out}/{case}.safetensors"], check=True)
    program = f"{out}/{case}.mlir"
    if nproc > 1:
        subprocess.run([f"{bindir}/pippy-opt", program,
                        "--pippy-annotate-split-points=points=fc2:begin",
                        "--pippy-outline-stages", "-o",
                        f"{out}/{case}.pipe.mlir"], check=True)
        program = f"{out}/{case}.pipe.mlir"
    cmd = [f"{bindir}/pippy-run", program, "--nproc", str(nproc),
           "--schedule", schedule, "--microbatches",
           str(M), "--steps", str(STEPS), "--data",
           f"{out}/{case}.data.safetensors", "--metrics",
           f"{out}/{case}.metrics.json", "--save-weights",
           f"{out}/{case}.final.safetensors"] + flags
    if not own:
        cmd += ["--loss", "cross_entropy"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    got = [s["loss"] for s in json.load(open(f"{out}/{case}.metrics.json"))["steps"]]
    loss_ok = all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, losses))
    print(f"{case} losses {'ok' if loss_ok else 'MISMATCH'}: "
          + ", ".join(f"{a:.6f}/{b:.6f}" for a, b in zip(got, losses)))
    final, _ = st.load(f"{out}/{case}.final.safetensors")
    worst, weights_ok = 0.0, True
    for name, ref in model.state_dict().items():
        err = (final[name].double() - ref.double()).abs().max().item()
        scale = ref.abs().max().item()
        worst = max(worst, err / scale)
        weights_ok &= err <= 1e-5 * scale
    print(f"{case} weights {'ok' if weights_ok else 'MISMATCH'}: worst "
          f"relative error {worst:.2e}")
    if case in ("aux", "auxtied"):
        # The parameters without a gradient kept their initial values.
        init, _ = st.load(f"{out}/{case}.safetensors")
        kept = sorted(n for n in init if torch.equal(init[n], final[n]))
        print(f"{case} unchanged: {' '.join(kept)}")
    infer_ok = True
    if case == "loss-none":
        st.save(f"{out}/{case}.first.safetensors",
                {"input": x[:M * MB], "target": target[:M * MB]})
        subprocess.run([f"{bindir}/pippy-run", program, "--nproc", str(nproc),
                        "--schedule", schedule, "--infer", "--microbatches",
                        str(M), "--data", f"{out}/{case}.first.safetensors",
                        "--loss", "none", "--output",
                        f"{out}/{case}.out.safetensors"], check=True,
                       stdout=subprocess.DEVNULL)
        got = st.load(f"{out}/{case}.out.safetensors")[0]["output"]
        infer_ok = (got.shape == first_losses.shape and
                    (got - first_losses).abs().max().item()
                    <= 1e-5 * first_losses.abs().max().item())
        print(f"{case} infer {'ok' if infer_ok else 'MISMATCH'}: "
              f"{list(got.shape)} {got.tolist()} / {first_losses.tolist()}")
    return 0 if loss_ok and weights_ok and infer_ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Generate the pipeline benchmark model: a deep MLP of equal-width layers.

Usage:
    /usr/bin/python3 bench/pipeline/model.py OUT_DIR \
        [--layers 16] [--width 1024] [--batch 64] [--microbatches 8] [--rows 512]

The model is nn.Sequential(Linear(width, width), ReLU) x layers, built right
after torch.manual_seed(0). Training uses F.mse_loss (mean) per micro-batch,
divided by the number of micro-batches, and plain SGD; step i takes the
`batch` rows starting at (i * batch) % rows, wrapping around.

Files written to OUT_DIR:
    model.pt              torch.jit.trace of the model at micro-batch size
                          (batch / microbatches rows), grad enabled
    init.safetensors      initial parameters, named as named_parameters()
                          ("0.weight", "0.bias", "2.weight", ...)
    data.safetensors      "input" and "target", both rows x width f32 randn,
                          drawn from a generator seeded with 1 (independent
                          of the model-init stream); __metadata__ records
                          layers, width, batch, microbatches, rows and loss.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "test", "models"))
import st  # noqa: E402

torch.set_num_threads(1)  # deterministic, machine-independent reductions


def build(layers, width):
    """The benchmark model (call after seeding for the reference init)."""
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--rows", type=int, default=512)
    args = ap.parse_args()
    if args.layers < 2:
        ap.error("--layers must be at least 2 (one per pipeline stage)")
    if args.batch % args.microbatches:
        ap.error("--batch must be a multiple of --microbatches")
    mb = args.batch // args.microbatches
    os.makedirs(args.out_dir, exist_ok=True)

    torch.manual_seed(0)
    model = build(args.layers, args.width)
    model.train()  # no dropout / BatchNorm: train mode is deterministic

    # Initial weights first, before anything could touch them.
    st.save(os.path.join(args.out_dir, "init.safetensors"),
            {n: p.detach().clone() for n, p in model.named_parameters()})

    g = torch.Generator()
    g.manual_seed(1)
    example = torch.randn(mb, args.width, generator=g)
    with torch.enable_grad():
        traced = torch.jit.trace(model, (example,))
    traced.save(os.path.join(args.out_dir, "model.pt"))

    data = {
        "input": torch.randn(args.rows, args.width, generator=g),
        "target": torch.randn(args.rows, args.width, generator=g),
    }
    meta = {k: str(getattr(args, k))
            for k in ("layers", "width", "batch", "microbatches", "rows")}
    meta["loss"] = "mse"
    st.save(os.path.join(args.out_dir, "data.safetensors"), data, meta)
    print("wrote %s: %d x Linear(%d, %d)+ReLU, micro-batch %d x %d, %d rows"
          % (args.out_dir, args.layers, args.width, args.width, mb,
             args.width, args.rows))


if __name__ == "__main__":
    main()

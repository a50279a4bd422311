#!/usr/bin/python3
"""Per-micro-batch cost of a linear layer's forward, input gradient and the
ways to accumulate its weight gradient, on the pipeline benchmark's shapes.

Usage: OMP_NUM_THREADS=1 /usr/bin/python3 bench/pipeline/wgrad_kernels.py
           [--layers 16] [--width 1024] [--rows 8] [--microbatches 8]

`--layers` distinct weights and gradients are cycled so that, as in
training, they are not in cache. Prints the median time per layer and
micro-batch of:
    forward       F.linear(x, W)
    input grad    G W
    autograd      grad += G^T X  (the product into a new tensor, then a sum:
                  what autograd's AccumulateGrad does after the first one)
    fused         grad.addmm_(G^T, X)  (what pippy's fused linears do)
    out of place  grad = grad + G^T X
    batched       one G^T X over all micro-batches (--defer-weight-grads)
and whether fused and autograd give the same bits on these shapes.
"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=11)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    L, w, M = args.layers, args.width, args.microbatches
    weights = [torch.randn(w, w) for _ in range(L)]
    grads = [torch.randn(w, w) for _ in range(L)]
    xs = [torch.randn(args.rows, w) for _ in range(M)]
    gs = [torch.randn(args.rows, w) for _ in range(M)]

    def forward():
        for x in xs:
            for W in weights:
                torch.nn.functional.linear(x, W)

    def input_grad():
        for g in gs:
            for W in weights:
                g.mm(W)

    def autograd():
        for x, g in zip(xs, gs):
            for G in grads:
                G.add_(g.t().mm(x))

    def fused():
        for x, g in zip(xs, gs):
            for G in grads:
                G.addmm_(g.t(), x)

    def out_of_place():
        for x, g in zip(xs, gs):
            for i in range(L):
                grads[i] = grads[i] + g.t().mm(x)

    def batched():
        X, Gc = torch.cat(xs), torch.cat(gs)
        for G in grads:
            G.add_(Gc.t().mm(X))

    print(f"{L} layers of {w}x{w}, {M} micro-batches of {args.rows} rows, "
          f"median of {args.repeat}; ms per layer and micro-batch")
    for name, f in [("forward", forward), ("input grad", input_grad),
                    ("autograd", autograd), ("fused", fused),
                    ("out of place", out_of_place), ("batched", batched)]:
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        print(f"  {name:13s} {statistics.median(times) * 1e3 / (L * M):7.3f}")
    c = torch.randn(w, w)
    a = c.clone().add_(gs[0].t().mm(xs[0]))
    b = c.clone().addmm_(gs[0].t(), xs[0])
    print("fused == autograd bit for bit:", torch.equal(a, b))


if __name__ == "__main__":
    main()

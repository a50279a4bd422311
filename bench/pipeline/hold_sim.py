#!/usr/bin/python3
"""Step period of a 2-stage 1F1B pipeline when the last stage holds its
weight-gradient passes (W) back by K micro-batches, from per-action times.

Usage: hold_sim.py [--f0 MS] [--b0 MS] [--f1 MS] [--bx1 MS] [--w1 MS]
                   [--opt MS] [--microbatches M] [--max-hold K]

Stage 0 runs F (f0) and B (b0, nothing to send); stage 1 runs F (f1), the
input-gradient part of B (bx1, then SEND_B) and the weight-gradient part
(w1). With hold K, stage 1 runs micro-batch m's W once more than K
micro-batches' W are waiting, right after a SEND_B, and the rest before its
optimizer step. Transfers take no time. Prints the steady-state step period
for each K, as stage 0's time between two F0 starts. The defaults are the
per-micro-batch times of a trace of bench/pipeline's model (bench/RESULTS.md,
session 5).
"""
import argparse


def period(a, hold, steps=6):
    M = a.microbatches
    t0 = t1 = 0.0          # each stage's clock
    starts = []
    for _ in range(steps):
        f_done, g_done = {}, {}
        order0 = [("F", 0), ("F", 1)]
        for m in range(M - 2):
            order0 += [("B", m), ("F", m + 2)]
        order0 += [("B", M - 2), ("B", M - 1)]
        order1 = [op for m in range(M) for op in (("F", m), ("B", m))]
        i0 = i1 = 0
        queue = []          # stage 1's waiting W passes
        starts.append(t0)
        while i0 < len(order0) or i1 < len(order1):
            moved = False
            if i0 < len(order0):
                op, m = order0[i0]
                if op == "F":
                    t0 += a.f0
                    f_done[m] = t0
                    i0 += 1
                    moved = True
                elif m in g_done:
                    t0 = max(t0, g_done[m]) + a.b0
                    i0 += 1
                    moved = True
            if i1 < len(order1):
                op, m = order1[i1]
                if op == "F" and m in f_done:
                    t1 = max(t1, f_done[m]) + a.f1
                    i1 += 1
                    moved = True
                elif op == "B":
                    t1 += a.bx1
                    g_done[m] = t1
                    queue.append(a.w1)
                    while len(queue) > hold:
                        t1 += queue.pop(0)
                    i1 += 1
                    moved = True
            if not moved:
                raise SystemExit("the schedule deadlocks")
        t1 += sum(queue) + a.opt
        t0 += a.opt
    return (starts[-1] - starts[2]) / (len(starts) - 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--f0", type=float, default=5.0)
    ap.add_argument("--b0", type=float, default=10.4)
    ap.add_argument("--f1", type=float, default=5.8)
    ap.add_argument("--bx1", type=float, default=3.9)
    ap.add_argument("--w1", type=float, default=6.6)
    ap.add_argument("--opt", type=float, default=2.5)
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--max-hold", type=int, default=4)
    a = ap.parse_args()
    for k in range(a.max_hold + 1):
        print("hold %d micro-batches: step period %.1f ms" % (k, period(a, k)))


if __name__ == "__main__":
    main()

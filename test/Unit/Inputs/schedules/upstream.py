#!/usr/bin/env python3
"""Writes the action orders of torch.distributed.pipelining's schedules.

The algorithms of PyTorch 2.11's torch/distributed/pipelining/schedules.py,
written out from its published source without torch: Schedule1F1B's and
ScheduleGPipe's micro-batch loops, ScheduleInterleaved1F1B,
ScheduleLoopedBFS, ScheduleInterleavedZeroBubble (with one stage per rank
it is the zb-h1 order), ScheduleZBVZeroBubble and ScheduleDualPipeV (whose
overlapped pairs are written as upstream writes them, `(0F3;3B1)OVERLAP_F_B`). Each `pipeline_order` is
written as `_dump_csv(format="compute_only")` writes it: a row per rank, a
cell per time step, an empty cell where upstream puts None. For
ScheduleInterleavedZeroBubble the idle cells that `_add_bubbles_to_actions`
adds are left out; it only pads, never reorders.

test/Unit/ScheduleKindsTest.cpp reads these files and compares pippy's
generators (lib/Schedule/Generators.cpp) with them, action by action.
Regenerate with:  python3 upstream.py OUTPUT_DIR
"""

import os
import sys
from collections import defaultdict


def act(stage, kind, mb):
    return f"{stage}{kind}{mb}"


def gpipe(R, M):
    return {r: [act(r, "F", m) for m in range(M)] + [act(r, "B", m) for m in range(M)]
            for r in range(R)}


def one_f_one_b(R, M):
    order = {}
    for r in range(R):
        ops, f, b = [], 0, 0
        for _ in range(min(M, R - r)):
            ops.append(act(r, "F", f)); f += 1
        while True:
            ops.append(act(r, "B", b)); b += 1
            if f == M:
                break
            ops.append(act(r, "F", f)); f += 1
        while b < M:
            ops.append(act(r, "B", b)); b += 1
        order[r] = ops
    return order


def warmup_ops(rank, L, per_round, R, M, factor):
    return min((L - 1) * per_round + factor * (R - 1 - rank), M * L)


def rank_ops_1f1b(L, R, warmup, steady, cooldown, rank, fstage, bstage,
                  delay=0, zero_bubble=False):
    f_mb, b_mb, w_mb = defaultdict(int), defaultdict(int), defaultdict(int)
    ops = [None] * rank
    post = (L * R + 2 * (R - 1 - rank)) - (warmup + rank)
    if zero_bubble:
        post = R - rank - 1
    backward = "I" if zero_bubble else "B"
    backward_ids, weights = [], 0

    def weight():
        nonlocal weights
        s = bstage(backward_ids[weights])
        ops.append(act(s, "W", w_mb[s])); w_mb[s] += 1
        weights += 1

    for op in range(warmup + steady + cooldown):
        if op < warmup:
            s = fstage(op)
            ops.append(act(s, "F", f_mb[s])); f_mb[s] += 1
            if op == warmup - 1:
                ops.extend([None] * post)
            continue
        if op < warmup + steady:
            s = fstage(op)
            ops.append(act(s, "F", f_mb[s])); f_mb[s] += 1
        elif not zero_bubble:
            ops.append(None)
        s = bstage(op)
        ops.append(act(s, backward, b_mb[s])); b_mb[s] += 1
        backward_ids.append(op)
        if zero_bubble and op - warmup >= delay:
            weight()
    while zero_bubble and weights < len(backward_ids):
        weight()
    return ops


def interleaved(R, L, M, zero_bubble):
    rounds = max(1, M // R)
    assert M % rounds == 0
    per_round = M // rounds
    order = {}
    for r in range(R):
        warmup = warmup_ops(r, L, per_round, R, M, 1 if zero_bubble else 2)
        steady = L * M - warmup
        cooldown = L * M - steady

        def fstage(step, r=r):
            return (step // per_round) % L * R + r

        def bstage(step, r=r, warmup=warmup):
            return (L - 1 - ((step - warmup) // per_round) % L) * R + r

        order[r] = rank_ops_1f1b(L, R, warmup, steady, cooldown, r, fstage,
                                 bstage, r if zero_bubble else 0, zero_bubble)
    return order


def looped_bfs(R, L, M):
    order = {}
    for r in range(R):
        stages = range(r, R * L, R)
        ops = [None] * r
        for s in stages:
            ops += [act(s, "F", m) for m in range(M)]
        ops += [None] * (2 * (R - 1 - r))
        for s in reversed(stages):
            ops += [act(s, "B", m) for m in reversed(range(M))]
        order[r] = ops
    return order


def zbv(R, M):
    order = {}
    n = max(2 * R - 1, M)
    for r in range(R):
        ops = [None] * r
        c0, c1 = r, 2 * R - 1 - r
        f0 = f1 = b0 = b1 = 0
        for _ in range(2 * (R - r) - 1):
            ops.append((c0, "F", f0)); f0 += 1
        for _ in range(r):
            ops.append((c1, "F", f1)); f1 += 1
            ops.append((c0, "F", f0)); f0 += 1
        for _ in range(R - r):
            ops.append((c1, "F", f1)); f1 += 1
            ops.append((c1, "I", b1)); ops.append((c1, "W", b1)); b1 += 1
        while f1 < f0 or f0 < n:
            if f0 < n:
                ops.append((c0, "F", f0)); f0 += 1
            ops.append((c0, "I", b0)); ops.append((c0, "W", b0)); b0 += 1
            ops.append((c1, "F", f1)); f1 += 1
            ops.append((c1, "I", b1)); ops.append((c1, "W", b1)); b1 += 1
        w0, w1 = b0, b1
        for _ in range(r):
            ops.append((c0, "I", b0)); b0 += 1
            ops.append((c1, "I", b1)); b1 += 1
        for _ in range(R - r):
            ops.append((c0, "I", b0)); b0 += 1
            ops.append((c0, "W", w0)); w0 += 1
        while w1 < b1:
            ops.append((c1, "W", w1)); w1 += 1
        while w0 < b0:
            ops.append((c0, "W", w0)); w0 += 1
        order[r] = [act(*a) if a is not None and a[2] < M else None for a in ops]
    return order


def dualpipev(R, M):
    order = {}
    for r in range(R):
        ops, counters, queue = [], {}, []
        s0, s1 = r, 2 * R - 1 - r

        def count(key):
            return counters.get(key, 0)

        def bump_backward(stage):
            for kind in ("I", "W"):
                counters[(stage, kind)] = count((stage, kind)) + 1

        def add(stage, kind):
            key = (stage, "I") if kind == "B" else (stage, kind)
            mb = count(key)
            ops.append(act(stage, kind, mb))
            if kind == "B":
                bump_backward(stage)
            else:
                if kind == "I":
                    queue.append((stage, mb))
                counters[key] = mb + 1

        def overlap(fwd, bwd):
            f, b = count((fwd, "F")), count((bwd, "I"))
            ops.append(f"({act(fwd, 'F', f)};{act(bwd, 'B', b)})OVERLAP_F_B")
            counters[(fwd, "F")] = f + 1
            bump_backward(bwd)

        def weight():
            if queue:
                stage, mb = queue.pop(0)
                ops.append(act(stage, "W", mb))
                counters[(stage, "W")] = count((stage, "W")) + 1

        for _ in range((R - r - 1) * 2):
            add(s0, "F")
        for _ in range(r + 1):
            add(s0, "F")
            add(s1, "F")
        for _ in range(R - r - 1):
            add(s1, "I")
            weight()
            add(s1, "F")
        for i in range(M - R * 2 + r + 1):
            if i == 0 and r == R - 1:
                add(s0, "F")
                add(s1, "B")
            else:
                overlap(s0, s1)
            overlap(s1, s0)
        for _ in range(R - r - 1):
            add(s1, "B")
            overlap(s1, s0)
        zb = False
        for i in range(r + 1):
            if i == (r + 1) // 2 and r % 2 == 1:
                zb = True
            add(s1, "I" if zb else "B")
            if i == (r + 1) // 2 and r % 2 == 0:
                zb = True
            add(s0, "I" if zb else "B")
        for _ in range(R - r - 1):
            weight()
            add(s0, "I" if zb else "B")
        for _ in range(r + 1):
            weight()
        order[r] = ops
    return order


def cases():
    for R in (2, 4):
        for M in (2, 4, 8):
            yield "gpipe", R, 1, M, gpipe(R, M)
            yield "1f1b", R, 1, M, one_f_one_b(R, M)
        for M in (4, 8):
            yield "zb-h1", R, 1, M, interleaved(R, 1, M, True)
        for L in (2, 3):
            for M in (R, 2 * R, 3 * R):
                yield "interleaved-1f1b", R, L, M, interleaved(R, L, M, False)
                yield "zb1p", R, L, M, interleaved(R, L, M, True)
                yield "looped-bfs", R, L, M, looped_bfs(R, L, M)
        for M in (2, 4, 8, 10):
            yield "zbv", R, 2, M, zbv(R, M)
        for M in (2 * R, 2 * R + 2, 3 * R + 1):
            yield "dualpipev", R, 2, M, dualpipev(R, M)
    yield "interleaved-1f1b", 4, 2, 10, interleaved(4, 2, 10, False)
    yield "interleaved-1f1b", 4, 2, 3, interleaved(4, 2, 3, False)
    yield "zb1p", 4, 2, 10, interleaved(4, 2, 10, True)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
    for kind, R, L, M, order in cases():
        name = f"{kind}-r{R}-s{R * L}-m{M}.csv"
        with open(os.path.join(out, name), "w") as f:
            for r in range(R):
                f.write(",".join(a or "" for a in order[r]) + "\n")


if __name__ == "__main__":
    main()

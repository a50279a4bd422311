#!/usr/bin/python3
"""Every schedule kind side by side on bench/pipeline's model.

Usage:
    /usr/bin/python3 bench/pipeline/schedules.py --bin build/bin [--rounds 3]
        [--steps 34] [--warmup 4] [--work /tmp/pippy-bench-schedules]

The model of bench/pipeline/model.py (16 x Linear(1024)+ReLU, batch 64 in 8
micro-batches of 8 rows, MSE, SGD lr 0.01) on 2 ranks: gpipe, 1f1b and
zb-h1 on a 2-stage split; interleaved-1f1b, looped-bfs, zb1p, zbv and
dualpipev on a 4-stage split (two stages per rank). The kinds run
interleaved, `--rounds` times each, one intra-op thread per rank. For each kind it prints the
median step time (the slowest rank's, warm-up steps dropped, over all
rounds), the measured bubble (pippy-run --metrics: 1 - busy / (ranks x
wall)), the bubble the simulator predicts on the cost model
(pippy-opt --pippy-report after --pippy-lower-schedule), the step against
1f1b's, and the first steps' losses, which must be the same for every kind.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import PY, sh  # noqa: E402 (bench/pipeline/run.py)
# kind -> stages of the split it runs on (2 ranks).
KINDS = {"gpipe": 2, "1f1b": 2, "zb-h1": 2, "interleaved-1f1b": 4,
         "looped-bfs": 4, "zb1p": 4, "zbv": 4, "dualpipev": 4}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=34)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--work", default="/tmp/pippy-bench-schedules")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    w, b, M = args.work, args.bin, 8
    os.makedirs(w, exist_ok=True)
    sh([PY, f"{HERE}/model.py", w])
    sh([f"{b}/pippy-import", f"{w}/model.pt", "--input-shapes", "8x1024xf32",
        "-o", f"{w}/model.mlir", "--weights", f"{w}/model.safetensors"])
    simulated = {}
    for stages in sorted(set(KINDS.values())):
        sh([f"{b}/pippy-opt", f"{w}/model.mlir",
            f"--pippy-split=stages={stages}", "-o", f"{w}/pipe{stages}.mlir"])
    for kind, stages in KINDS.items():
        report = sh([f"{b}/pippy-opt", f"{w}/pipe{stages}.mlir",
                     f"--pippy-lower-schedule=schedule={kind} ranks=2 "
                     f"microbatches={M}", "--pippy-report=format=json",
                     "-o", "/dev/null"])
        simulated[kind] = json.loads(report)["schedule"]["bubble_fraction"]
    common = ["--nproc", "2", "--microbatches", str(M), "--steps",
              str(args.steps), "--data", f"{w}/data.safetensors", "--loss",
              "mse", "--optimizer", "sgd", "--lr", "0.01"]
    times = {k: [] for k in KINDS}
    bubbles = {k: [] for k in KINDS}
    losses = {}
    for r in range(args.rounds):
        for kind, stages in KINDS.items():
            out = f"{w}/{kind}.{r}.json"
            sh([f"{b}/pippy-run", f"{w}/pipe{stages}.mlir", "--schedule",
                kind] + common + ["--metrics", out])
            m = json.load(open(out))
            steps = [s["step_time_s"] for s in m["steps"]][args.warmup:]
            times[kind] += steps
            bubbles[kind].append(m["bubble_fraction"])
            losses[kind] = [s["loss"] for s in m["steps"]][:3]
            print(f"round {r + 1}/{args.rounds} {kind:17s} median "
                  f"{statistics.median(steps) * 1e3:7.1f} ms  bubble "
                  f"{m['bubble_fraction']:.3f}", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{'kind':17s} {'stages':>6s} {'median ms':>10s} {'steps':>6s} "
          f"{'bubble':>7s} {'simulated':>9s} {'vs 1f1b':>8s}  losses")
    for kind, stages in KINDS.items():
        print(f"{kind:17s} {stages:6d} {med[kind] * 1e3:10.1f} "
              f"{len(times[kind]):6d} {statistics.median(bubbles[kind]):7.3f} "
              f"{simulated[kind]:9.3f} {med['1f1b'] / med[kind]:8.3f}  "
              + " ".join(f"{x:.6f}" for x in losses[kind]))
    same = all(losses[k] == losses["1f1b"] for k in KINDS)
    print(f"\nthe same losses on every kind: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

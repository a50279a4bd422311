#!/usr/bin/python3
"""Every schedule kind side by side on bench/pipeline's model.

Usage:
    /usr/bin/python3 bench/pipeline/schedules.py --bin build/bin [--rounds 3]
        [--steps 34] [--warmup 4] [--work /tmp/pippy-bench-schedules]
        [--gloo-too] [--nofill-too] [--fill-forwards N]

The model of bench/pipeline/model.py (16 x Linear(1024)+ReLU, batch 64 in 8
micro-batches of 8 rows, MSE, SGD lr 0.01) on 2 ranks: gpipe, 1f1b and
zb-h1 on a 2-stage split; interleaved-1f1b, looped-bfs, zb1p, zbv and
dualpipev on a 4-stage split (two stages per rank). The kinds run
interleaved, `--rounds` times each, one intra-op thread per rank; messages
between the ranks go through shared memory (with --gloo-too every kind runs
a second time with them through Gloo, interleaved, rows "KIND gloo"; with
--nofill-too every kind with W actions runs again with --fill-waits=false,
rows "KIND nofill"; with --fill-forwards N zb1p, zbv and dualpipev run
again with --fill-forwards N, rows "KIND ffN"). For each kind it prints the
median step time (the slowest rank's, warm-up steps dropped, over all
rounds), the measured bubble (pippy-run --metrics: 1 - busy / (ranks x
wall)), the bubble the simulator predicts on the cost model
(pippy-opt --pippy-report after --pippy-lower-schedule), the bubble it
predicts on the costs measured in the last round's trace (per stage and
micro-batch: forward, whole backward, W or a B's held weight gradients;
per stage and step: STEP; per message: the median SEND time;
`--pippy-report=costs=...`), the bubble it predicts replaying each of that
trace's steps on its own action times (the costs' `actions`; what the mean
costs cannot hold: the first backward's slower start, noise), the step
against 1f1b's, each rank's peak of micro-batches in flight (--metrics),
and the first steps' losses, which must be the same for every kind.
"""
import argparse
import collections
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import PY, sh  # noqa: E402 (bench/pipeline/run.py)
# kind -> stages of the split it runs on (2 ranks).
KINDS = {"gpipe": 2, "1f1b": 2, "zb-h1": 2, "interleaved-1f1b": 4,
         "looped-bfs": 4, "zb1p": 4, "zbv": 4, "dualpipev": 4}


def measured_costs(trace, stages, microbatches, warmup):
    """Mean costs per stage and micro-batch (STEP: per step) from a
    pippy-run --trace, in microseconds, as --pippy-report's costs= reads
    them. A B that held its weight gradients back shows as two events: the
    second is its W share."""
    totals = collections.defaultdict(float)
    backwards = collections.defaultdict(list)
    sends, steps = [], set()
    for e in json.load(open(trace))["traceEvents"]:
        step = e.get("args", {}).get("step", 0)
        if e.get("ph") != "X" or step <= warmup:
            continue
        steps.add(step)
        m = re.match(r"(\d+)([A-Z_]+)(\d*)", e["name"])
        stage, kind = int(m.group(1)), m.group(2)
        if kind in ("SEND_F", "SEND_B"):
            sends.append(e["dur"])
        if kind == "B":
            backwards[(step, stage, m.group(3))].append((e["ts"], e["dur"]))
        totals[(stage, kind)] += e["dur"]
    for (_, stage, _), parts in backwards.items():
        if len(parts) == 2:
            totals[(stage, "held")] += max(parts)[1]
    per = len(steps) * microbatches

    def mean(stage, *kinds):
        return sum(totals[(stage, k)] for k in kinds) / per

    costs = {"forward": [mean(s, "F") for s in range(stages)],
             "backward": [mean(s, "B", "I", "W") for s in range(stages)],
             "step": [totals[(s, "STEP")] / len(steps) for s in range(stages)],
             "message": statistics.median(sends) if sends else 0,
             "hold_weight_gradients": True}
    weights = [mean(s, "W") + mean(s, "held") for s in range(stages)]
    costs["weight"] = [w if w > 0 else b / 2
                       for w, b in zip(weights, costs["backward"])]
    return costs


def step_costs(trace, warmup):
    """Per step after the warm-up ones, each compute action's and STEP's own
    time (a held B: its two events' sum, and its second as `held`)."""
    steps = collections.defaultdict(lambda: {"actions": {}, "held": {}})
    for e in sorted(json.load(open(trace))["traceEvents"],
                    key=lambda e: e.get("ts", 0)):
        step = e.get("args", {}).get("step", 0)
        name = e.get("name", "")
        if e.get("ph") != "X" or step <= warmup or "SEND" in name or \
                "RECV" in name:
            continue
        actions = steps[step]["actions"]
        if name in actions:  # a B's held weight gradients
            steps[step]["held"][name] = e["dur"]
        actions[name] = actions.get(name, 0) + e["dur"]
    return [steps[k] for k in sorted(steps)]


def replayed_bubble(b, pipe, kind, M, trace, warmup, costs, work):
    """The simulator on each traced step's own action times: 1 - busy /
    (ranks x makespan) over those steps."""
    busy = span = 0
    for step in step_costs(trace, warmup):
        path = f"{work}/replay.costs.json"
        json.dump(dict(costs, **step), open(path, "w"))
        sim = simulated(b, pipe, kind, M, path)
        busy += sum(r["busy"] for r in sim["ranks"])
        span += len(sim["ranks"]) * sim["makespan"]
    return 1 - busy / span


def steady_bubble(metrics, warmup):
    """1 - busy / (ranks x wall) over the steps after the warm-up ones."""
    steps = metrics["steps"][warmup:]
    ranks = len(steps[0]["rank_busy_s"])
    busy = sum(sum(s["rank_busy_s"]) for s in steps)
    wall = max(sum(s["rank_step_time_s"][r] for s in steps)
               for r in range(ranks))
    return 1 - busy / (ranks * wall)


def simulated(b, pipe, kind, M, costs=None):
    """--pippy-report's simulation of `kind` on `pipe`: on the cost model,
    or on the costs file given."""
    report = "--pippy-report=format=json" + (f" costs={costs}" if costs
                                              else "")
    out = sh([f"{b}/pippy-opt", pipe,
              f"--pippy-lower-schedule=schedule={kind} ranks=2 "
              f"microbatches={M}", report, "-o", "/dev/null"])
    return json.loads(out)["schedule"]


def simulate(b, pipe, kind, M, costs=None):
    """The simulated bubble of `kind` on `pipe`."""
    return simulated(b, pipe, kind, M, costs)["bubble_fraction"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=34)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--work", default="/tmp/pippy-bench-schedules")
    ap.add_argument("--gloo-too", action="store_true",
                    help="run every kind a second time with its messages "
                    "through Gloo instead of shared memory "
                    "(--shared-memory=false), interleaved")
    ap.add_argument("--nofill-too", action="store_true",
                    help="run every kind with W actions a second time with "
                    "--fill-waits=false, interleaved")
    ap.add_argument("--fill-forwards", type=int, default=0, metavar="N",
                    help="run the zero-bubble kinds on 4 stages a second time "
                    "with --fill-forwards N, interleaved")
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
        simulated[kind] = simulate(b, f"{w}/pipe{stages}.mlir", kind, M)
    common = ["--nproc", "2", "--microbatches", str(M), "--steps",
              str(args.steps), "--data", f"{w}/data.safetensors", "--loss",
              "mse", "--optimizer", "sgd", "--lr", "0.01"]
    # (label, kind, flags): each kind, and with --gloo-too each again
    # through Gloo.
    runs = [(kind, kind, []) for kind in KINDS]
    if args.gloo_too:
        runs += [(f"{kind} gloo", kind, ["--shared-memory=false"])
                 for kind in KINDS]
    if args.nofill_too:
        runs += [(f"{kind} nofill", kind, ["--fill-waits=false"])
                 for kind in ("zb-h1", "zb1p", "zbv", "dualpipev")]
    if args.fill_forwards:
        n = str(args.fill_forwards)
        runs += [(f"{kind} ff{n}", kind, ["--fill-forwards", n])
                 for kind in ("zb1p", "zbv", "dualpipev")]
    times = {label: [] for label, _, _ in runs}
    bubbles = {label: [] for label, _, _ in runs}
    losses, peaks = {}, {}
    for r in range(args.rounds):
        for label, kind, flags in runs:
            name = label.replace(" ", "-")
            out = f"{w}/{name}.{r}.json"
            last = r == args.rounds - 1
            sh([f"{b}/pippy-run", f"{w}/pipe{KINDS[kind]}.mlir", "--schedule",
                kind] + common + flags + ["--metrics", out] +
               (["--trace", f"{w}/{name}.trace.json"] if last else []))
            m = json.load(open(out))
            steps = [s["step_time_s"] for s in m["steps"]][args.warmup:]
            times[label] += steps
            bubbles[label].append(steady_bubble(m, args.warmup))
            losses[label] = [s["loss"] for s in m["steps"]][:3]
            peaks[label] = m["peak_inflight_microbatches"]
            print(f"round {r + 1}/{args.rounds} {label:22s} median "
                  f"{statistics.median(steps) * 1e3:7.1f} ms  bubble "
                  f"{m['bubble_fraction']:.3f}", flush=True)
    measured, replayed = {}, {}
    for label, kind, flags in runs:
        stages = KINDS[kind]
        name = label.replace(" ", "-")
        costs = measured_costs(f"{w}/{name}.trace.json", stages, M,
                               args.warmup)
        costs["fill_waits"] = "--fill-waits=false" not in flags
        if "--fill-forwards" in flags:
            costs["fill_forwards"] = int(
                flags[flags.index("--fill-forwards") + 1])
        path = f"{w}/{name}.costs.json"
        json.dump(costs, open(path, "w"))
        measured[label] = simulate(b, f"{w}/pipe{stages}.mlir", kind, M, path)
        replayed[label] = replayed_bubble(
            b, f"{w}/pipe{stages}.mlir", kind, M, f"{w}/{name}.trace.json",
            args.warmup, costs, w)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{'kind':22s} {'stages':>6s} {'median ms':>10s} {'steps':>6s} "
          f"{'bubble':>7s} {'model':>6s} {'costs':>6s} {'replay':>6s} "
          f"{'vs 1f1b':>8s} {'in flight':>9s}  "
          f"losses")
    for label, kind, _ in runs:
        print(f"{label:22s} {KINDS[kind]:6d} {med[label] * 1e3:10.1f} "
              f"{len(times[label]):6d} "
              f"{statistics.median(bubbles[label]):7.3f} "
              f"{simulated[kind]:6.3f} {measured[label]:6.3f} "
              f"{replayed[label]:6.3f} "
              f"{med['1f1b'] / med[label]:8.3f} "
              f"{'/'.join(map(str, peaks[label])):>9s}  "
              + " ".join(f"{x:.6f}" for x in losses[label]))
    print("\nbubble: measured (--metrics, after the warm-up steps); model: "
          "simulated on the cost model; costs: simulated on the last round's "
          "measured costs; replay: simulated on each of its steps' own action "
          "times; in flight: each rank's peak of micro-batches held "
          "(--metrics)")
    same = all(v == losses["1f1b"] for v in losses.values())
    print(f"\nthe same losses on every kind: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

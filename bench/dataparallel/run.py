#!/usr/bin/python3
"""What data parallelism costs a step and saves in optimizer memory.

Usage:
    /usr/bin/python3 bench/dataparallel/run.py --bin build/bin
        [--rounds 3] [--steps 34] [--warmup 4] [--work /tmp/pippy-bench-dp]

bench/pipeline's model (16 x Linear(1024)+ReLU, 64 MiB of float32 weights;
MSE, SGD lr 0.01), 8 micro-batches of 8 rows a step:

- pp 1: two data-parallel replicas of the whole model as one stage
  (`--nproc 2 --dp 2`, each replica 4 micro-batches) against one process
  running one replica's 4 micro-batches alone: the same work per rank, and
  nothing to sum. Two processes on this machine's two cores.
- pp 2: two replicas of a two-rank 1F1B pipeline (four processes) against
  one two-rank pipeline running 4 micro-batches (two processes): the
  replicas also share two cores, so their difference counts the
  oversubscription as well as the sums.

Each replicated run goes with the overlap (the default: a stage's
all-reduce starts after its last backward of the step) and with
--dp-overlap=false (all at the optimizer step). Configurations run
interleaved, `--rounds` times, one intra-op thread per rank. Printed per
configuration: the median step time (the slowest rank's, warm-up steps
dropped), what the replicas add to the single replica's step, the longest
wait per step for the sums, and the bytes each rank all-reduced per step
against its gradients' bytes. Then AdamW's optimizer state per rank on pp 1
with and without --zero 1.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pipeline"))
from run import PY, sh  # noqa: E402 (bench/pipeline/run.py)

M = 8


def configs(w):
    """name -> (program, pippy-run flags); "X, alone" is X's baseline."""
    one, two = f"{w}/model.mlir", f"{w}/pipe2.mlir"

    def dp(nproc):
        return ["--nproc", str(nproc), "--dp", "2", "--microbatches", str(M)]

    half = ["--microbatches", str(M // 2)]
    return {
        "pp 1, alone": (one, ["--nproc", "1"] + half),
        "pp 1, dp 2": (one, dp(2)),
        "pp 1, dp 2 no overlap": (one, dp(2) + ["--dp-overlap=false"]),
        "pp 2, alone": (two, ["--nproc", "2"] + half),
        "pp 2, dp 2": (two, dp(4)),
        "pp 2, dp 2 no overlap": (two, dp(4) + ["--dp-overlap=false"]),
    }


def step_times(w, b, args):
    common = ["--schedule", "1f1b", "--steps", str(args.steps), "--data",
              f"{w}/data.safetensors", "--loss", "mse", "--optimizer", "sgd",
              "--lr", "0.01"]
    times = {name: [] for name in configs(w)}
    waits = {name: [] for name in configs(w)}
    traffic = {}
    for r in range(args.rounds):
        for i, (name, (prog, flags)) in enumerate(configs(w).items()):
            out = f"{w}/{i}.{r}.json"
            sh([f"{b}/pippy-run", prog] + flags + common + ["--metrics", out])
            m = json.load(open(out))
            steps = [s["step_time_s"] for s in m["steps"]][args.warmup:]
            times[name] += steps
            if "dp_wait_s" in m:
                waits[name].append(max(m["dp_wait_s"]) / args.steps)
                traffic[name] = (m["dp_allreduce_bytes_per_step"],
                                 m["gradient_bytes"])
            print(f"round {r + 1}/{args.rounds} {name:22s} median "
                  f"{statistics.median(steps) * 1e3:7.1f} ms", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{'configuration':22s} {'median ms':>10s} {'steps':>6s} "
          f"{'added ms':>9s} {'wait ms':>8s}  all-reduced/gradient bytes "
          f"per rank")
    for name in times:
        base = med[name.split(",")[0] + ", alone"]
        added = f"{(med[name] - base) * 1e3:9.1f}" if "dp" in name else \
            f"{'':9s}"
        wait = (f"{statistics.median(waits[name]) * 1e3:8.1f}"
                if waits[name] else f"{'':8s}")
        sent = " ".join(f"{a}/{g}" for a, g in zip(*traffic[name])) \
            if name in traffic else ""
        print(f"{name:22s} {med[name] * 1e3:10.1f} {len(times[name]):6d} "
              f"{added} {wait}  {sent}")
    print("\nadded: the median step minus the single replica's on the same "
          "pipeline;\nwait: the longest a rank waited per step for the sums "
          "(median over rounds)")
    return all(a == g for sent in traffic.values() for a, g in zip(*sent))


def optimizer_memory(w, b):
    """AdamW's state per rank, two replicas of pp 1, without and with
    --zero 1."""
    state = {}
    for zero in ("0", "1"):
        out = f"{w}/zero{zero}.json"
        sh([f"{b}/pippy-run", f"{w}/model.mlir", "--nproc", "2", "--dp", "2",
            "--microbatches", str(M), "--steps", "2", "--data",
            f"{w}/data.safetensors", "--loss", "mse", "--optimizer", "adamw",
            "--zero", zero, "--metrics", out])
        state[zero] = json.load(open(out))["optimizer_state_bytes"]
    print("\nAdamW optimizer state per rank (bytes), pp 1 x dp 2: "
          f"{state['0']} without --zero, {state['1']} with --zero 1 "
          f"(largest share {max(state['1']) / max(state['0']):.3f} of the "
          f"whole)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=34)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--work", default="/tmp/pippy-bench-dp")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    w, b = args.work, args.bin
    os.makedirs(w, exist_ok=True)
    sh([PY, os.path.join(HERE, "..", "pipeline", "model.py"), w])
    sh([f"{b}/pippy-import", f"{w}/model.pt", "--input-shapes", "8x1024xf32",
        "-o", f"{w}/model.mlir", "--weights", f"{w}/model.safetensors"])
    sh([f"{b}/pippy-opt", f"{w}/model.mlir", "--pippy-split=stages=2", "-o",
        f"{w}/pipe2.mlir"])
    once = step_times(w, b, args)
    print(f"every gradient all-reduced exactly once per step: "
          f"{'yes' if once else 'NO'}")
    optimizer_memory(w, b)
    return 0 if once else 1


if __name__ == "__main__":
    sys.exit(main())

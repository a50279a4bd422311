"""Activation memory: the simulator's prediction against what a run held.

Usage: memory_check.py OUT_DIR BIN_DIR   (after dist_check.py built OUT_DIR)

Runs OUT_DIR/pipe.mlir (2 stages) on 2 ranks with gpipe and 1f1b at 4
micro-batches with --metrics, whose peak_activation_bytes the CPU allocator
measured: per rank, the most bytes that in-flight micro-batches' forwards
left allocated at once. --pippy-report predicts them from the IR, counting
every op result a forward makes; autograd keeps only what the backward
needs, so the prediction is an upper bound. The measured peaks must lie
within it, be positive, and change between the kinds as the prediction does
(the same number of micro-batches in flight, times one micro-batch's bytes).
Prints one line per kind and per check; exits non-zero when a check fails.
"""
import json
import subprocess
import sys

M = 4


def measured(out, bindir, kind):
    metrics = f"{out}/memory-{kind}.json"
    subprocess.run([f"{bindir}/pippy-run", f"{out}/pipe.mlir", "--nproc", "2",
                    "--schedule", kind, "--microbatches", str(M), "--steps",
                    "2", "--data", f"{out}/data.safetensors", "--metrics",
                    metrics], check=True, capture_output=True)
    m = json.load(open(metrics))
    return m["peak_inflight_microbatches"], m["peak_activation_bytes"]


def predicted(out, bindir, kind):
    lowered = f"{out}/memory-{kind}.mlir"
    subprocess.run([f"{bindir}/pippy-opt", f"{out}/pipe.mlir",
                    f"--pippy-lower-schedule=schedule={kind} ranks=2 "
                    f"microbatches={M}", "-o", lowered], check=True)
    report = subprocess.run([f"{bindir}/pippy-opt", lowered,
                             "--pippy-report=format=json", "-o", "/dev/null"],
                            check=True, capture_output=True, text=True)
    ranks = json.loads(report.stdout)["schedule"]["ranks"]
    return ([r["peak_inflight"] for r in ranks],
            [r["peak_activation_bytes"] for r in ranks])


def main():
    out, bindir = sys.argv[1:3]
    runs = {}
    for kind in ("gpipe", "1f1b"):
        inflight, got = measured(out, bindir, kind)
        inflight_p, want = predicted(out, bindir, kind)
        runs[kind] = (got, want)
        print(f"{kind}: in flight {inflight} (predicted {inflight_p}), "
              f"activation bytes {got} (predicted at most {want})")
    within = all(0 < g <= w for got, want in runs.values()
                 for g, w in zip(got, want))
    print(f"measured within the prediction: {'yes' if within else 'NO'}")
    (g1, w1), (g2, w2) = runs["gpipe"], runs["1f1b"]
    scales = all(a * d == b * c for a, b, c, d in zip(g1, g2, w1, w2))
    print("measured changes between gpipe and 1f1b as predicted: "
          f"{'yes' if scales else 'NO'}")
    return 0 if within and scales else 1


if __name__ == "__main__":
    sys.exit(main())

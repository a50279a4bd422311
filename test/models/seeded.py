#!/usr/bin/python3
"""Trains one zoo model at its real dropout and stochastic-depth rates under
pippy-run --seed, on several placements, and checks that every placement
draws the same numbers: losses and final weights identical bit for bit
(same_runs.py), another seed drawing others, and the loss falling.

Usage: seeded.py MODEL WORK_DIR BIN_DIR
       (MODEL marked `seeded` in matrix.txt; ctest's zoo-seeded/MODEL)

Generates MODEL with --real-rates into WORK_DIR, imports it once, then runs
it for 20 steps (SGD at the zoo's learning rate, 0.05, or at the one its
row gives, `seeded=LR`) with --seed 5: unsplit on one rank, split by
--pippy-split into 2 stages on 2 ranks with 1F1B and into 4 stages on 4
ranks with GPipe; and unsplit with --seed 6. PyTorch's own random stream
cannot be matched, so its training is not compared here (matrix.py compares
the same model at rates 0); pippy-run --infer is, with the model's output
in eval mode (no dropout, stochastic depth keeping every row).
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS, SEED = 20, 5


def train(m, pipe, label, ranks, schedule, seed, lr):
    """Runs pipe for STEPS steps; returns the prefix of its metrics and
    final weights."""
    import compare  # noqa: E402
    prefix = os.path.join(m.work, label)
    compare.run([m.tool("pippy-run"), pipe, "--nproc", str(ranks),
                 "--schedule", schedule, "--timeout", "60",
                 "--microbatches", str(m.ref["microbatches"]),
                 "--steps", str(STEPS), "--data", m.input(".data.safetensors"),
                 "--loss", m.ref["loss"], "--lr", str(lr),
                 "--seed", str(seed), "--metrics", prefix + ".json",
                 "--save-weights", prefix + ".safetensors"])
    return prefix


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    name, work, bindir = sys.argv[1:]
    sys.path.insert(0, HERE)
    import matrix  # noqa: E402
    row = matrix.read_table().get(name)
    if row is None or not row.seeded:
        sys.exit(f"seeded.py: {name!r} is not marked seeded in matrix.txt")
    matrix.generate(name, row.source, work, ["--real-rates"])
    import compare  # noqa: E402 (imports torch: after the generator ran)
    import same_runs  # noqa: E402
    m = compare.Model(name, work, work, bindir, row.source == "torch-mlir")
    graph = compare.import_graph(m)
    lr = row.seeded if row.seeded is not True else m.ref["lr"]
    one = train(m, graph, "1-unsplit", 1, "1f1b", SEED, lr)
    two = train(m, compare.split(m, graph, "stages=2"), "2-1f1b", 2, "1f1b",
                SEED, lr)
    four = train(m, compare.split(m, graph, "stages=4"), "4-gpipe", 4,
                 "gpipe", SEED, lr)
    other = train(m, graph, "seed6", 1, "1f1b", SEED + 1, lr)
    ok = same_runs.compare_runs(one, [two, four], other)
    # --infer: each draw its expected value, which is eval mode's output.
    ok &= compare.check_forward(m, graph, compare.dist_flags(1, "1f1b"))
    print(f"seeded   {name}: {'the same' if ok else 'NOT the same'} draws "
          f"on every placement")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

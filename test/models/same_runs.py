#!/usr/bin/python3
"""Compares pippy-run runs that must draw the same random numbers.

Usage: same_runs.py REFERENCE OTHER... [--differs RUN]
Each run is a prefix P: P.json (--metrics) and P.safetensors
(--save-weights). Prints, for each OTHER, whether its losses (those of the
steps it ran) and its final weights equal REFERENCE's bit for bit; for
--differs, whether that run's losses differ from REFERENCE's; and whether
REFERENCE's loss fell: the mean of its last 6 steps below that of its first
6 (the zoo's data repeats every 3 steps, so each window sees every row
twice). Exits non-zero unless all of that holds.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
import torch  # noqa: E402

WINDOW = 6  # steps averaged at each end to tell whether the loss fell


def losses(prefix):
    return {s["step"]: s["loss"]
            for s in json.load(open(prefix + ".json"))["steps"]}


def compare_runs(ref, others, differs=None):
    """Prints one line per comparison; True if every one holds."""
    ok = True
    ref_losses = losses(ref)
    ref_weights = st.load(ref + ".safetensors")[0]
    for other in others:
        mine = losses(other)
        same_losses = all(ref_losses[k] == v for k, v in mine.items())
        weights = st.load(other + ".safetensors")[0]
        same_weights = sorted(weights) == sorted(ref_weights) and all(
            torch.equal(weights[k], ref_weights[k]) for k in weights)
        ok &= same_losses and same_weights
        print(f"{os.path.basename(other)}: {len(mine)} losses "
              f"{'same' if same_losses else 'DIFFER'}, weights "
              f"{'same' if same_weights else 'DIFFER'}")
    if differs:
        mine = losses(differs)
        ok &= mine != ref_losses
        print(f"{os.path.basename(differs)}: losses "
              f"{'differ' if mine != ref_losses else 'SAME'}")
    steps = sorted(ref_losses)
    first = sum(ref_losses[k] for k in steps[:WINDOW]) / WINDOW
    last = sum(ref_losses[k] for k in steps[-WINDOW:]) / WINDOW
    ok &= last < first
    print(f"loss {'falls' if last < first else 'DOES NOT FALL'} "
          f"({first:.4f} over the first {WINDOW} steps, {last:.4f} over the "
          f"last {WINDOW})")
    return ok


def main():
    args = sys.argv[1:]
    differs = None
    if "--differs" in args:
        i = args.index("--differs")
        differs = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    return 0 if compare_runs(args[0], args[1:], differs) else 1


if __name__ == "__main__":
    sys.exit(main())

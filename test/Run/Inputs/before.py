"""Counts the training steps of a pippy-run --trace in which action A ran
before action B (both on one rank).

Usage: before.py TRACE A B
Prints `A before B in N of STEPS steps`.
"""
import json
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    trace, a, b = sys.argv[1:]
    starts = {}
    for e in json.load(open(trace))["traceEvents"]:
        if e.get("ph") == "X" and e["name"] in (a, b):
            starts.setdefault(e["args"]["step"], {})[e["name"]] = e["ts"]
    steps = sorted(starts)
    early = sum(1 for s in steps if starts[s][a] < starts[s][b])
    print(f"{a} before {b} in {early} of {len(steps)} steps")


if __name__ == "__main__":
    main()

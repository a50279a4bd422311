"""Prints, from a pippy-run --trace file, the order of each micro-batch's
backward events in the first step of every rank.

Usage: trace_order.py TRACE
One line per rank and micro-batch, e.g. `rank 1 micro-batch 0: 1B0 1SEND_B0
1B0`: the rank's B and SEND_B events of that micro-batch, in time order, up
to the rank's first STEP. A B that holds its weight gradients back until its
input gradients are sent shows as two B events around its SEND_B. Then one
line per rank with all of those events in time order, e.g. `rank 1
backward: 1B0 1SEND_B0 1B1 1SEND_B1 1B0 1B1`.
"""
import json
import re
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    events = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
              if e["ph"] == "X"]
    for rank in sorted({e["pid"] for e in events}):
        mine = sorted((e for e in events if e["pid"] == rank),
                      key=lambda e: e["ts"])
        order = {}
        sequence = []
        end = 0
        for e in mine:
            if e["ts"] < end:
                sys.exit(f"rank {rank}: {e['name']} starts inside the "
                         "previous event")
            end = e["ts"] + e["dur"]
            if e["name"].endswith("STEP"):
                break
            match = re.fullmatch(r"\d+(?:B|SEND_B)(\d+)", e["name"])
            if match:
                order.setdefault(int(match.group(1)), []).append(e["name"])
                sequence.append(e["name"])
        for m in sorted(order):
            print(f"rank {rank} micro-batch {m}: {' '.join(order[m])}")
        print(f"rank {rank} backward: {' '.join(sequence)}")


if __name__ == "__main__":
    main()

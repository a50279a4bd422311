#!/usr/bin/python3
"""Two builds of pippy-opt side by side on one command line.

Usage: compare_builds.py N OLD_PIPPY_OPT NEW_PIPPY_OPT ARGS...

Runs `perf stat -x, -e task-clock BINARY ARGS...` N times for each binary,
interleaved (old new, new old, ...), so that the machine's drift hits both
alike, and prints the medians of each and the median of the per-pair ratios
new/old. On these noisy machines the per-pair ratio is the number to read;
each binary's median moves with the machine. Needs perf (Debian's
linux-perf).

Example:
    compare_builds.py 30 /tmp/pippy-opt.old build/bin/pippy-opt \\
        b200.mlir --pippy-split="stages=4 policy=balanced" -o /dev/null
"""
import statistics
import subprocess
import sys


def task_clock_ms(binary, args):
    proc = subprocess.run(["perf", "stat", "-x,", "-e", "task-clock", binary]
                          + args, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {binary} {' '.join(args)}\n{proc.stderr}")
    for line in proc.stderr.splitlines():
        if "task-clock" in line:
            return float(line.split(",")[0])
    sys.exit(f"perf printed no task-clock for {binary}:\n{proc.stderr}")


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    pairs, old, new, args = int(sys.argv[1]), sys.argv[2], sys.argv[3], \
        sys.argv[4:]
    times = {old: [], new: []}
    ratios = []
    for i in range(pairs):
        order = (old, new) if i % 2 == 0 else (new, old)
        for binary in order:
            times[binary].append(task_clock_ms(binary, args))
        ratios.append(times[new][-1] / times[old][-1])
    print(f"old {statistics.median(times[old]):.2f} ms  new "
          f"{statistics.median(times[new]):.2f} ms  new/old per pair "
          f"{statistics.median(ratios):.3f}  ({pairs} pairs)")


if __name__ == "__main__":
    main()

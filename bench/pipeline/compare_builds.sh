#!/bin/bash
# Two builds of pippy-run side by side on bench/pipeline's model: one
# process (NEW build) and 2-rank 1F1B with each build, interleaved, ROUNDS
# rounds of STEPS steps; medians over all rounds without each run's first 2
# steps. Run bench/pipeline/run.py once first: it writes the model, the
# pipeline and the data into WORK.
#
# Usage: bench/pipeline/compare_builds.sh OLD_BIN_DIR NEW_BIN_DIR
#            [ROUNDS=5] [STEPS=12] [WORK=/tmp/pippy-bench-pipeline]
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
old=$1 new=$2 rounds=${3:-5} steps=${4:-12} work=${5:-/tmp/pippy-bench-pipeline}
for f in "$old/pippy-run" "$new/pippy-run" "$work/pipe2.mlir" "$work/model.mlir" "$work/data.safetensors"; do
  [ -e "$f" ] || { echo "compare_builds.sh: $f does not exist" >&2; exit 2; }
done
export OMP_NUM_THREADS=1
common=(--microbatches 8 --steps "$steps" --data "$work/data.safetensors" --loss mse --optimizer sgd --lr 0.01)
out=$(mktemp -d)
for r in $(seq "$rounds"); do
  "$new/pippy-run" "$work/model.mlir" "${common[@]}" --metrics "$out/single.$r.json" > /dev/null
  "$old/pippy-run" "$work/pipe2.mlir" "${common[@]}" --nproc 2 --schedule 1f1b --metrics "$out/old.$r.json" > /dev/null
  "$new/pippy-run" "$work/pipe2.mlir" "${common[@]}" --nproc 2 --schedule 1f1b --metrics "$out/new.$r.json" > /dev/null
  echo "round $r/$rounds done" >&2
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def summary(kind):
    times, bubbles = [], []
    for r in range(1, rounds + 1):
        m = json.load(open(f"{out}/{kind}.{r}.json"))
        times += [s["step_time_s"] for s in m["steps"][2:]]
        bubbles.append(m["bubble_fraction"])
    return statistics.median(times) * 1e3, len(times), statistics.median(bubbles)
single, old, new = summary("single"), summary("old"), summary("new")
for name, (ms, n, bubble) in (("single (new)", single), ("1f1b old", old),
                              ("1f1b new", new)):
    print(f"{name:14s} {ms:7.1f} ms  {n} steps  bubble {bubble:.3f}")
ideal = 16 / 9
print(f"new over old {old[0] / new[0]:.3f}; fraction of ideal 2M/(M+1): "
      f"old {single[0] / old[0] / ideal:.3f}, new {single[0] / new[0] / ideal:.3f}")
PY
rm -rf "$out"

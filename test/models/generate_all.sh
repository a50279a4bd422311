#!/bin/sh
# Regenerate the model zoo: generate_all.sh OUT_DIR
# Runs every generator with Debian's /usr/bin/python3 (torch 1.13 CPU) and
# prints one line per model with its elapsed time (and its 3 step losses).
set -e
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
OUT=$1
DIR=$(cd "$(dirname "$0")" && pwd)
PY=${PIPPY_ZOO_PYTHON:-/usr/bin/python3}
mkdir -p "$OUT"
for m in mlp resnet gpt unet transformer lstm embbag twoio params sharedbuf viewmut datadep fnet mlp64 nestedout tiedconv intscale tiedtypes tmgpt tmcnn tmprims tmattn tmearly listout tuplemods bnnet; do
  start=$(date +%s.%N)
  if ! log=$("$PY" "$DIR/$m.py" "$OUT" 2>&1); then
    echo "$m: FAILED" >&2
    echo "$log" >&2
    exit 1
  fi
  end=$(date +%s.%N)
  awk -v m="$m" -v s="$start" -v e="$end" -v l="$(echo "$log" | tail -n 1)" \
    'BEGIN { printf "%-12s %6.2fs  %s\n", m, e - s, l }'
done

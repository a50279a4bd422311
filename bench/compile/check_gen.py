"""Checks that gen_ir.py writes exactly what pippy-import writes: builds the
same model in PyTorch, traces it, imports it with pippy-import and compares the
two files byte for byte.

Usage: python3 check_gen.py --pippy-import build/bin/pippy-import
           [--blocks 3] [--width 64] [--seq 16] [--batch 2]
Needs torch (/usr/bin/python3 here); exits non-zero on any difference.
"""
import argparse
import difflib
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_ir  # noqa: E402
import model as bench_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pippy-import", required=True)
    ap.add_argument("--blocks", type=int, default=3)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = bench_model.build(args.blocks, args.width, args.seq)
    x = torch.randn(args.batch, args.seq, args.width)
    with tempfile.TemporaryDirectory() as d:
        pt = os.path.join(d, "model.pt")
        torch.jit.trace(model, (x,)).save(pt)
        imported = os.path.join(d, "model.mlir")
        weights = os.path.join(d, "model.safetensors")
        shape = "%dx%dx%dxf32" % (args.batch, args.seq, args.width)
        subprocess.run([args.pippy_import, pt, "--input-shapes", shape, "-o", imported,
                        "--weights", weights], check=True)
        with open(imported) as f:
            want = f.read()
    got, ops = gen_ir.generate(args.blocks, args.width, args.seq, args.batch, pt, weights)
    if got != want:
        sys.stdout.writelines(difflib.unified_diff(
            want.splitlines(True), got.splitlines(True), "pippy-import", "gen_ir.py", n=1))
        print("DIFFERENT (blocks=%d width=%d seq=%d batch=%d)"
              % (args.blocks, args.width, args.seq, args.batch))
        return 1
    print("identical: %d blocks, width %d, seq %d, batch %d, %d ops"
          % (args.blocks, args.width, args.seq, args.batch, ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())

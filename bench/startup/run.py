#!/usr/bin/env python3
"""Rank start-up: how long a pipeline job takes from the launch of pippy-run
to its ranks' first forward, reading the IR on every rank (an older pippy-run,
given with --old-bin) against reading stage executables lowered ahead of time.

The model is bench/compile's synthetic transformer (gen_ir.py; 2000 blocks
are 102,007 ops) with small weights (--width 8), split into --stages stages
by pippy-opt. Each job is a one-micro-batch `--infer` on as many ranks, so
its wall time is the ranks' start-up plus one small pipelined forward; the
jobs run interleaved, --rounds times each, and the medians are compared.

With --per-rank (needs strace), each job also runs under `strace -f -ttt`
and every rank's start-up is split at the opening of its program file and
of the data file (which a rank opens once its program and weights are
loaded, before the ranks connect): process start (the launcher's fork of
the rank, which an older pippy-run followed with an exec of itself) to
data, and program to data, which is pippy's own part.

    /usr/bin/python3 bench/startup/run.py --new-bin build/bin --old-bin OLD/bin

Needs torch (to write the weights): /usr/bin/python3 here.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "compile"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "models"))


def run(cmd, env=None):
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n"
                 f"{proc.stdout}{proc.stderr}")
    return elapsed


def per_rank(cmd, program_name, trace):
    """Medians over the ranks: (fork -> data open, program open -> data open)."""
    subprocess.run(["strace", "-f", "-ttt", "-e",
                    "trace=clone,clone3,fork,vfork,openat", "-o", trace] + cmd,
                   capture_output=True, check=True)
    start, program, data = {}, {}, {}
    for line in open(trace):
        m = re.match(r"(\d+)\s+([\d.]+)\s+(<\.\.\. )?(\w+)[ (](.*)", line)
        if not m:
            continue
        pid, t, call, rest = m.group(1), float(m.group(2)), m.group(4), m.group(5)
        child = re.search(r"= (\d+)$", rest.strip())
        if call in ("clone", "clone3", "fork", "vfork") and child:
            start.setdefault(child.group(1), t)
        elif call == "openat" and program_name in rest:
            program.setdefault(pid, t)
        elif call == "openat" and "input.safetensors" in rest:
            data.setdefault(pid, t)
    ranks = [p for p in data if p in program and p in start]
    return (statistics.median(data[p] - start[p] for p in ranks),
            statistics.median(data[p] - program[p] for p in ranks))


def prepare(work, args):
    import torch
    import model
    import st
    mlir = os.path.join(work, "model.mlir")
    weights = os.path.join(work, "model.safetensors")
    subprocess.run([sys.executable, os.path.join(HERE, "..", "compile",
                                                 "gen_ir.py"),
                    "--blocks", str(args.blocks), "--width", str(args.width),
                    "--weights", weights, "-o", mlir], check=True)
    torch.manual_seed(0)
    net = model.build(args.blocks, width=args.width)
    st.save(weights, {k: v.contiguous() for k, v in net.state_dict().items()})
    st.save(os.path.join(work, "input.safetensors"),
            {"input": torch.randn(2, 16, args.width)})
    pipe = os.path.join(work, "pipe.mlir")
    run([os.path.join(args.new_bin, "pippy-opt"), mlir,
         f"--pippy-split=stages={args.stages}", "-o", pipe])
    return pipe


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--new-bin", required=True)
    parser.add_argument("--old-bin", help="a pippy-run that reads IR on every rank")
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workdir")
    parser.add_argument("--per-rank", action="store_true",
                        help="also split each rank's start-up (strace)")
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="pippy-startup-")
    os.makedirs(work, exist_ok=True)
    pipe = prepare(work, args)
    n = str(args.stages)
    data = os.path.join(work, "input.safetensors")
    out = os.path.join(work, "out.safetensors")
    exe = os.path.join(work, "exe")
    lower = run([os.path.join(args.new_bin, "pippy-run"), pipe, "--nproc", n,
                 "--emit-executables", exe])
    print(f"lowering {pipe} into {exe} once: {lower:.2f} s")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    jobs = {"executables": [os.path.join(args.new_bin, "pippy-run"), exe]}
    jobs["IR, lowered by the launcher"] = [
        os.path.join(args.new_bin, "pippy-run"), pipe, "--nproc", n]
    if args.old_bin:
        jobs["IR on every rank (old)"] = [
            os.path.join(args.old_bin, "pippy-run"), pipe, "--nproc", n]
    times = {name: [] for name in jobs}
    for _ in range(args.rounds):
        for name, cmd in jobs.items():
            times[name].append(run(cmd + ["--infer", "--data", data,
                                          "--output", out], env))
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:30s} median {medians[name]:.2f} s  "
              f"({', '.join(f'{x:.2f}' for x in t)})")
    if args.old_bin:
        old = medians["IR on every rank (old)"]
        print(f"start-up to first forward, old / executables: "
              f"{old / medians['executables']:.2f}x")
    if args.per_rank:
        trace = os.path.join(work, "strace.out")
        programs = {"executables": ".pipx",
                    "IR, lowered by the launcher": ".pipx"}
        for _ in range(3):
            for name, cmd in jobs.items():
                total, own = per_rank(
                    cmd + ["--infer", "--data", data, "--output", out],
                    programs.get(name, "pipe.mlir"), trace)
                print(f"{name:30s} per rank: fork -> data {total:.2f} s, "
                      f"program -> data {own:.2f} s")


if __name__ == "__main__":
    main()

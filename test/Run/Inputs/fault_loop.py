"""A run that keeps failing, resumed until it finishes, trains exactly as
one that never failed.

Usage: fault_loop.py OUT_DIR BIN_DIR

Trains STEPS steps on two ranks with a checkpoint every 2 steps, once
without interruption. Then the same run (with --resume) is started again
and again, and each time something ends it a few steps after where it
resumed: rank 1 killed (SIGKILL), rank 0 stopped (SIGSTOP, so its peer runs
into --timeout), the launcher killed (SIGKILL: its ranks must die with it),
the launcher stopped politely (SIGTERM), rank 0 killed. A last run goes to
the end. Its losses and the final weights must equal the uninterrupted
run's bit for bit, and every interrupted run must have ended non-zero with
no rank left behind.
Prints one line per run; exits non-zero when a check fails.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_check  # noqa: E402
from dist_check import M  # noqa: E402

# A step takes about a millisecond here, so a run goes on for several steps
# between the line that triggers its fault and the signal taking effect (7
# seen on an idle machine, 15 on a busy one): room for five faults with
# that much overshoot each.
STEPS = 200
TIMEOUT = 4

# (what, signal, whom: a local rank, or "launcher")
FAULTS = [("kill rank 1", signal.SIGKILL, 1),
          ("stop rank 0", signal.SIGSTOP, 0),
          ("kill the launcher", signal.SIGKILL, "launcher"),
          ("terminate the launcher", signal.SIGTERM, "launcher"),
          ("kill rank 0", signal.SIGKILL, 0)]


def command(out, bindir, ckpt, extra):
    return [f"{bindir}/pippy-run", f"{out}/pipe.mlir", "--nproc", "2",
            "--schedule", "1f1b", "--microbatches", str(M), "--steps",
            str(STEPS), "--data", f"{out}/data.safetensors", "--optimizer",
            "adamw", "--lr", "0.01", "--timeout", str(TIMEOUT),
            "--checkpoint-dir", ckpt, "--checkpoint-every", "2"] + extra


def alive(pid):
    """Whether `pid` still runs (a zombie does not)."""
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def resumed_step(lines):
    for line in lines:
        if "resuming from" in line:
            return int(line.rsplit("step-", 1)[1].split()[0].rstrip(":"))
    return 0


def faulty_run(out, bindir, ckpt, fault):
    """Starts the resumed run and ends it with `fault` a few steps after
    where it resumed. Returns (resumed step, exit status, ranks left)."""
    what, sig, whom = fault
    proc = subprocess.Popen(command(out, bindir, ckpt, ["--resume"]),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines, ranks, fired = [], {}, False
    for line in proc.stdout:
        lines.append(line)
        # The ranks' pids, found before the trigger so that the signal
        # follows it at once.
        if len(ranks) < 2 and line.startswith("[rank"):
            ranks = dist_check.children(proc.pid)
        start = resumed_step(lines)
        if line.startswith(f"[rank1] step {start + 3}/") and len(ranks) == 2:
            os.kill(proc.pid if whom == "launcher" else ranks[whom], sig)
            fired = True
            break
    proc.communicate(timeout=120)
    if not fired:
        sys.exit(f"{what}: the run ended (status {proc.returncode}) before "
                 f"its fault; its output:\n{''.join(lines)}")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(map(alive, ranks.values())):
        time.sleep(0.1)
    left = [r for r, pid in ranks.items() if alive(pid)]
    for pid in ranks.values():
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    return resumed_step(lines), proc.returncode, left


def main():
    out, bindir = sys.argv[1:3]
    dist_check.build(out, bindir)
    ref, ckpt = f"{out}/faults-ref", f"{out}/faults-ckpt"
    for d in (ref, ckpt):
        shutil.rmtree(d, ignore_errors=True)
    ok = True
    subprocess.run(command(out, bindir, ref, [
        "--metrics", f"{out}/faults-ref.json", "--save-weights",
        f"{out}/faults-ref.safetensors"]), check=True, capture_output=True)

    last = 0
    for fault in FAULTS:
        start, status, left = faulty_run(out, bindir, ckpt, fault)
        good = status != 0 and not left and start >= last
        ok &= good
        last = start
        print(f"{fault[0]}: resumed from step {start}, exit status "
              f"{'non-zero' if status != 0 else 0}, ranks left "
              f"{left or 'none'}{'' if good else ' FAILED'}")

    final = subprocess.run(command(out, bindir, ckpt, [
        "--resume", "--metrics", f"{out}/faults.json", "--save-weights",
        f"{out}/faults.safetensors"]), capture_output=True, text=True)
    start = resumed_step(final.stdout.splitlines())
    print(f"last run: resumed from step {start}, exit status "
          f"{final.returncode}")
    if final.returncode != 0:
        print(final.stdout + final.stderr)
        return 1
    a = dist_check.step_losses(f"{out}/faults-ref.json")
    b = dist_check.step_losses(f"{out}/faults.json")
    same = sorted(b) == list(range(start + 1, STEPS + 1)) and all(
        a[k] == b[k] for k in b)
    print(f"losses of the last run {'equal' if same else 'DIFFER FROM'} "
          f"the uninterrupted run's")
    same_w = dist_check.same_weights(f"{out}/faults-ref.safetensors",
                                     f"{out}/faults.safetensors")
    print(f"final weights {'equal' if same_w else 'DIFFER FROM'} the "
          f"uninterrupted run's")
    return 0 if ok and same and same_w and start > 0 else 1


if __name__ == "__main__":
    sys.exit(main())

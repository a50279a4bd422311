"""Multi-process behaviours of pippy-run beyond matching PyTorch's numbers.

Usage: dist_check.py OUT_DIR BIN_DIR CASE
CASE is one of:
  resume   trains 6 steps with a checkpoint every 2; a second run stops
           after 4, a third resumes (--resume --steps 6): the resumed
           steps' losses and the final weights must equal the
           uninterrupted run's; an unfinished checkpoint (step-K.tmp) is
           ignored.
  kill     kills rank 1 with SIGKILL in the middle of a long run: rank 0
           must exit within the --timeout, naming rank 1, and the launcher
           must exit non-zero naming the dead rank.
  hang     stops rank 1 with SIGSTOP: rank 0 must give up within the
           --timeout naming rank 1, and the launcher must end the run.
  nodes    runs the pipeline as two nodes of one rank each (two pippy-run
           processes with --nnodes 2 --node-rank 0/1 --master-addr
           127.0.0.1, meeting through rank 0's TCPStore, as across hosts):
           its losses and weights must equal the one-node --nproc 2 run's.
           Then node 1 is started with other --steps and no --save-weights:
           both nodes must stop before the first step, naming those options.
  job      two nodes on one master port where a third process arrives: one
           with another run id (TORCHELASTIC_RUN_ID) is refused naming both
           jobs, and a second node 1 (a node rank given twice) is refused
           naming the process that holds rank 1; the job trains on.
  alone    node 0 of two whose node 1 never starts: one error line after
           the timeout, naming rank 1.
  dp-resume  `resume` on two data-parallel replicas of the pipeline
           (--nproc 4 --dp 2, 4 micro-batches a step): replica 0 writes the
           checkpoints, both replicas resume from them.
  dp-zero  `dp-resume` with --zero 1 (each replica steps and checkpoints
           its share of the AdamW state): the weights equal the unsharded
           run's bit for bit, each replica holds part of the state, and the
           sharded checkpoint refuses to resume without --zero 1.
  mesh-resume  `resume` on dp 2 x pp 2 x tp 2 (8 processes; the pipeline's
           linear pair sharded by --pippy-tensor-parallel, --zero 1): every
           tensor rank checkpoints its slices.
  mesh-clip  --clip-grad-norm 0.05 on pp 2 x tp 2 against pp 2 alone: the
           norm counts each sharded parameter's slices once, so the losses
           and weights agree within 1e-5 (the sums differ in order).
  mesh-kill  `kill` on that mesh, killing rank 5 (replica 1, pipeline rank
           0, tensor rank 1): a peer names it and the run ends.
  dp-remesh  a checkpoint of one pipeline resumed on two replicas with
           --zero 1 (each taking its share of the whole optimizer state):
           the resumed losses and final weights agree with the uninterrupted
           run's within 1e-6 (the replicas sum in another order).
  dp-nodes `nodes` on that mesh: two nodes of two ranks each, one replica
           per node, equal to the one-node run bit for bit.
  dp-kill  `kill` on that mesh, killing rank 3 (replica 1's second stage):
           its pipeline peer (rank 2) or its data-parallel peer (rank 1)
           must name it, and the run must end.
Prints one line per check; exits non-zero when one fails.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "models"))
import st  # noqa: E402

MB, M, ROWS = 4, 2, 24


def build(out, bindir):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32),
                          nn.Tanh(), nn.Linear(32, 4))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(ROWS, 8, generator=g)
    y = torch.randint(0, 4, (ROWS,), generator=g)
    torch.jit.trace(model, (x[:MB],)).save(f"{out}/net.pt")
    st.save(f"{out}/data.safetensors", {"input": x, "target": y})
    subprocess.run([f"{bindir}/pippy-import", f"{out}/net.pt",
                    "--input-shapes", f"{MB}x8xf32", "-o", f"{out}/net.mlir",
                    "--weights", f"{out}/net.safetensors"], check=True)
    subprocess.run([f"{bindir}/pippy-opt", f"{out}/net.mlir",
                    "--pippy-split=stages=2", "-o", f"{out}/pipe.mlir"],
                   check=True)
    subprocess.run([f"{bindir}/pippy-opt", f"{out}/pipe.mlir",
                    "--pippy-tensor-parallel=tp=2", "-o",
                    f"{out}/pipe.tp.mlir"], check=True)


def step_losses(path):
    """{step: loss} of a --metrics file."""
    return {s["step"]: s["loss"] for s in json.load(open(path))["steps"]}


def same_weights(path_a, path_b):
    """Whether two weight files hold the same tensors, bit for bit."""
    wa, _ = st.load(path_a)
    wb, _ = st.load(path_b)
    return set(wa) == set(wb) and all(torch.equal(wa[k], wb[k]) for k in wa)


# The data-parallel mesh of the dp- cases: two replicas of the two ranks.
DP_FLAGS = ["--nproc", "4", "--dp", "2", "--microbatches", str(2 * M)]
# The 3D mesh of the mesh- cases, on the sharded pipeline (its path last).
MESH_FLAGS = ["--nproc", "8", "--dp", "2", "--tp", "2", "--zero", "1",
              "--microbatches", str(2 * M), "pipe.tp.mlir"]


def program(out, mesh):
    """pippy-run's program and mesh flags: a mesh list may end in the
    pipeline's file name."""
    mesh = mesh or ["--nproc", "2", "--microbatches", str(M)]
    if mesh[-1].endswith(".mlir"):
        return [f"{out}/{mesh[-1]}"] + mesh[:-1]
    return [f"{out}/pipe.mlir"] + mesh


def train(out, bindir, steps, extra, mesh=None, check=True):
    cmd = [f"{bindir}/pippy-run"] + program(out, mesh) + [
           "--schedule", "1f1b", "--steps",
           str(steps), "--data", f"{out}/data.safetensors", "--optimizer",
           "adamw", "--lr", "0.01", "--timeout", "20"] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if not check:
        return proc
    if proc.returncode != 0:
        print(f"FAILED: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        sys.exit(1)
    return proc.stdout


def resume(out, bindir, mesh=None):
    ok = True
    full, part = f"{out}/full", f"{out}/part"
    for d in (full, part):
        shutil.rmtree(d, ignore_errors=True)
    train(out, bindir, 6, ["--checkpoint-dir", full, "--checkpoint-every",
                           "2", "--metrics", f"{out}/full.json",
                           "--save-weights", f"{out}/full.safetensors"], mesh)
    print("checkpoints " + " ".join(sorted(os.listdir(full))))
    print("files " + " ".join(sorted(os.listdir(f"{full}/step-2"))))
    train(out, bindir, 4, ["--checkpoint-dir", part, "--checkpoint-every",
                           "2"], mesh)
    # A checkpoint that was being written when the run died is ignored.
    os.makedirs(f"{part}/step-8.tmp")
    text = train(out, bindir, 6, ["--checkpoint-dir", part, "--resume",
                                  "--metrics", f"{out}/resumed.json",
                                  "--save-weights",
                                  f"{out}/resumed.safetensors"], mesh)
    resumed_from = [line for line in text.splitlines() if "resuming" in line]
    print(resumed_from[0] if resumed_from else "no resume line")
    a = step_losses(f"{out}/full.json")
    b = step_losses(f"{out}/resumed.json")
    same = sorted(b) == [5, 6] and all(a[k] == b[k] for k in b)
    ok &= same
    print(f"resumed losses {'ok' if same else 'MISMATCH'}: steps "
          f"{sorted(b)}: " + ", ".join(f"{b[k]:.6f}/{a[k]:.6f}" for k in sorted(b)))
    same = same_weights(f"{out}/full.safetensors",
                        f"{out}/resumed.safetensors")
    ok &= same
    print(f"resumed weights {'ok' if same else 'MISMATCH'}")
    return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def same_as_one_node(out):
    """Whether the two-node run's 3 losses and weights equal the one-node
    run's bit for bit (printing both checks)."""
    a = [s["loss"] for s in json.load(open(f"{out}/one-node.json"))["steps"]]
    b = [s["loss"] for s in json.load(open(f"{out}/two-nodes.json"))["steps"]]
    same = len(a) == 3 and a == b
    print(f"two-node losses {'ok' if same else 'MISMATCH'}: "
          + ", ".join(f"{x:.6f}/{y:.6f}" for x, y in zip(b, a)))
    same_w = same_weights(f"{out}/one-node.safetensors",
                          f"{out}/two-nodes.safetensors")
    print(f"two-node weights {'ok' if same_w else 'MISMATCH'}")
    return same and same_w


def nodes(out, bindir):
    train(out, bindir, 3, ["--metrics", f"{out}/one-node.json",
                           "--save-weights", f"{out}/one-node.safetensors"])
    # Every node gets the same command line, as under torchrun; rank 0
    # writes the files.
    same = ["--steps", "3", "--metrics", f"{out}/two-nodes.json",
            "--save-weights", f"{out}/two-nodes.safetensors"]
    codes, texts = run_nodes(out, bindir, [same, same])
    ok = True
    for node in (0, 1):
        prefixes = sorted({line.split("]")[0] + "]" for line in
                           texts[node].splitlines() if line.startswith("[rank")})
        print(f"node {node}: exit status {codes[node]}, output from "
              + " ".join(prefixes))
        if codes[node] != 0:
            print(texts[node])
            ok = False
    if not ok:
        return False
    same_runs = same_as_one_node(out)

    codes, texts = run_nodes(out, bindir, [["--steps", "3", "--save-weights",
                                            f"{out}/x.safetensors"],
                                           ["--steps", "4"]])
    print(f"nodes started unlike: exit statuses {codes}")
    for line in texts[0].splitlines():
        if line.startswith("pippy-run: error: rank 0") or line.startswith(
                "  --"):
            print(line)
    stopped = codes == [1, 1] and "step 1/" not in texts[0] + texts[1]
    print(f"stopped before the first step: {'yes' if stopped else 'no'}")
    return same_runs and stopped


def start_node(out, bindir, node, port, extra, env=None, microbatches=M,
               nproc=1):
    """Starts pippy-run as node `node` of two (`nproc` ranks each)."""
    cmd = [f"{bindir}/pippy-run", f"{out}/pipe.mlir", "--nproc", str(nproc),
           "--nnodes", "2", "--node-rank", str(node),
           "--master-addr", "127.0.0.1", "--master-port", port,
           "--schedule", "1f1b", "--microbatches", str(microbatches), "--data",
           f"{out}/data.safetensors", "--optimizer", "adamw", "--lr",
           "0.01", "--timeout", "20"] + extra
    return subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=None if env is None else {**os.environ, **env})


def run_nodes(out, bindir, extras, microbatches=M, nproc=1):
    """Runs one pippy-run per node (`nproc` ranks each) with a fresh port;
    returns their exit statuses and outputs."""
    port = str(free_port())
    procs = [start_node(out, bindir, node, port, extra,
                        microbatches=microbatches, nproc=nproc)
             for node, extra in enumerate(extras)]
    texts = [proc.communicate(timeout=120)[0] for proc in procs]
    return [proc.returncode for proc in procs], texts


def dp_nodes(out, bindir):
    """The data-parallel mesh across two nodes: replica r on node r."""
    train(out, bindir, 3, ["--metrics", f"{out}/one-node.json",
                           "--save-weights", f"{out}/one-node.safetensors"],
          DP_FLAGS)
    same = ["--dp", "2", "--steps", "3", "--metrics",
            f"{out}/two-nodes.json", "--save-weights",
            f"{out}/two-nodes.safetensors"]
    codes, texts = run_nodes(out, bindir, [same, same], 2 * M, nproc=2)
    print(f"two nodes of one replica each: exit statuses {codes}")
    if codes != [0, 0]:
        print(texts[0] + texts[1])
        return False
    return same_as_one_node(out)


def job(out, bindir):
    """Processes that reach a job's master port without being its ranks."""
    port = str(free_port())
    # Long enough that a node 1 started with the real one arrives before
    # the job ends.
    steps = ["--steps", "1500"]
    node0 = start_node(out, bindir, 0, port, steps + ["--run-id", "a"])
    other = start_node(out, bindir, 1, port, steps,
                       {"TORCHELASTIC_RUN_ID": "b"})
    text = other.communicate(timeout=60)[0]
    print(f"another job's node 1: exit status {other.returncode}")
    print("\n".join(line for line in text.splitlines() if "error" in line))
    # Same run id, another pipeline (the micro-batch count is lowered in).
    unlike = start_node(out, bindir, 1, port, steps + ["--run-id", "a"],
                        microbatches=2 * M)
    text = unlike.communicate(timeout=60)[0]
    print(f"a node 1 with another pipeline: exit status {unlike.returncode}")
    print("\n".join(line for line in text.splitlines() if "error" in line))
    # Node 1 given twice, started together: one claims rank 1 and trains,
    # the other is refused.
    pair = [start_node(out, bindir, 1, port, steps,
                       {"TORCHELASTIC_RUN_ID": "a"}),
            start_node(out, bindir, 1, port, steps + ["--run-id", "a"])]
    texts = [p.communicate(timeout=120)[0] for p in pair]
    node0.communicate(timeout=120)
    twice = sorted(p.returncode for p in pair)
    print(f"node rank 1 given twice: exit statuses {twice}")
    print("\n".join(line for t in texts for line in t.splitlines()
                    if "error" in line))
    codes = [node0.returncode, twice[0]]
    print(f"the job's nodes: exit statuses {codes}")
    return codes == [0, 0] and twice == [0, 1] and all(
        p.returncode != 0 for p in (other, unlike))


def alone(out, bindir):
    node0 = start_node(out, bindir, 0, str(free_port()), ["--timeout", "2"])
    text = node0.communicate(timeout=60)[0]
    print(f"node 0 alone: exit status {node0.returncode}")
    print(text, end="")
    return node0.returncode == 1


def dp_zero(out, bindir):
    zero = DP_FLAGS + ["--zero", "1"]
    ok = resume(out, bindir, zero)
    train(out, bindir, 6, ["--save-weights", f"{out}/whole.safetensors",
                           "--metrics", f"{out}/whole.json"], DP_FLAGS)
    same = same_weights(f"{out}/full.safetensors", f"{out}/whole.safetensors")
    print(f"sharded weights {'ok' if same else 'MISMATCH'}")
    sharded = json.load(open(f"{out}/full.json"))["optimizer_state_bytes"]
    whole = json.load(open(f"{out}/whole.json"))["optimizer_state_bytes"]
    # Each pipeline rank's state is split between its two replicas.
    split = all(0 < sharded[p] < whole[p] and
                sharded[p] + sharded[p + 2] == whole[p] for p in (0, 1))
    print(f"optimizer state bytes: {sharded} with --zero 1, {whole} without: "
          f"{'split' if split else 'NOT SPLIT'}")
    proc = train(out, bindir, 6, ["--checkpoint-dir", f"{out}/part",
                                  "--resume"], DP_FLAGS, check=False)
    for line in proc.stderr.splitlines():
        if "sharded" in line:
            print(line)
    return ok and same and split and proc.returncode != 0


def mesh_clip(out, bindir):
    clip = ["--clip-grad-norm", "0.05", "--steps", "4"]
    for name, mesh in (("alone", None), ("sharded", [
            "--nproc", "4", "--tp", "2", "--microbatches", str(M),
            "pipe.tp.mlir"])):
        train(out, bindir, 4, clip + ["--metrics", f"{out}/{name}.json",
                                      "--save-weights",
                                      f"{out}/{name}.safetensors"], mesh)
    a, b = step_losses(f"{out}/alone.json"), step_losses(f"{out}/sharded.json")
    losses = all(abs(a[k] - b[k]) <= 1e-5 * abs(a[k]) for k in a)
    wa, _ = st.load(f"{out}/alone.safetensors")
    wb, _ = st.load(f"{out}/sharded.safetensors")
    worst = max(((wa[k] - wb[k]).abs().max() / wa[k].abs().max()).item()
                for k in wa)
    print(f"clipped losses {'ok' if losses else 'MISMATCH'}; weights "
          f"{'ok' if worst <= 1e-5 else 'MISMATCH'} (worst relative "
          f"difference {worst:.1e})")
    return losses and worst <= 1e-5


def dp_remesh(out, bindir):
    one = ["--nproc", "2", "--microbatches", str(2 * M)]
    ckpt = f"{out}/remesh"
    shutil.rmtree(ckpt, ignore_errors=True)
    train(out, bindir, 4, ["--checkpoint-dir", ckpt, "--checkpoint-every", "2",
                           "--metrics", f"{out}/one.json", "--save-weights",
                           f"{out}/one.safetensors"], one)
    shutil.rmtree(f"{ckpt}/step-4")
    text = train(out, bindir, 4, ["--checkpoint-dir", ckpt, "--resume",
                                  "--metrics", f"{out}/two.json",
                                  "--save-weights", f"{out}/two.safetensors"],
                 DP_FLAGS + ["--zero", "1"])
    print("resumed from step 2" if "step-2" in text else text)
    a, b = step_losses(f"{out}/one.json"), step_losses(f"{out}/two.json")
    losses = sorted(b) == [3, 4] and all(
        abs(a[k] - b[k]) <= 1e-6 * abs(a[k]) for k in b)
    wa, _ = st.load(f"{out}/one.safetensors")
    wb, _ = st.load(f"{out}/two.safetensors")
    worst = max(((wa[k] - wb[k]).abs().max() / wa[k].abs().max()).item()
                for k in wa)
    print(f"remeshed losses {'ok' if losses else 'MISMATCH'}; weights "
          f"{'ok' if worst <= 1e-6 else 'MISMATCH'}")
    return losses and worst <= 1e-6


def children(pid):
    """Pids of the ranks the launcher forked, by local rank: it forks them
    in rank order, so their start times (then pids) give the order."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:  # ppid
            found.append((int(fields[19]), int(entry)))  # starttime, pid
    return {rank: p for rank, (_, p) in enumerate(sorted(found))}


def fail_rank(out, bindir, sig, victim=1, mesh=None):
    timeout = 4
    cmd = [f"{bindir}/pippy-run"] + program(out, mesh) + [
           "--schedule", "1f1b", "--steps",
           "100000000", "--data", f"{out}/data.safetensors", "--timeout",
           str(timeout)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "] step 3/" in line:
            break
    ranks = children(proc.pid)
    os.kill(ranks[victim], sig)
    hit = time.monotonic()
    rest, _ = proc.communicate(timeout=120)
    elapsed = time.monotonic() - hit
    text = "".join(lines) + rest
    errors = [line for line in text.splitlines()
              if "error" in line or "signal" in line]
    for line in errors:
        print(line)
    print(f"exit status {proc.returncode}")
    if victim != 1:
        # On a mesh, the ranks that exchange with the victim name it
        # themselves (before the launcher's "; rank 3 was killed ...").
        named = [line for line in errors
                 if line.startswith("pippy-run: error: rank ")
                 and f"rank {victim}" in line.split(":", 2)[2].split(";")[0]]
        print(f"a peer named rank {victim}: {'yes' if named else 'no'}")
        return proc.returncode != 0 and bool(named)
    rank0 = [line for line in errors
             if line.startswith("pippy-run: error: rank 0:")]
    # Rank 0 must have noticed by itself, naming rank 1, within the timeout
    # (a kill closes the connection at once; a stopped rank runs into it).
    # The launcher then leaves the other ranks 5 s to end on their own
    # before it kills them (a stopped rank never does), so a hung rank ends
    # the run about timeout + 5 s after it stopped; the bound adds 12 s for
    # a loaded machine.
    limit = timeout + 5 + 12
    print(f"rank 0 noticed: {'yes' if rank0 else 'no'}; "
          f"run ended {'within' if elapsed < limit else 'after'} the "
          f"timeout ({elapsed:.1f} s after the signal, bound {limit} s)")
    return proc.returncode != 0 and rank0 and "rank 1" in rank0[0]


def main():
    out, bindir, case = sys.argv[1:4]
    build(out, bindir)
    if case == "resume":
        ok = resume(out, bindir)
    elif case == "nodes":
        ok = nodes(out, bindir)
    elif case == "job":
        ok = job(out, bindir)
    elif case == "alone":
        ok = alone(out, bindir)
    elif case == "kill":
        ok = fail_rank(out, bindir, signal.SIGKILL)
    elif case == "dp-zero":
        ok = dp_zero(out, bindir)
    elif case == "mesh-resume":
        ok = resume(out, bindir, MESH_FLAGS)
    elif case == "mesh-clip":
        ok = mesh_clip(out, bindir)
    elif case == "mesh-kill":
        ok = fail_rank(out, bindir, signal.SIGKILL, 5, MESH_FLAGS)
    elif case == "dp-remesh":
        ok = dp_remesh(out, bindir)
    elif case == "dp-nodes":
        ok = dp_nodes(out, bindir)
    elif case == "dp-resume":
        ok = resume(out, bindir, DP_FLAGS)
    elif case == "dp-kill":
        ok = fail_rank(out, bindir, signal.SIGKILL, 3, DP_FLAGS)
    else:
        ok = fail_rank(out, bindir, signal.SIGSTOP)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

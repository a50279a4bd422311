"""Hand-written PyTorch pipeline training of the bench/pipeline model.

This is the eager-PyTorch reference for the pipeline benchmark: the same
training as the pippy runtime performs, written the way a PyTorch user would
write it with torch.distributed (gloo) point-to-point ops.

Usage:
    /usr/bin/python3 bench/pipeline/torch_pipeline.py --dir OUT_DIR \
        --mode single|gpipe|1f1b [--steps 20] [--microbatches M] \
        [--lr 0.01] [--out times.json]
    /usr/bin/python3 bench/pipeline/torch_pipeline.py --dir OUT_DIR --check

OUT_DIR is what bench/pipeline/model.py wrote. Modes:
    single  one process, the whole model.
    gpipe   two processes (gloo), rank 0 holds the first layers/2
            Linear+ReLU pairs, rank 1 the rest; every micro-batch forward,
            then every backward.
    1f1b    the same two stages; rank 0 runs one warm-up forward, then
            alternates forward/backward, then the last backward; rank 1
            runs forward then backward per micro-batch.

Each step: zero_grad, per micro-batch forward + F.mse_loss / M + backward,
then SGD (no momentum) on every rank. Step i takes the `batch` rows starting
at (i * batch) % rows (wrapping); `batch` comes from data.safetensors'
metadata, the micro-batch size is batch / M. Activations travel forward and
their gradients backward with dist.isend/dist.irecv; each stage posts the
receive for the next micro-batch before it computes the current one.

Timing: time.perf_counter around each step (zero_grad to optimizer.step,
data slicing excluded) on each rank, no barriers; the reported step time is
the max over ranks, gathered after the last step. Nothing is skipped: the
caller decides how many leading steps are warm-up.

--out writes {"mode", "step_times_s", "losses", "rank_step_times_s",
"microbatches", "batch", "lr"}. --check runs 3 steps of single, gpipe and
1f1b and asserts that the per-step losses agree within 1e-5 relative, and
that so do the parameter updates (final minus initial weights): with the
default init the 16-layer model's output is tiny, so the loss moves by only
~1e-7 relative per step and would not notice a stage that never updates.

Every process runs with OMP_NUM_THREADS=1 and torch.set_num_threads(1).
"""
import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch creates its thread pool

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "test", "models"))
import st  # noqa: E402

torch.set_num_threads(1)

MODES = ("single", "gpipe", "1f1b")
WORLD = 2  # pipeline stages = processes
CHECK_STEPS = 3
CHECK_RTOL = 1e-5


# --------------------------------------------------------------------------
# Model, weights and data


def load_model(weights):
    """nn.Sequential of Linear+ReLU pairs with the given named_parameters()."""
    layers = sum(1 for n in weights if n.endswith(".weight"))
    width = weights["0.weight"].shape[0]
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    model = nn.Sequential(*mods)
    model.load_state_dict(weights)  # strict: names and shapes must match
    return model


class Run:
    """Everything one training run needs, read from the model directory."""

    def __init__(self, args):
        self.weights, _ = st.load(os.path.join(args.dir, "init.safetensors"))
        data, meta = st.load(os.path.join(args.dir, "data.safetensors"))
        self.x, self.y = data["input"], data["target"]
        self.rows, self.width = self.x.shape
        self.batch = int(meta["batch"])
        self.m = args.microbatches or int(meta["microbatches"])
        if self.batch % self.m:
            raise SystemExit("batch %d is not a multiple of %d micro-batches"
                             % (self.batch, self.m))
        self.mb = self.batch // self.m
        self.steps = args.steps
        self.lr = args.lr
        self.final_dir = getattr(args, "final_dir", None)  # set by --check

    def save_final(self, module, name):
        """Save the trained parameters (for --check) as final_dir/name."""
        if self.final_dir:
            st.save(os.path.join(self.final_dir, name),
                    {n: p.detach() for n, p in module.named_parameters()})

    def batch_of(self, step, t):
        """The `batch` rows of `t` used by `step`, wrapping at the end."""
        idx = (torch.arange(self.batch) + step * self.batch) % self.rows
        return t.index_select(0, idx)

    def micro(self, t, m):
        """Micro-batch m of a batch."""
        return t[m * self.mb:(m + 1) * self.mb]


def result(mode, run, times, losses, rank_times=None):
    out = {"mode": mode, "step_times_s": times, "losses": losses,
           "microbatches": run.m, "batch": run.batch, "lr": run.lr}
    if rank_times is not None:
        out["rank_step_times_s"] = rank_times
    return out


# --------------------------------------------------------------------------
# single: one process, the whole model


def train_single(run):
    model = load_model(run.weights)
    opt = torch.optim.SGD(model.parameters(), lr=run.lr)
    times, losses = [], []
    for step in range(run.steps):
        xb, yb = run.batch_of(step, run.x), run.batch_of(step, run.y)
        t0 = time.perf_counter()
        opt.zero_grad()
        total = torch.zeros(())
        for m in range(run.m):
            out = model(run.micro(xb, m))
            loss = F.mse_loss(out, run.micro(yb, m)) / run.m
            loss.backward()
            total += loss.detach()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(total))
    run.save_final(model, "single.safetensors")
    return result("single", run, times, losses)


# --------------------------------------------------------------------------
# gpipe / 1f1b: two processes, one stage each


def schedule(mode, rank, m):
    """The stage's op order for one step: a list of ("F" | "B", micro-batch).

    Backwards run in micro-batch order (as in the single-process loop), so
    parameter gradients accumulate in the same order in every mode."""
    if mode == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(WORLD - rank - 1, m)  # forwards in flight before 1F1B
    ops = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        ops += [("F", i + warmup), ("B", i)]
    ops += [("B", i) for i in range(m - warmup, m)]
    return ops


class Stage:
    """One pipeline stage's forward/backward of a micro-batch, with its
    point-to-point traffic. Rank 0 is the first stage, rank WORLD-1 the last."""

    def __init__(self, run, rank, module):
        self.run, self.rank, self.module = run, rank, module
        self.first, self.last = rank == 0, rank == WORLD - 1
        self.shape = (run.mb, run.width)

    def start_step(self, xb, yb):
        r = self.run
        self.xb, self.yb = xb, yb
        self.inputs = [None] * r.m     # stage input per micro-batch
        self.outputs = [None] * r.m    # stage output (or loss) per micro-batch
        self.act_recv = [None] * r.m   # pending receives of activations
        self.grad_recv = [None] * r.m  # pending receives of output grads
        self.grads = [None] * r.m      # their buffers
        self.sends = []                # pending sends (tensor kept alive)
        self.total = torch.zeros(())
        if not self.first:
            self._post_act_recv(0)

    def _post_act_recv(self, m):
        if m < self.run.m:
            buf = torch.empty(self.shape)
            self.act_recv[m] = (dist.irecv(buf, self.rank - 1, tag=m), buf)

    def _send(self, t, dst, tag):
        self.sends.append((dist.isend(t, dst, tag=tag), t))

    def forward(self, m):
        r = self.run
        if self.first:
            inp = r.micro(self.xb, m)
        else:
            req, inp = self.act_recv[m]
            req.wait()
            self._post_act_recv(m + 1)  # overlap the next transfer
            inp.requires_grad_(True)
        out = self.module(inp)
        self.inputs[m] = inp
        if self.last:
            loss = F.mse_loss(out, r.micro(self.yb, m)) / r.m
            self.total += loss.detach()
            self.outputs[m] = loss
        else:
            self.outputs[m] = out
            self._send(out.detach(), self.rank + 1, m)
            buf = torch.empty(self.shape)
            self.grads[m] = buf
            self.grad_recv[m] = dist.irecv(buf, self.rank + 1, tag=m)

    def backward(self, m):
        if self.last:
            self.outputs[m].backward()
        else:
            self.grad_recv[m].wait()
            self.outputs[m].backward(self.grads[m])
        if not self.first:
            self._send(self.inputs[m].grad, self.rank - 1, m)
        self.inputs[m] = self.outputs[m] = self.grads[m] = None

    def finish_step(self):
        for req, _ in self.sends:
            req.wait()
        self.sends = []


def pipeline_worker(rank, args, store, out_path):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=WORLD)
    run = Run(args)
    full = load_model(run.weights)
    pairs = len(full) // 2  # Linear+ReLU pairs
    split = 2 * (pairs // 2)  # module index where rank 1's stage starts
    module = full[:split] if rank == 0 else full[split:]
    opt = torch.optim.SGD(module.parameters(), lr=run.lr)
    stage = Stage(run, rank, module)
    ops = schedule(args.mode, rank, run.m)

    times, losses = [], []
    for step in range(run.steps):
        xb = run.batch_of(step, run.x) if stage.first else None
        yb = run.batch_of(step, run.y) if stage.last else None
        t0 = time.perf_counter()
        opt.zero_grad()
        stage.start_step(xb, yb)
        for kind, m in ops:
            (stage.forward if kind == "F" else stage.backward)(m)
        stage.finish_step()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(stage.total))
    run.save_final(module, "%s.rank%d.safetensors" % (args.mode, rank))

    # Gather every rank's step times; the last stage owns the losses.
    mine = torch.tensor(times, dtype=torch.float64)
    all_times = [torch.empty_like(mine) for _ in range(WORLD)]
    dist.all_gather(all_times, mine)
    if stage.last:
        rank_times = [t.tolist() for t in all_times]
        step_times = torch.stack(all_times).max(0).values.tolist()
        with open(out_path, "w") as f:
            json.dump(result(args.mode, run, step_times, losses, rank_times), f)
    dist.barrier()
    dist.destroy_process_group()


def train_pipeline(args):
    tmp = tempfile.mkdtemp(prefix="torch_pipeline.")
    try:
        out_path = os.path.join(tmp, "result.json")
        mp.spawn(pipeline_worker, args=(args, os.path.join(tmp, "store"), out_path),
                 nprocs=WORLD, join=True)
        with open(out_path) as f:
            return json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------


def train(args):
    if args.mode == "single":
        return train_single(Run(args))
    return train_pipeline(args)


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def close(a, b):
    return abs(a - b) <= CHECK_RTOL * abs(b)


def check(args):
    """Run CHECK_STEPS steps of every mode; losses and parameter updates
    must agree with single-process training."""
    args.steps = CHECK_STEPS
    args.final_dir = tempfile.mkdtemp(prefix="torch_pipeline.check.")
    try:
        res = {}
        for mode in MODES:
            args.mode = mode
            res[mode] = train(args)
        final = {}
        for mode in MODES:
            final[mode] = {}
            for name in sorted(os.listdir(args.final_dir)):
                if name.startswith(mode + "."):
                    final[mode].update(st.load(os.path.join(args.final_dir, name))[0])
    finally:
        shutil.rmtree(args.final_dir, ignore_errors=True)
    init, _ = st.load(os.path.join(args.dir, "init.safetensors"))

    ref = res["single"]["losses"]
    print("%-6s " % "mode" + " ".join("%14s" % ("step %d" % i) for i in range(len(ref))))
    ok = True
    for mode in MODES:
        losses = res[mode]["losses"]
        print("%-6s " % mode + " ".join("%14.9g" % l for l in losses))
        if len(losses) != len(ref) or not all(map(close, losses, ref)):
            ok = False
    assert ok, "pipeline losses disagree with single-process training"

    # Parameter updates, as norms over the whole model: |single update| and,
    # per mode, |mode update - single update|.
    def update(mode):
        assert sorted(final[mode]) == sorted(init), "%s: missing parameters" % mode
        return torch.cat([(final[mode][n] - init[n]).flatten() for n in sorted(init)])
    ref_upd = update("single")
    ref_norm = float(ref_upd.norm())
    print("|update| single %.6g" % ref_norm)
    assert ref_norm > 0, "single-process training did not change the weights"
    for mode in MODES[1:]:
        diff = float((update(mode) - ref_upd).norm())
        print("|update - single update| %-5s %.6g" % (mode, diff))
        assert diff <= CHECK_RTOL * ref_norm, "%s: parameter updates disagree" % mode
    print("OK: losses and parameter updates agree within %g relative" % CHECK_RTOL)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="directory written by model.py")
    ap.add_argument("--mode", choices=MODES, default="single")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--microbatches", type=int, default=0,
                    help="micro-batches per step (default: from data metadata)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--out", help="write the result JSON here")
    ap.add_argument("--check", action="store_true",
                    help="check gpipe/1f1b losses against single, %d steps" % CHECK_STEPS)
    args = ap.parse_args()

    if args.check:
        check(args)
        return
    res = train(args)
    t = res["step_times_s"]
    print("%s: %d steps, median step %.2f ms (min %.2f, max %.2f), "
          "loss %.6g -> %.6g" % (args.mode, len(t), 1e3 * median(t),
                                 1e3 * min(t), 1e3 * max(t),
                                 res["losses"][0], res["losses"][-1]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()

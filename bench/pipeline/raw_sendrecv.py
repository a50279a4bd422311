"""Raw c10d (gloo) send/recv throughput between two local processes.

The transfer-throughput reference for the pipeline benchmark: what plain
torch.distributed point-to-point ops achieve for activation-sized float32
tensors, with no training around them.

Usage:
    /usr/bin/python3 bench/pipeline/raw_sendrecv.py \
        [--sizes 8x1024,64x1024,512x1024] [--iters 200] [--warmup 10] \
        [--out raw.json]

Two gloo ranks (FileStore rendezvous in a temporary directory) ping-pong one
float32 tensor per size: rank 0 sends it, rank 1 receives it and sends it
back, rank 0 receives it. Rank 0 times each round trip with
time.perf_counter; the one-way time is half of it, and

    MB/s = tensor bytes / one-way time / 1e6.

Reported per size: the median round trip, the median one-way time and the
MB/s of that median (after --warmup untimed round trips). --out writes
{"iters", "warmup", "results": [{"size", "bytes", "median_rtt_us",
"median_one_way_us", "mb_per_s"}, ...]}.

Every process runs with OMP_NUM_THREADS=1 and torch.set_num_threads(1).
"""
import os

os.environ["OMP_NUM_THREADS"] = "1"  # before torch creates its thread pool

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

torch.set_num_threads(1)


def parse_sizes(text):
    """"8x1024,64x1024" -> [(8, 1024), (64, 1024)]."""
    sizes = []
    for item in text.split(","):
        dims = tuple(int(d) for d in item.strip().split("x"))
        if not dims or any(d <= 0 for d in dims):
            raise argparse.ArgumentTypeError("bad size %r" % item)
        sizes.append(dims)
    return sizes


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def worker(rank, args, store, out_path):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + store,
                            rank=rank, world_size=2)
    results = []
    for shape in args.sizes:
        buf = torch.randn(shape) if rank == 0 else torch.empty(shape)
        rtts = []
        for it in range(args.warmup + args.iters):
            if rank == 0:
                t0 = time.perf_counter()
                dist.send(buf, 1)
                dist.recv(buf, 1)
                if it >= args.warmup:
                    rtts.append(time.perf_counter() - t0)
            else:
                dist.recv(buf, 0)
                dist.send(buf, 0)
        if rank == 0:
            nbytes = buf.numel() * buf.element_size()
            rtt = median(rtts)
            results.append({"size": "x".join(map(str, shape)),
                            "bytes": nbytes,
                            "median_rtt_us": 1e6 * rtt,
                            "median_one_way_us": 1e6 * rtt / 2,
                            "mb_per_s": nbytes / (rtt / 2) / 1e6})
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"iters": args.iters, "warmup": args.warmup,
                       "results": results}, f, indent=1)
            f.write("\n")
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=parse_sizes, default="8x1024,64x1024,512x1024",
                    help="comma-separated tensor shapes, e.g. 8x1024,64x1024")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--out", help="write the result JSON here")
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="raw_sendrecv.")
    try:
        out_path = args.out or os.path.join(tmp, "result.json")
        mp.spawn(worker, args=(args, os.path.join(tmp, "store"), out_path),
                 nprocs=2, join=True)
        with open(out_path) as f:
            res = json.load(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print("%-12s %10s %14s %14s %10s" % ("size", "bytes", "rtt us", "one-way us", "MB/s"))
    for r in res["results"]:
        print("%-12s %10d %14.1f %14.1f %10.1f" % (r["size"], r["bytes"], r["median_rtt_us"],
                                                  r["median_one_way_us"], r["mb_per_s"]))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""What this machine allows: PyTorch's own Gloo all-reduce of 64 MiB.

Usage: /usr/bin/python3 bench/dataparallel/torch_allreduce.py [--port P]

Two processes (torch.distributed, Gloo, one intra-op thread each) sum
64 MiB of float32, the gradients of bench/pipeline's model, in 4 MiB
tensors (as pippy's buckets) and as one tensor; prints the median of 10
timed rounds after 2 warm-up rounds. The reference for the time
bench/dataparallel/run.py's replicas wait for their sums.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TOTAL = 64 << 20


def rank_main(rank, port, bucket):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    tensors = [torch.ones(bucket // 4) for _ in range(TOTAL // bucket)]
    times = []
    for _ in range(12):
        dist.barrier()
        start = time.perf_counter()
        for work in [dist.all_reduce(t, async_op=True) for t in tensors]:
            work.wait()
        times.append(time.perf_counter() - start)
    if rank == 0:
        print(f"{len(tensors):2d} tensors of {bucket >> 20:2d} MiB: median "
              f"{statistics.median(times[2:]) * 1e3:.1f} ms for "
              f"{TOTAL >> 20} MiB")
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=29611)
    args = ap.parse_args()
    for i, bucket in enumerate((4 << 20, TOTAL)):
        mp.spawn(rank_main, args=(args.port + i, bucket), nprocs=2)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""NCCL all-reduce time on this machine's GPUs through PyTorch (the same libnccl that
ensemblefit loads), for the reconstruction's gradient sum: sizes in MB of float64 or float32.

    python3 perf/recon/nccl_allreduce.py [--gpus 4] [--mb 8.76] [--dtype float64]
"""
import argparse, os, time
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=args.gpus)
    dtype = getattr(torch, args.dtype)
    for mb in args.mb:
        n = int(mb * 1e6 / torch.tensor([], dtype=dtype).element_size())
        x = torch.ones(n, dtype=dtype, device="cuda")
        for _ in range(5):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        t = time.perf_counter()
        for _ in range(args.reps):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        secs = (time.perf_counter() - t) / args.reps
        if rank == 0:
            size = n * x.element_size()
            print(f"{args.gpus} GPUs, {size / 1e6:.2f} MB {args.dtype}: {1e3 * secs:.3f} ms per all-reduce, "
                  f"algbw {size / secs / 1e9:.1f} GB/s, busbw {size / secs / 1e9 * 2 * (args.gpus - 1) / args.gpus:.1f} GB/s",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--gpus", type=int, default=torch.cuda.device_count())
    p.add_argument("--mb", type=float, nargs="+", default=[8.76, 5.6, 4.38])
    p.add_argument("--dtype", default="float64")
    p.add_argument("--reps", type=int, default=200)
    args = p.parse_args()
    mp.spawn(work, args=(args,), nprocs=args.gpus)

#!/usr/bin/python3
"""DDP iteration time with one process group against round-robin over two groups of ours.

The DDP paper spreads buckets over several groups so their communication overlaps; this
measures whether that pays here. 25.2 M-parameter MLP (as torch_bench.py: 6 x
Linear(2048), 25 MB buckets, batch 8), 2 processes, 3 rounds alternating the two setups,
6 timed iterations each; rank 0 prints the medians.

    PYTHONPATH=build/python /usr/bin/python3 perf_tests/torch_round_robin.py
"""
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_collectives  # noqa: F401  (registers the backend)


def make(pg):
    layers = [torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU()) for _ in range(6)]
    return DDP(torch.nn.Sequential(*layers), process_group=pg, bucket_cap_mb=25)


def run(rank, n, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("collectives", rank=rank, world_size=n)
    rr = dist._round_robin_process_groups([dist.new_group(backend="collectives") for _ in range(2)])
    torch.manual_seed(0)
    models = {"one group": make(None), "round robin x2": make(rr)}
    x = torch.randn(8, 2048)
    times = {k: [] for k in models}
    for _ in range(3):
        for name, model in models.items():
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            for i in range(8):
                t0 = time.perf_counter()
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()
                if i >= 2:
                    times[name].append(time.perf_counter() - t0)
    if rank == 0:
        for name, v in times.items():
            print(f"{name}: median {statistics.median(v) * 1e3:.1f} ms")
    dist.destroy_process_group()


if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(2, port), nprocs=2)

#!/usr/bin/env python3
"""Train a small model with PyTorch DistributedDataParallel on CPU, over Collectives.

Run from the repository root, after building (cmake --build build), with the Python
whose torch (2.x) the backend was built against:

    PYTHONPATH=build/python python3 examples/ddp_cpu.py               # 2 processes
    PYTHONPATH=build/python python3 examples/ddp_cpu.py --nprocs 4
    PYTHONPATH=build/python python3 examples/ddp_cpu.py --backend gloo  # PyTorch's own
    PYTHONPATH=build/python torchrun --nproc_per_node 2 examples/ddp_cpu.py

The script starts its own processes, unless a launcher (torchrun) already set RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT: then each launched process is one rank.

Compared with a plain PyTorch DDP script, the lines marked "<-- Collectives" are all
that changes: import torch_collectives (it registers the "collectives" backend with
torch.distributed) and name that backend in init_process_group.
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import torch_collectives  # noqa: F401  <-- Collectives (1/3): registers the backend
except ImportError as e:  # only PyTorch's own backends then (--backend gloo)
    torch_collectives, IMPORT_ERROR = None, e

STEPS, BATCH, LR = 30, 32, 0.05


def train(rank, world_size, backend):
    dist.init_process_group(backend, init_method="env://",   # <-- Collectives (2/3)
                            rank=rank, world_size=world_size)
    if rank == 0:
        print(f"{world_size} processes, backend {dist.get_backend()}", flush=True)

    # Synthetic regression data, the same on every rank (fixed seed): y = x @ w + noise.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(1024, 16, generator=gen)
    y = x @ torch.randn(16, 1, generator=gen) + 0.1 * torch.randn(1024, 1, generator=gen)
    x, y = x[rank::world_size], y[rank::world_size]  # each rank trains on its own shard

    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=LR)

    for step in range(STEPS):
        i = torch.randint(0, len(x), (BATCH,), generator=gen)
        loss = torch.nn.functional.mse_loss(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()  # DDP averages the gradients over all ranks here
        opt.step()
        if step % 5 == 0 or step == STEPS - 1:
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)  # sum over the ranks, for printing
            if rank == 0:
                print(f"step {step:2d}  loss {mean_loss.item() / world_size:.4f}", flush=True)

    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="collectives")  # <-- Collectives (3/3)
    parser.add_argument("--nprocs", type=int, default=2)
    args = parser.parse_args()
    if args.backend == "collectives" and torch_collectives is None:
        parser.error(f"cannot import torch_collectives ({IMPORT_ERROR}): put the build's "
                     "python directory (build/python) on PYTHONPATH")

    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by a launcher
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args.backend)
        return
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(train, args=(args.nprocs, args.backend), nprocs=args.nprocs)


if __name__ == "__main__":
    main()

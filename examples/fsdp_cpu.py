#!/usr/bin/env python3
"""Train a small transformer with PyTorch FSDP2 (fully_shard) on CPU, over Collectives.

Run from the repository root, after building (cmake --build build), with the Python
whose torch (2.x) the backend was built against:

    PYTHONPATH=build/python python3 examples/fsdp_cpu.py               # 2 processes
    PYTHONPATH=build/python python3 examples/fsdp_cpu.py --nprocs 4
    PYTHONPATH=build/python python3 examples/fsdp_cpu.py --backend gloo  # PyTorch's own
    PYTHONPATH=build/python torchrun --nproc_per_node 2 examples/fsdp_cpu.py

The script starts its own processes, unless a launcher (torchrun) already set RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT: then each launched process is one rank.

Each rank holds 1/world_size of every parameter (and of the optimizer's state). In
forward and backward, fully_shard all-gathers a layer's parameters just before it
runs and frees them after; the gradients are reduce-scattered, each rank getting the
mean over all ranks of its own piece. The marked "<-- Collectives" lines are all that
changes from a plain FSDP2 script: import torch_collectives (it registers the backend)
and name the backend in init_process_group; the device mesh is of type "cpu".
"""
import argparse
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

try:
    import torch_collectives  # noqa: F401  <-- Collectives (1/3): registers the backend
except ImportError as e:  # only PyTorch's own backends then (--backend gloo)
    torch_collectives, IMPORT_ERROR = None, e

STEPS, BATCH, SEQ, FEATURES, WIDTH, LAYERS, LR = 30, 32, 8, 16, 32, 2, 3e-3


class Model(nn.Module):
    """Features -> WIDTH, LAYERS transformer encoder layers, mean over the sequence -> 1."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(FEATURES, WIDTH)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=4 * WIDTH,
                                       dropout=0.0, batch_first=True)
            for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, 1)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(dim=1))


def train(rank, world_size, backend):
    dist.init_process_group(backend, init_method="env://",   # <-- Collectives (2/3)
                            rank=rank, world_size=world_size)
    if rank == 0:
        print(f"{world_size} processes, backend {dist.get_backend()}", flush=True)
    mesh = init_device_mesh("cpu", (world_size,))  # every rank, one dimension

    # Synthetic data, the same on every rank (fixed seed): the target is a fixed linear
    # function of the sequence's mean, plus noise.
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2048, SEQ, FEATURES, generator=gen)
    w = torch.randn(FEATURES, 1, generator=gen)
    y = x.mean(dim=1) @ w + 0.05 * torch.randn(2048, 1, generator=gen)
    x, y = x[rank::world_size], y[rank::world_size]  # each rank trains on its own shard

    torch.manual_seed(0)  # the same initial model everywhere
    model = Model()
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)  # each layer gathered on its own, just in time
    fully_shard(model, mesh=mesh)  # the rest (embedding, head)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)

    for step in range(STEPS):
        i = torch.randint(0, len(x), (BATCH,), generator=gen)
        loss = nn.functional.mse_loss(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()  # FSDP reduce-scatters the gradients over all ranks here
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

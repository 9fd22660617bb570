#!/usr/bin/env python3
"""Ray Train's TorchTrainer with the backend "collectives": DDP on CPU workers.

    pip install "ray[train]"            # not a project requirement; any Ray 2.x with Train
    .venv/bin/python examples/ray_train_cpu.py --workers 2                 # ours
    .venv/bin/python examples/ray_train_cpu.py --workers 2 --backend gloo  # the same on Gloo

Starts a local Ray cluster (or joins RAY_ADDRESS), trains the same small regression
model on every worker under Ray's DDP wrapper with TorchConfig(backend=...), and prints
the mean loss of each epoch. The workers find the backend through torch_collectives'
entry point, so they need it installed (pip install . into the same environment), not
imported. The last line is "final loss X" (the mean over the ranks).
"""
import argparse
import json
import os
import tempfile

import ray
import torch
from ray.train import ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer

EPOCHS, STEPS, BATCH, LR = 6, 20, 32, 0.05


def train_loop(config):
    import ray.train
    import ray.train.torch
    import torch.distributed as dist

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    model = ray.train.torch.prepare_model(model)  # DDP over the group Ray made
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    rank = ray.train.get_context().get_world_rank()
    gen = torch.Generator().manual_seed(100 + rank)
    w = torch.linspace(-1, 1, 16)
    losses = []
    for epoch in range(EPOCHS):
        total = torch.zeros(1)
        for _ in range(STEPS):
            x = torch.randn(BATCH, 16, generator=gen)
            y = (x @ w).unsqueeze(1) * 0.25
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()
        dist.all_reduce(total)  # over the ranks, on the same backend
        losses.append(total.item() / STEPS / dist.get_world_size())
        ray.train.report({"epoch": epoch, "loss": losses[-1], "backend": dist.get_backend()})
    if rank == 0:  # for the driver: Ray keeps reported metrics only beside checkpoints
        with open(config["out"], "w") as f:
            json.dump({"losses": losses, "backend": dist.get_backend()}, f)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="collectives")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    # Logical CPUs: the trainer and every worker get one, whatever the machine has.
    ray.init(num_cpus=args.workers + 1, include_dashboard=False, log_to_driver=False)
    out = os.path.join(tempfile.mkdtemp(prefix="ray_train_cpu."), "losses.json")
    trainer = TorchTrainer(train_loop, train_loop_config={"out": out},
                           scaling_config=ScalingConfig(num_workers=args.workers, use_gpu=False),
                           torch_config=TorchConfig(backend=args.backend))
    trainer.fit()
    with open(out) as f:
        metrics = json.load(f)
    for epoch, loss in enumerate(metrics["losses"]):
        print(f"epoch {epoch}  loss {loss:.4f}  backend {metrics['backend']}", flush=True)
    print(f"final loss {metrics['losses'][-1]:.4f}", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()

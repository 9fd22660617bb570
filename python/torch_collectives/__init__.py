"""Collectives as a torch.distributed backend.

    import torch_collectives            # registers the backend "collectives"
    dist.init_process_group("collectives", init_method=..., rank=..., world_size=...)

Every init method works (env://, tcp://, file://, a store passed in), and
dist.new_group(ranks, backend="collectives") too. The group's timeout applies to each
operation: one not complete in time fails its Work naming the operation and the ranks
that never reached it, and aborts the group's communicator.
"""
import torch.distributed as dist

from ._C import ProcessGroupCollectives, create_process_group, library_version, set_timeout

BACKEND_NAME = "collectives"

__all__ = ["BACKEND_NAME", "ProcessGroupCollectives", "library_version", "set_timeout"]


def _register():
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, create_process_group)


_register()

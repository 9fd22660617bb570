"""Collectives as a torch.distributed backend (torch 2.x, CPU and CUDA tensors).

    import torch_collectives            # registers the backend "collectives"
    dist.init_process_group("collectives", init_method=..., rank=..., world_size=...)
    dist.init_process_group("cpu:collectives,cuda:nccl")   # per device type

Every init method works (env://, tcp://, file://, a store passed in), and
dist.new_group(ranks, backend="collectives"), new_subgroups and split_group too. The
group's timeout applies to each operation: one not complete in time fails its Work naming
the operation and the ranks that never reached it, and aborts the group's communicator.

Options of the library's communicator go in pg_options:

    dist.init_process_group("collectives", pg_options=torch_collectives.Options(compress="fp16"))
"""
import os

import torch
import torch.distributed as dist

from ._C import ProcessGroupCollectives, library_version
from ._C import set_timeout as _set_timeout

BACKEND_NAME = "collectives"

__all__ = ["BACKEND_NAME", "Options", "ProcessGroupCollectives", "backend_of", "library_version", "set_timeout"]

# option name -> (what it takes, how it is checked and stored)
_OPTIONS = {
    "compress": "none, fp16 or bf16: the wire type of the group's fp32 sums (docs/COMPRESSION.md)",
    "deterministic": "bool: every reduction bitwise the same for the same inputs",
    "net_name": "str: the net backend between hosts (Socket, IB or a net plugin's name)",
    "min_channels": "int >= 1: the fewest rings",
    "max_channels": "int >= 1: the most rings",
    "any_source": "bool: allow recv without src (each send then counts itself in the store)",
    "handoff_us": "int 0-2147483647: how long a CPU operation is left for the thread that waits for it (0: never)",
}


def _bad(name, value, why):
    raise RuntimeError(f"torch_collectives.Options: {name}={value!r}: {why}")


def Options(**options):
    """The backend's options for init_process_group / new_group(pg_options=...).

    Unknown names and values of the wrong kind raise RuntimeError naming them. Every rank
    of a group must pass the same options. COLL_TORCH_ANY_SOURCE=1 in the environment
    turns any_source on where it is not given."""
    opts = ProcessGroupCollectives.Options()
    opts.any_source = os.environ.get("COLL_TORCH_ANY_SOURCE", "0") not in ("", "0")
    for name, value in options.items():
        if name not in _OPTIONS:
            _bad(name, value, "unknown option; known: " + ", ".join(sorted(_OPTIONS)))
        if name == "compress":
            if value is None:
                value = "none"
            if value not in ("none", "fp16", "bf16"):
                _bad(name, value, _OPTIONS[name])
            opts.compress = value
        elif name in ("deterministic", "any_source"):
            if not isinstance(value, bool):
                _bad(name, value, _OPTIONS[name])
            setattr(opts, name, int(value) if name == "deterministic" else value)
        elif name == "net_name":
            if not isinstance(value, str) or not value:
                _bad(name, value, _OPTIONS[name])
            opts.net_name = value
        else:
            low = 0 if name == "handoff_us" else 1
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**31:
                _bad(name, value, _OPTIONS[name])
            setattr(opts, name, value)
    return opts


def _options_of(pg_options):
    if pg_options is None:
        return Options()
    if isinstance(pg_options, ProcessGroupCollectives.Options):
        return pg_options
    if isinstance(pg_options, dict):
        return Options(**pg_options)
    raise RuntimeError(
        f"torch_collectives: pg_options is a {type(pg_options).__name__}; pass torch_collectives.Options(...) "
        "or a dict of its options"
    )


def _create(dist_options, pg_options):
    """What torch.distributed calls to make the backend of a group (extended API)."""
    opts = _options_of(pg_options)
    opts.timeout_ = dist_options.timeout
    opts.group_name_ = str(dist_options.group_id)
    opts.global_ranks_in_group_ = list(dist_options.global_ranks_in_group)
    return ProcessGroupCollectives(dist_options.store, dist_options.group_rank, dist_options.group_size, opts)


def backend_of(group=None, device="cpu"):
    """The ProcessGroupCollectives serving `group` (default: the world) for `device`."""
    group = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = group._get_backend(torch.device(device))
    if not isinstance(backend, ProcessGroupCollectives):
        raise RuntimeError(f"torch_collectives: the group's {device} backend is {type(backend).__name__}, not ours")
    return backend


def set_timeout(group, seconds):
    """Changes the operation timeout of a group's communicator (seconds; 0: none)."""
    _set_timeout(group if isinstance(group, ProcessGroupCollectives) else backend_of(group), float(seconds))


def _register():
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True, devices=["cpu", "cuda"])


_register()

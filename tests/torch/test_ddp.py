# DistributedDataParallel over the backend: a 2-layer MLP (2,692 parameters, fixed
# seed, float32) trained 20 SGD steps, each rank on its shard of a fixed global batch.
# Its parameters must equal a single-process run on the whole batch (DDP averages the
# gradients: the single-process loss is the mean over the whole batch), rtol 1e-5, and
# equal the same DDP run over a gloo group made in the same processes. Variants:
# bucket_cap_mb 1, 25 and a tiny one (several buckets), find_unused_parameters with an
# unused branch, no_sync() gradient accumulation, the comm hooks allreduce_hook,
# fp16_compress_hook (rtol 1e-3), bf16_compress_hook (rtol 1e-2) and PowerSGD (lossy by
# design: against one process only the loss must fall; against Gloo rtol 1e-4, same
# seeded projections), static_graph and gradient_as_bucket_view; and COLL_COMPRESS=fp16
# with no hook (the library compresses; rtol 1e-3, bits differ).
#
# Run: .venv/bin/python -m pytest tests/torch/test_ddp.py --nranks N [--backend gloo] [-k EXPR]
import os

import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
from torch.nn.parallel import DistributedDataParallel as DDP

import harness
from harness import Case

STEPS, BATCH, IN, HIDDEN, OUT, LR = 20, 32, 16, 128, 4, 0.1
RTOL, ATOL = 1e-5, 1e-6
FP16_RTOL, FP16_ATOL = 1e-3, 1e-3  # params are ~0.1-0.25; a step lost moves them ~1.7e-2
BF16_RTOL, BF16_ATOL = 1e-2, 1e-2  # 8 significant bits instead of fp16's 11


def powersgd_state(group):
    # Rank-1 approximations from the third step on, with error feedback: every rank
    # draws the same seeded projections, so two backends must give the same result.
    return powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                       use_error_feedback=True, warm_start=True, random_seed=0)


# name -> DDP options and how the training runs
VARIANTS = {
    "bucket_1mb": dict(ddp=dict(bucket_cap_mb=1)),
    "bucket_25mb": dict(ddp=dict(bucket_cap_mb=25)),
    "bucket_tiny": dict(ddp=dict(bucket_cap_mb=0.002)),  # ~2 KB: several buckets
    "find_unused": dict(ddp=dict(find_unused_parameters=True), unused=True),
    "no_sync_accumulate": dict(micro=2),
    "hook_allreduce": dict(hook=default_hooks.allreduce_hook),
    "hook_fp16_compress": dict(hook=default_hooks.fp16_compress_hook, rtol=FP16_RTOL,
                               atol=FP16_ATOL),
    "hook_bf16_compress": dict(hook=default_hooks.bf16_compress_hook, rtol=BF16_RTOL,
                               atol=BF16_ATOL),
    "hook_powersgd": dict(hook=powerSGD_hook.powerSGD_hook, hook_state=powersgd_state, lossy=True, rtol=1e-4,
                          atol=1e-5),
    "static_graph": dict(ddp=dict(static_graph=True)),
    "gradient_as_bucket_view": dict(ddp=dict(gradient_as_bucket_view=True,
                                             bucket_cap_mb=0.002)),
}


class MLP(torch.nn.Module):
    def __init__(self, unused):
        super().__init__()
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, OUT)
        # A branch that forward() never uses (for find_unused_parameters).
        self.unused = torch.nn.Linear(HIDDEN, OUT) if unused else None

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def make_model(unused):
    torch.manual_seed(0)
    return MLP(unused)


def global_batches():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(STEPS, BATCH, IN, generator=gen), \
        torch.randn(STEPS, BATCH, OUT, generator=gen)


def micro_batches(x, y, micro):
    """A step's batch cut into `micro` consecutive micro-batches."""
    return list(zip(x.chunk(micro), y.chunk(micro)))


def shard(t, rank, world):
    return t.chunk(world)[rank]


def train_single(v):
    """The reference: one process, the whole batch, the mean loss over it."""
    model = make_model(v.get("unused", False))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xs, ys = global_batches()
    for x, y in zip(xs, ys):
        opt.zero_grad()
        for mx, my in micro_batches(x, y, v.get("micro", 1)):
            torch.nn.functional.mse_loss(model(mx), my).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def train_ddp(ctx, v, group):
    model = DDP(make_model(v.get("unused", False)), process_group=group, **v.get("ddp", {}))
    if "hook" in v:
        model.register_comm_hook(v.get("hook_state", lambda g: g)(group), v["hook"])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    xs, ys = global_batches()
    for x, y in zip(xs, ys):
        opt.zero_grad()
        micros = micro_batches(x, y, v.get("micro", 1))
        for k, (mx, my) in enumerate(micros):
            mx, my = shard(mx, ctx.rank, ctx.world), shard(my, ctx.rank, ctx.world)
            if k + 1 < len(micros):
                with model.no_sync():  # accumulate locally, no communication
                    torch.nn.functional.mse_loss(model(mx), my).backward()
            else:
                torch.nn.functional.mse_loss(model(mx), my).backward()
        opt.step()
    return [p.detach().clone() for p in model.module.parameters()]


def make_group(ctx, backend, v):
    return dist.new_group(backend=backend, timeout=ctx.pg_timeout)


def compare(ctx, what, got, expected, v):
    names = [n for n, _ in make_model(v.get("unused", False)).named_parameters()]
    for name, g, e in zip(names, got, expected):
        ctx.check(f"{what}: parameter {name}", g, e, rtol=v.get("rtol", RTOL),
                  atol=v.get("atol", ATOL))


_runs = {}  # variant -> parameters after DDP over the backend (for the gloo comparison)


def loss_on_all(params, v):
    """The mean loss over every global batch of a model holding params."""
    model = make_model(v.get("unused", False))
    with torch.no_grad():
        for p, value in zip(model.parameters(), params):
            p.copy_(value)
        xs, ys = global_batches()
        return float(sum(torch.nn.functional.mse_loss(model(x), y) for x, y in zip(xs, ys)))


def ddp_vs_single(ctx, name):
    v = VARIANTS[name]
    params = train_ddp(ctx, v, make_group(ctx, ctx.backend, v))
    _runs[name] = params
    if v.get("lossy"):  # an approximation of the gradients: it must still train
        before, after = loss_on_all([p.detach() for p in make_model(False).parameters()], v), loss_on_all(params, v)
        ctx.expect(f"DDP {name}: the loss fell ({before:.4f} -> {after:.4f})", after < before)
        return
    compare(ctx, f"DDP {name} vs one process", params, train_single(v), v)
    if v.get("unused"):
        start = list(make_model(True).unused.parameters())
        compare(ctx, "the unused branch stays as initialised", params[-2:], start, v)


def ddp_vs_gloo(ctx, name):
    if ctx.backend == "gloo" and not os.environ.get("TC_FORCE"):
        pytest.skip("gloo: comparing gloo with itself (--force runs it)")
    v = VARIANTS[name]
    if name not in _runs:
        pytest.skip("the run over the backend did not happen (filtered out)")
    compare(ctx, f"DDP {name}: {ctx.backend} vs gloo", _runs[name],
            train_ddp(ctx, v, make_group(ctx, "gloo", v)), v)


def library_compress(ctx):
    """COLL_COMPRESS=fp16, no hook: the library compresses DDP's fp32 gradient allreduce
    itself (fp32 sums at every hop). Trains to the single-process parameters within the
    fp16 hook's tolerance, and to other bits than the uncompressed run (so it did compress).
    """
    if ctx.backend != "collectives":
        pytest.skip("COLL_COMPRESS is this library's")
    # Read when the group's communicator initialises; one-shots (exact: fp32 on the wire)
    # off, as DDP's buckets here (11 KB) would take them.
    saved = {k: os.environ.get(k) for k in ("COLL_COMPRESS", "COLL_ONESHOT_BYTES", "COLL_NET_ONESHOT_BYTES")}
    os.environ.update(COLL_COMPRESS="fp16", COLL_ONESHOT_BYTES="0", COLL_NET_ONESHOT_BYTES="0")
    try:
        v = dict(rtol=FP16_RTOL, atol=FP16_ATOL)
        params = train_ddp(ctx, v, make_group(ctx, ctx.backend, v))
    finally:
        for k, val in saved.items():
            if val is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = val
    compare(ctx, "DDP with COLL_COMPRESS=fp16 vs one process", params, train_single(v), v)
    exact = train_ddp(ctx, {}, make_group(ctx, ctx.backend, {}))
    ctx.expect("COLL_COMPRESS=fp16 changed the result's bits",
               any(not torch.equal(a, b) for a, b in zip(params, exact)))


def cases(world):
    out = []
    for name in VARIANTS:
        out += [Case(f"ddp/{name}/vs_single_process", ddp_vs_single, name),
                Case(f"ddp/{name}/vs_gloo", ddp_vs_gloo, name)]
    return out + [Case("ddp/library_compress_fp16", library_compress)]


@harness.table(cases(harness.WORLD))
def test_ddp(ctx, case):
    case.run(ctx)

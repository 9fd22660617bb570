# FSDP2, DTensor and distributed checkpoints over the backend, on CPU:
#  fsdp/*: torch.distributed.fsdp.fully_shard (each encoder layer, then the root) of a
#    small transformer (a linear embedding, 2 nn.TransformerEncoderLayer of width 32,
#    a linear head; float32, no dropout; 17,764 parameters) trained 6 SGD steps, each
#    rank on its shard of a fixed global batch. Its per-step losses and final
#    parameters must equal a single-process run on the whole batch (rtol 1e-4), and
#    equal the same training over a gloo group made in the same processes (rtol 1e-5).
#  dtensor/*: a 1-D DeviceMesh of device_type "cpu" over the group; distribute_tensor
#    (Shard(0), uneven rows), then Shard(0) -> Replicate -> Shard(1), Shard(0) ->
#    Shard(1) directly, Partial -> Replicate and Partial -> Shard(0), and full_tensor();
#    every rank's local tensor checked.
#  dcp/*: a fully_shard model's state dict saved with torch.distributed.checkpoint.save
#    by 4 processes (sharded 4 ways) into a directory, loaded with dcp.load by 2 of them
#    into a model sharded 2 ways (over a 2-rank group of the backend); every parameter
#    equal to what was saved. Needs 4 ranks (skipped with fewer).
#
# Run: .venv/bin/python -m pytest tests/torch/test_fsdp.py --nranks N [--backend gloo] [-k EXPR]
import os

import pytest
import torch
import torch.distributed as dist
from torch import nn

import harness
from harness import Case

try:  # FSDP2, public DTensor and these checkpoint APIs: torch 2.6 and later
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict
    from torch.distributed.checkpoint.state_dict import set_model_state_dict
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
except ImportError as e:
    pytest.skip(f"torch {torch.__version__} lacks FSDP2, DTensor or distributed "
                f"checkpoints: {e}", allow_module_level=True)

STEPS, BATCH, SEQ, IN, WIDTH, HEADS, FF, LAYERS, OUT, LR = 6, 12, 8, 16, 32, 4, 64, 2, 4, 0.05
RTOL_SINGLE, ATOL_SINGLE = 1e-4, 1e-6  # another summation order than one process's
RTOL_GLOO, ATOL_GLOO = 1e-5, 1e-7


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(IN, WIDTH)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(WIDTH, HEADS, FF, dropout=0.0, batch_first=True)
            for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, OUT)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(h.mean(1))


def make_model(seed=0):
    torch.manual_seed(seed)
    return Net()


def sharded_model(mesh, seed=0):
    model = make_model(seed)
    for layer in model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def global_batches():
    gen = torch.Generator().manual_seed(1)
    return torch.randn(STEPS, BATCH, SEQ, IN, generator=gen), \
        torch.randn(STEPS, BATCH, OUT, generator=gen)


def need_even_batch(ctx):
    if BATCH % ctx.world:
        pytest.skip(f"the global batch of {BATCH} does not split evenly over {ctx.world} ranks")


# ------------------------------------------------------------------------ training


def train_single():
    """The reference: one process, the whole batch; (losses, parameters)."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in zip(*global_batches()):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), {n: p.detach().clone() for n, p in model.named_parameters()}


def train_fsdp(ctx, group):
    """FSDP2 over `group` (every rank of the world); (losses, full parameters)."""
    mesh = DeviceMesh.from_group(group, "cpu")
    model = sharded_model(mesh)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in zip(*global_batches()):
        x, y = x.chunk(ctx.world)[ctx.rank], y.chunk(ctx.world)[ctx.rank]
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # FSDP reduce-scatters the gradients (their mean over the ranks)
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, group=group)  # equal shards: the mean of the local means
        losses.append(mean / ctx.world)
    params = {}
    for name, p in model.named_parameters():
        ctx.expect(f"parameter {name} is a sharded DTensor", isinstance(p, DTensor),
                   type(p).__name__)
        params[name] = p.full_tensor().detach().clone() if isinstance(p, DTensor) else p
    return torch.stack(losses), params


def compare(ctx, what, got, expected, rtol, atol):
    (gl, gp), (el, ep) = got, expected
    ctx.check(f"{what}: the losses of the {STEPS} steps", gl, el, rtol=rtol, atol=atol)
    ctx.expect(f"{what}: the same parameter names", sorted(gp) == sorted(ep),
               f"{sorted(set(gp) ^ set(ep))}")
    for name in ep:
        if name in gp:
            ctx.check(f"{what}: parameter {name}", gp[name], ep[name], rtol=rtol, atol=atol)


_runs = {}  # the run over the backend, for the gloo comparison


def fsdp_vs_single(ctx):
    need_even_batch(ctx)
    run = train_fsdp(ctx, dist.distributed_c10d._get_default_group())
    _runs["backend"] = run
    losses = run[0]
    ctx.expect("the loss falls", losses[-1] < losses[0], f"losses {losses.tolist()}")
    compare(ctx, "FSDP2 vs one process", run, train_single(), RTOL_SINGLE, ATOL_SINGLE)


def fsdp_vs_gloo(ctx):
    if ctx.backend == "gloo" and not os.environ.get("TC_FORCE"):
        pytest.skip("gloo: comparing gloo with itself (--force runs it)")
    if "backend" not in _runs:
        pytest.skip("the run over the backend did not happen (filtered out)")
    need_even_batch(ctx)
    gloo = dist.new_group(backend="gloo", timeout=ctx.pg_timeout)
    compare(ctx, f"FSDP2 over {ctx.backend} vs over gloo", _runs["backend"],
            train_fsdp(ctx, gloo), RTOL_GLOO, ATOL_GLOO)


# -------------------------------------------------------------------------- DTensor


def shard_of(t, dim, rank, world):
    """Rank `rank`'s piece of t split along `dim` as DTensor's Shard(dim) does (torch.chunk:
    pieces of ceil(size / world), the last ones shorter or empty)."""
    size = t.shape[dim]
    step = -(-size // world)
    start = min(rank * step, size)
    return t.narrow(dim, start, min(step, size - start))


def dtensor_redistribute(ctx):
    n, me = ctx.world, ctx.rank
    mesh = init_device_mesh("cpu", (n,))
    ctx.expect("the mesh's device_type is cpu", mesh.device_type == "cpu", mesh.device_type)
    rows, cols = 2 * n + 1, 3 * n + 1  # uneven pieces both ways
    x = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols)

    d0 = distribute_tensor(x, mesh, [Shard(0)])  # from rank 0's x (a scatter)
    ctx.check("distribute_tensor Shard(0): local rows", d0.to_local(), shard_of(x, 0, me, n))
    rep = d0.redistribute(mesh, [Replicate()])  # all-gather
    ctx.check("Shard(0) -> Replicate: local tensor", rep.to_local(), x)
    d1 = rep.redistribute(mesh, [Shard(1)])  # each rank keeps its columns
    ctx.check("Replicate -> Shard(1): local columns", d1.to_local(), shard_of(x, 1, me, n))
    ctx.check("Shard(1).full_tensor()", d1.full_tensor(), x)
    d01 = d0.redistribute(mesh, [Shard(1)])  # all-to-all
    ctx.check("Shard(0) -> Shard(1) directly: local columns", d01.to_local(),
              shard_of(x, 1, me, n))
    d10 = d01.redistribute(mesh, [Shard(0)])
    ctx.check("Shard(1) -> Shard(0): local rows", d10.to_local(), shard_of(x, 0, me, n))

    # Partial: every rank holds a summand of the same shape; the sum is the tensor.
    summand = x * (me + 1)
    total = x * (n * (n + 1) // 2)
    part = DTensor.from_local(summand, mesh, [Partial()])
    ctx.check("Partial -> Replicate: local tensor", part.redistribute(
        mesh, [Replicate()]).to_local(), total)  # all-reduce
    part = DTensor.from_local(summand.clone(), mesh, [Partial()])
    ctx.check("Partial -> Shard(0): local rows", part.redistribute(
        mesh, [Shard(0)]).to_local(), shard_of(total, 0, me, n))  # reduce-scatter


# ------------------------------------------------------------- distributed checkpoints


def saved_value(k, shape):
    """Parameter k's saved values: none an initialisation gives (exact in float32)."""
    n = torch.Size(shape).numel()
    return (torch.arange(n, dtype=torch.float32).reshape(shape) % 251) / 8 - 15 + k


def set_saved_values(model):
    """Set every parameter (a DTensor) to its saved values; {name: full values}."""
    full = {}
    with torch.no_grad():
        for k, (name, p) in enumerate(sorted(model.named_parameters())):
            full[name] = saved_value(k, p.shape)
            p.copy_(distribute_tensor(full[name], p.device_mesh, p.placements))
    return full


def dcp_save4_load2(ctx):
    if ctx.world < 4:
        pytest.skip("needs 4 ranks (saved by 4 processes, loaded by 2)")
    path = os.path.join(ctx.tmpdir, "checkpoint")
    savers = list(range(4))
    g4 = dist.distributed_c10d._get_default_group() if ctx.world == 4 else \
        dist.new_group(savers, backend=ctx.backend, timeout=ctx.pg_timeout)
    g2 = dist.new_group([0, 1], backend=ctx.backend, timeout=ctx.pg_timeout)
    expected = None
    if ctx.rank in savers:
        model = sharded_model(DeviceMesh.from_group(g4, "cpu"))
        expected = set_saved_values(model)
        sd = get_model_state_dict(model)
        local = sd["head.weight"].to_local().shape[0] if isinstance(
            sd["head.weight"], DTensor) else None
        ctx.expect("the saved state dict is sharded 4 ways (head.weight: 1 of 4 rows)",
                   local == 1, f"local rows {local}")
        dcp.save(sd, checkpoint_id=path, process_group=g4)
    if ctx.rank not in (0, 1):
        return
    model = sharded_model(DeviceMesh.from_group(g2, "cpu"), seed=7)  # other values
    sd = get_model_state_dict(model)
    dcp.load(sd, checkpoint_id=path, process_group=g2)
    set_model_state_dict(model, sd)
    for name, p in sorted(model.named_parameters()):
        ctx.expect(f"{name} is sharded 2 ways", isinstance(p, DTensor) and
                   p.to_local().shape == shard_of(expected[name], 0, ctx.rank, 2).shape,
                   f"{type(p).__name__} {tuple(p.to_local().shape)}")
        if isinstance(p, DTensor):
            ctx.check(f"{name}: local shard loaded", p.to_local(),
                      shard_of(expected[name], 0, ctx.rank, 2))
            ctx.check(f"{name}: full_tensor() loaded", p.full_tensor(), expected[name])


def cases(world):
    return [Case("fsdp/transformer/vs_single_process", fsdp_vs_single),
            Case("fsdp/transformer/vs_gloo", fsdp_vs_gloo),
            Case("dtensor/redistribute", dtensor_redistribute),
            Case("dcp/save4_load2", dcp_save4_load2)]


@harness.table(cases(harness.WORLD))
def test_fsdp(ctx, case):
    case.run(ctx)

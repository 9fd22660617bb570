# Groups over the backend with torch 2.x's group APIs, every result checked against
# values computed here:
#  per_device/*: a default group with one backend per device type,
#    init_process_group("cpu:collectives,cuda:nccl") (needs a GPU: torch's nccl cannot
#    be created without one) and "cpu:collectives,cuda:gloo" (runs anywhere): CPU
#    tensors must go to the backend (get_backend() gives the spec, the group's
#    _get_backend(cpu) is the backend's), and collectives, new_group() (inheriting the
#    spec) and new_group(backend=...) give the right values.
#  new_group/*: new_group(ranks, backend=...) on a default group of gloo (two backends in
#    one process), with use_local_synchronization=True, and ranks given in any order.
#  new_subgroups/*: dist.new_subgroups(group_size) and new_subgroups_by_enumeration.
#  split_group/*: dist.split_group(parent_pg, split_ranks) of the default group and of a
#    subgroup (group ranks, in the order given; ranks in no split get NON_GROUP_MEMBER);
#    the backend must support splitting.
#
# Run: .venv/bin/python -m pytest tests/torch/test_groups.py --nranks N [--backend gloo] [-k EXPR]
import inspect
import os

import pytest
import torch
import torch.distributed as dist

import harness
from harness import Case

DEFAULT_PG = False  # each case creates (and destroys) its default group
CPU = torch.device("cpu")


_worlds = 0


def init(ctx, backend, name):
    """The default group over a FileStore of this world's own (no port to race for; a file
    two worlds shared would hand the second the first one's keys while a rank of the first
    still holds it)."""
    global _worlds
    _worlds += 1
    store = dist.FileStore(os.path.join(ctx.tmpdir, f"store_{name}_{_worlds}"), ctx.world)
    dist.init_process_group(backend, store=store, rank=ctx.rank, world_size=ctx.world,
                            timeout=ctx.pg_timeout)


def with_world(backend, name):
    """Decorator: the case runs inside a default group of `backend` (ctx.backend where
    None), destroyed afterwards whatever happened."""
    def wrap(fn):
        def case(ctx, *args):
            init(ctx, backend or ctx.backend, name)
            try:
                fn(ctx, *args)
            finally:
                dist.destroy_process_group()
        return case
    return wrap


def needs(name, param=None):
    """Skip what this torch lacks: dist.<name>, or its keyword argument `param`."""
    fn = getattr(dist, name, None)
    if fn is None:
        pytest.skip(f"torch {torch.__version__} has no dist.{name}")
    if param and param not in inspect.signature(fn).parameters:
        pytest.skip(f"dist.{name} of torch {torch.__version__} takes no {param}")


def cpu_backend_name(group=None):
    pg = group or dist.distributed_c10d._get_default_group()
    return pg._get_backend(CPU).name()


def check_group(ctx, what, group, members, backend):
    """Collectives on `group` (global ranks `members`, in group-rank order) give the
    right values, and its rank/size/backend answers are right."""
    me = ctx.rank
    if me not in members:
        ctx.expect(f"{what}: a non-member gets NON_GROUP_MEMBER",
                   group is dist.GroupMember.NON_GROUP_MEMBER, repr(group))
        return
    ctx.expect(f"{what}: get_rank(group)", dist.get_rank(group) == members.index(me),
               f"{dist.get_rank(group)}, expected {members.index(me)}")
    ctx.expect(f"{what}: get_world_size(group)", dist.get_world_size(group) == len(members),
               f"{dist.get_world_size(group)}")
    ranks = dist.get_process_group_ranks(dist.group.WORLD if group is None else group)  # None: 2.5 on
    ctx.expect(f"{what}: get_process_group_ranks", ranks == members, f"{ranks}")
    name = cpu_backend_name(group)
    ctx.expect(f"{what}: its CPU backend is {backend}'s", name == backend,
               f"_get_backend(cpu).name() is {name!r}")
    t = torch.arange(6, dtype=torch.float32) * (me + 1)
    dist.all_reduce(t, group=group)
    ctx.check(f"{what}: all_reduce", t,
              torch.arange(6, dtype=torch.float32) * sum(r + 1 for r in members))
    b = torch.full((4,), me, dtype=torch.int64)
    dist.broadcast(b, src=members[-1], group=group)  # a global rank: group_src is 2.5 on
    ctx.check(f"{what}: broadcast from group rank {len(members) - 1}", b,
              torch.full((4,), members[-1], dtype=torch.int64))
    out = torch.zeros(len(members) * 3, dtype=torch.int32)
    dist.all_gather_into_tensor(out, torch.full((3,), me, dtype=torch.int32), group=group)
    ctx.check(f"{what}: all_gather_into_tensor", out,
              torch.tensor(members, dtype=torch.int32).repeat_interleave(3))


# ------------------------------------------------------------------ per-device backends


def per_device(ctx, cuda_backend):
    """A default group with ctx.backend for CPU tensors and `cuda_backend` for CUDA
    ones; only CPU tensors are used."""
    if cuda_backend == "nccl" and not (torch.cuda.is_available()
                                       and torch.cuda.device_count() > 0):
        pytest.skip("needs a GPU: torch's nccl backend cannot be created without one")
    if cuda_backend == "nccl":
        torch.cuda.set_device(ctx.rank % torch.cuda.device_count())
    spec = f"cpu:{ctx.backend},cuda:{cuda_backend}"
    init(ctx, spec, f"per_device_{cuda_backend}")
    try:
        got = dist.get_backend()
        ctx.expect(f"get_backend() == {spec!r}", got == spec, f"got {got!r}")
        world = list(range(ctx.world))
        check_group(ctx, spec, None, world, ctx.backend)
        check_group(ctx, f"{spec}: new_group() (inherits the spec)",
                    dist.new_group(timeout=ctx.pg_timeout), world, ctx.backend)
        check_group(ctx, f"{spec}: new_group(backend={ctx.backend!r})",
                    dist.new_group(backend=ctx.backend, timeout=ctx.pg_timeout), world,
                    ctx.backend)
        dist.barrier()
    finally:
        dist.destroy_process_group()


# ------------------------------------------------------------------------ new_group


@with_world("gloo", "mixed")
def new_group_on_gloo(ctx):
    """The default group is gloo's; a new_group of the backend beside it."""
    world = list(range(ctx.world))
    g = dist.new_group(world, backend=ctx.backend, timeout=ctx.pg_timeout)
    ctx.expect("get_backend(group)", dist.get_backend(g) == ctx.backend,
               f"got {dist.get_backend(g)!r}")
    check_group(ctx, f"new_group(backend={ctx.backend!r}) beside a gloo default group",
                g, world, ctx.backend)
    sub = world[::-1][: max(1, ctx.world - 1)]  # not in order: torch sorts them
    gs = dist.new_group(sub, backend=ctx.backend, timeout=ctx.pg_timeout)
    check_group(ctx, f"new_group({sub}, backend={ctx.backend!r})", gs, sorted(sub),
                ctx.backend)
    check_group(ctx, "the gloo default group still", None, world, "gloo")


@with_world(None, "local_sync")
def new_group_local_sync(ctx):
    """use_local_synchronization=True: only the members call new_group."""
    evens = list(range(0, ctx.world, 2))
    odds = list(range(1, ctx.world, 2))
    mine = evens if ctx.rank % 2 == 0 else odds
    g = dist.new_group(mine, backend=ctx.backend, timeout=ctx.pg_timeout,
                       use_local_synchronization=True)
    check_group(ctx, f"new_group({mine}, use_local_synchronization=True)", g, mine,
                ctx.backend)


@with_world(None, "unsorted")
def new_group_unsorted(ctx):
    """sort_ranks=False: group ranks follow the order given."""
    needs("new_group", "sort_ranks")
    order = list(range(ctx.world))[::-1]
    g = dist.new_group(order, backend=ctx.backend, timeout=ctx.pg_timeout,
                       sort_ranks=False)
    check_group(ctx, f"new_group({order}, sort_ranks=False)", g, order, ctx.backend)


# ------------------------------------------------------------------------ subgroups


@with_world(None, "subgroups")
def new_subgroups(ctx, size):
    if ctx.world % size:
        pytest.skip(f"the world ({ctx.world}) is not a multiple of the group size {size}")
    cur, groups = dist.new_subgroups(group_size=size, backend=ctx.backend,
                                     timeout=ctx.pg_timeout)
    ctx.expect("new_subgroups: one group per slice", len(groups) == ctx.world // size,
               f"{len(groups)} groups")
    first = ctx.rank - ctx.rank % size
    check_group(ctx, f"new_subgroups({size}): the current subgroup", cur,
                list(range(first, first + size)), ctx.backend)


@with_world(None, "enumeration")
def new_subgroups_by_enumeration(ctx):
    """Parity classes, odd ones first in the list."""
    ranks = [list(range(1, ctx.world, 2)), list(range(0, ctx.world, 2))]
    ranks = [r for r in ranks if r]
    cur, groups = dist.new_subgroups_by_enumeration(ranks, backend=ctx.backend,
                                                    timeout=ctx.pg_timeout)
    ctx.expect("new_subgroups_by_enumeration: a group per list", len(groups) == len(ranks),
               f"{len(groups)} groups")
    mine = next(r for r in ranks if ctx.rank in r)
    check_group(ctx, f"new_subgroups_by_enumeration({ranks})", cur, mine, ctx.backend)


# ---------------------------------------------------------------------- split_group


def needs_split():
    """Skip where this torch cannot split: older ones lack dist.split_group(split_ranks=);
    some (2.11) split only a default group bound to an accelerator (init_process_group's
    device_id), which a CPU-only job cannot have, so Gloo's groups cannot be split there
    either."""
    needs("split_group", "split_ranks")
    bound = dist.distributed_c10d._get_default_group().bound_device_id
    if not bound and "No device associated with the default pg" in inspect.getsource(dist.split_group):
        pytest.skip(f"torch {torch.__version__} splits only a default group bound to an accelerator")


def _split(ctx, what, parent, split_ranks, parent_members):
    """split_ranks are group ranks of `parent`; check the split this rank lands in."""
    g = dist.split_group(parent, split_ranks=split_ranks, timeout=ctx.pg_timeout)
    mine = ([s for s in split_ranks if parent_members.index(ctx.rank) in s]
            if ctx.rank in parent_members else [])
    members = [parent_members[r] for r in mine[0]] if mine else []
    check_group(ctx, f"{what} {split_ranks}", g, members, ctx.backend)
    return g


@with_world(None, "split")
def split_world(ctx):
    needs_split()
    backend = dist.distributed_c10d._get_default_group()._get_backend(CPU)
    if not backend.supports_splitting:
        ctx.fail(f"the backend's supports_splitting is False ({type(backend).__name__}): "
                 "dist.split_group cannot split its groups")
        return
    world = list(range(ctx.world))
    # Two splits, the second listed in reverse (group ranks follow the list's order).
    odds, evens = world[1::2], world[0::2]
    _split(ctx, "split_group(default group)", None,
           [s for s in (evens, odds[::-1]) if s], world)
    # Only rank 0 and the last rank are in a split; everyone else is a non-member.
    ends = sorted({0, ctx.world - 1})
    _split(ctx, "split_group(default group), some ranks in no split", None, [ends], world)
    check_group(ctx, "the default group after the splits", None, world, ctx.backend)


@with_world(None, "split_sub")
def split_subgroup(ctx):
    """A split of a new_group: split_ranks are the subgroup's group ranks."""
    if ctx.world < 2:
        pytest.skip("needs 2 ranks")
    needs_split()
    sub = list(range(1, ctx.world)) if ctx.world > 2 else [0, 1]
    parent = dist.new_group(sub, backend=ctx.backend, timeout=ctx.pg_timeout)
    if ctx.rank not in sub:
        return  # split_group is called by the parent's members only
    n = len(sub)
    splits = [list(range(0, n, 2)), list(range(1, n, 2))]
    g = _split(ctx, f"split_group(new_group({sub}))", parent, [s for s in splits if s], sub)
    # The parent still works after being split.
    check_group(ctx, f"new_group({sub}) after its split", parent, sub, ctx.backend)
    del g


def cases(world):
    return [Case("per_device/cuda_gloo", per_device, "gloo"),
            Case("per_device/cuda_nccl", per_device, "nccl"),
            Case("new_group/beside_gloo_default", new_group_on_gloo),
            Case("new_group/local_synchronization", new_group_local_sync),
            Case("new_group/sort_ranks_false", new_group_unsorted),
            Case("new_subgroups/size1", new_subgroups, 1),
            Case("new_subgroups/size2", new_subgroups, 2),
            Case("new_subgroups/by_enumeration", new_subgroups_by_enumeration),
            Case("split_group/world", split_world),
            Case("split_group/of_subgroup", split_subgroup)]


@harness.table(cases(harness.WORLD))
def test_group(ctx, case):
    case.run(ctx)

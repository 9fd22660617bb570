# Coalesced operations over the backend, every result checked against values computed
# here:
#  coalesce/*: dist._coalescing_manager(group, device, async_ops) around 32 small
#    all_reduce calls (mixed sizes, float32, float16 and int64, SUM and MAX; contiguous,
#    strided, and with one large tensor among them; a tensor twice and overlapping views
#    after a broadcast, in call order), around 8
#    all_gather_into_tensor and around 8 reduce_scatter_tensor calls. torch issues the
#    calls as one allreduce_coalesced / allgather_into_tensor_coalesced /
#    reduce_scatter_tensor_coalesced; with device=cpu it also brackets them with the
#    backend's startCoalescing/endCoalescing, whose Work is what cm.wait() waits for.
#    async_ops=True (cm.wait()) and False; on the default group and on a subgroup.
#  batch_p2p/*: batch_isend_irecv rings: both directions with two messages per peer
#    (matched in order), 1 to 1M elements, several dtypes, a ring on a subgroup (group
#    peers), 20 rounds passing a buffer on (a pipeline), and collectives afterwards.
#
# Run: .venv/bin/python -m pytest tests/torch/test_coalesce.py --nranks N [--backend gloo] [-k EXPR]
import pytest
import torch
import torch.distributed as dist

import harness
from harness import Case

CPU = torch.device("cpu")
SIZES = [1, 3, 7, 16, 31, 64, 100, 257]  # cycled over the 32 calls


def value(dtype, k, rank, count):
    """Call k's input on `rank`: small integers, exact in every dtype here."""
    i = torch.arange(count, dtype=torch.int64)
    return ((i * 3 + k * 7 + rank * 11) % 41 - 20).to(dtype)


def reduced(op, dtype, k, count, ranks):
    s = torch.stack([value(dtype, k, r, count) for r in ranks])
    return (s.sum(0) if op == "SUM" else s.amax(0)).to(dtype)


def group_for(ctx, which, with_device):
    """(group, its global ranks): the default group or all ranks but rank 0. Skips,
    on every rank alike, what cannot run."""
    if with_device and ctx.backend == "gloo":
        pytest.skip("gloo: no startCoalescing (_coalescing_manager with a device)")
    if which == "world":
        return None, list(range(ctx.world))
    if ctx.world < 2:
        pytest.skip("needs 2 ranks for a subgroup")
    members = list(range(1, ctx.world))
    return dist.new_group(members, backend=ctx.backend, timeout=ctx.pg_timeout), members


def manager(ctx, group, with_device, async_ops):
    """The coalescing manager; device=cpu also needs the backend's startCoalescing."""
    g = group or dist.distributed_c10d._get_default_group()
    return dist._coalescing_manager(g, device=CPU if with_device else None,
                                    async_ops=async_ops)


def finish(ctx, what, cm, async_ops):
    if async_ops:
        ctx.expect(f"{what}: the manager holds a Work", len(cm.works) >= 1,
                   f"{len(cm.works)} works")
        cm.wait()


def inputs(ctx, dtype, counts, layout):
    """The 32 calls' tensors. packed: small and contiguous (the backend reduces them as
    one); strided: every other element of a buffer; large: one of 1 MiB among them (both
    left to a library group of one reduction per tensor)."""
    if layout == "large":
        counts = counts[:5] + [(1 << 20) // dtype.itemsize] + counts[6:]
    ts = [value(dtype, k, ctx.rank, c) for k, c in enumerate(counts)]
    if layout == "strided":
        ts = [torch.stack([t, torch.zeros_like(t)], 1)[:, 0] for t in ts]
    return ts, counts


def all_reduce_x32(ctx, which, with_device, async_ops, dtype, op, layout="packed"):
    group, members = group_for(ctx, which, with_device)
    if ctx.rank not in members:
        return
    redop = dist.ReduceOp.SUM if op == "SUM" else dist.ReduceOp.MAX
    ts, counts = inputs(ctx, dtype, [SIZES[k % len(SIZES)] for k in range(32)], layout)
    what = f"32 all_reduce {op} {str(dtype)[6:]} ({layout}) in a coalescing manager"
    with manager(ctx, group, with_device, async_ops) as cm:
        for t in ts:
            dist.all_reduce(t, op=redop, group=group)
    finish(ctx, what, cm, async_ops)
    for k, (t, c) in enumerate(zip(ts, counts)):
        ctx.check(f"{what}: tensor {k}", t, reduced(op, dtype, k, c, members))


def all_reduce_in_order(ctx, with_device):
    """A broadcast, then all_reduce of one tensor twice, of two overlapping views and of
    another tensor, in one coalescing manager: each runs after the one before, as if
    called alone (a tensor passed twice is summed twice)."""
    if ctx.backend == "gloo":
        pytest.skip("gloo reduces a coalesced list as one flat buffer: a tensor passed twice is summed once")
    n = ctx.world
    a, b = value(torch.float32, 0, ctx.rank, 5), value(torch.float32, 1, ctx.rank, 5)
    buf = value(torch.float32, 2, ctx.rank, 12)
    what = "broadcast, then all_reduce of a twice, of buf[:6] and buf[4:], and of b"
    with manager(ctx, None, with_device, False):
        dist.broadcast(a, 0)
        dist.all_reduce(a)
        dist.all_reduce(a)
        dist.all_reduce(buf[:6])
        dist.all_reduce(buf[4:])
        dist.all_reduce(b)
    ranks = list(range(n))
    ctx.check(f"{what}: a", a, value(torch.float32, 0, 0, 5) * n * n)
    ctx.check(f"{what}: b", b, reduced("SUM", torch.float32, 1, 5, ranks))
    want = reduced("SUM", torch.float32, 2, 12, ranks)
    want[4:6] *= n
    ctx.check(f"{what}: buf", buf, want)


def strided_in_order(ctx, with_device):
    """Strided views keep the order too: a broadcast of m, then all_reduce of m.t() (read
    after the broadcast wrote m), then of m (read after the sum was written back)."""
    if ctx.backend == "gloo":
        pytest.skip("gloo reduces a coalesced list as one flat buffer and has no startCoalescing")
    n = ctx.world
    m = value(torch.float32, 3, ctx.rank, 16).view(4, 4)
    what = "broadcast of m, then all_reduce of m.t(), then of m"
    with manager(ctx, None, with_device, False):
        dist.broadcast(m, 0)
        dist.all_reduce(m.t())
        dist.all_reduce(m)
    ctx.check(what, m, value(torch.float32, 3, 0, 16).view(4, 4) * n * n)


def failed_block_runs_nothing(ctx):
    """An operation of a block that fails in torch while the block is queued (here the
    dense copy of a 256 TiB expanded view cannot be allocated, on every rank alike): the
    block's Work raises it, nothing of the block ran, and the group goes on."""
    if ctx.backend == "gloo":
        pytest.skip("gloo has no startCoalescing")
    n = ctx.world
    a = value(torch.float32, 4, ctx.rank, 5)
    before = a.clone()
    huge = torch.zeros(1).expand(1 << 46)  # a copy needs 2^48 bytes: more than any address space
    what = "all_reduce of a, then of a 256 TiB expanded view, in a device=cpu manager"
    try:
        with manager(ctx, None, True, False):
            dist.all_reduce(a)
            dist.all_reduce(huge)
        ctx.expect(f"{what}: raises", False, "no error")
    except RuntimeError as e:
        ctx.expect(f"{what}: names the allocation", "alloc" in str(e), str(e)[:200])
    ctx.check(f"{what}: a is untouched", a, before)
    dist.all_reduce(a)
    ctx.check(f"{what}: the next all_reduce", a, reduced("SUM", torch.float32, 4, 5, list(range(n))))


def all_gather_x8(ctx, which, with_device, async_ops):
    group, members = group_for(ctx, which, with_device)
    if ctx.rank not in members:
        return
    n = len(members)
    counts = [SIZES[k] for k in range(8)]
    ins = [value(torch.float32, k, ctx.rank, c) for k, c in enumerate(counts)]
    outs = [torch.full((n * c,), -99.0) for c in counts]
    what = "8 all_gather_into_tensor in a coalescing manager"
    with manager(ctx, group, with_device, async_ops) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i, group=group)
    finish(ctx, what, cm, async_ops)
    for k, (o, c) in enumerate(zip(outs, counts)):
        ctx.check(f"{what}: tensor {k}", o,
                  torch.cat([value(torch.float32, k, r, c) for r in members]))


def reduce_scatter_x8(ctx, which, with_device, async_ops):
    group, members = group_for(ctx, which, with_device)
    if ctx.rank not in members:
        return
    n, me = len(members), members.index(ctx.rank)
    counts = [SIZES[k] for k in range(8)]
    ins = [value(torch.float32, k, ctx.rank, n * c) for k, c in enumerate(counts)]
    outs = [torch.full((c,), -99.0) for c in counts]
    what = "8 reduce_scatter_tensor in a coalescing manager"
    with manager(ctx, group, with_device, async_ops) as cm:
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i, group=group)
    finish(ctx, what, cm, async_ops)
    for k, (o, c) in enumerate(zip(outs, counts)):
        full = reduced("SUM", torch.float32, k, n * c, members)
        ctx.check(f"{what}: tensor {k}", o, full[me * c:(me + 1) * c])


# ------------------------------------------------------------------ batch_isend_irecv


def msg(dtype, count, src, dst, salt):
    i = torch.arange(count, dtype=torch.int64)
    v = (i * 5 + src * 17 + dst * 3 + salt * 29) % 97
    return (v % 2 == 1) if dtype == torch.bool else v.to(dtype)


def ring(ctx, dtype, count):
    """Each rank sends messages 0 and 1 to the next rank and 2 and 3 to the previous
    one, and receives as many from each, all in one batch (receives listed first).
    Messages between two ranks match in the order listed: with 2 ranks, where both
    neighbours are the same rank, messages 0-3 arrive in that order."""
    if ctx.world < 2:
        pytest.skip("needs 2 ranks")
    n, me = ctx.world, ctx.rank
    nxt, prv = (me + 1) % n, (me - 1) % n
    expect = [(prv, 0), (prv, 1), (nxt, 2), (nxt, 3)]  # (sender, message)
    outs = [torch.zeros(count, dtype=dtype) for _ in expect]
    ops = [dist.P2POp(dist.irecv, o, src) for o, (src, _) in zip(outs, expect)]
    ops += [dist.P2POp(dist.isend, msg(dtype, count, me, dst, k), dst)
            for dst, k in ((nxt, 0), (nxt, 1), (prv, 2), (prv, 3))]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    what = f"batch_isend_irecv ring {str(dtype)[6:]} x{count}"
    for o, (src, k) in zip(outs, expect):
        ctx.check(f"{what}: message {k} from rank {src}", o, msg(dtype, count, src, me, k))


def ring_subgroup(ctx):
    """A ring on a subgroup of all ranks but rank 0, peers given as group ranks."""
    if ctx.world < 3:
        pytest.skip("needs 3 ranks (a subgroup of 2)")
    members = list(range(1, ctx.world))
    g = dist.new_group(members, backend=ctx.backend, timeout=ctx.pg_timeout)
    if ctx.rank not in members:
        return
    n, me = len(members), members.index(ctx.rank)
    nxt, prv = (me + 1) % n, (me - 1) % n
    out = torch.zeros(50, dtype=torch.float32)
    try:
        ops = [dist.P2POp(dist.isend, msg(torch.float32, 50, ctx.rank, 0, 0), group=g,
                          group_peer=nxt),
               dist.P2POp(dist.irecv, out, group=g, group_peer=prv)]
    except TypeError:  # torch before 2.5 names peers by global rank alone
        ops = [dist.P2POp(dist.isend, msg(torch.float32, 50, ctx.rank, 0, 0), members[nxt], group=g),
               dist.P2POp(dist.irecv, out, members[prv], group=g)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    ctx.check("batch_isend_irecv ring on a subgroup (group peers)", out,
              msg(torch.float32, 50, members[prv], 0, 0))


def pipeline(ctx, rounds=20):
    """A buffer goes round the ring `rounds` times, each rank adding its rank + 1 to it
    before passing it on in the next batch; then the group still runs collectives."""
    if ctx.world < 2:
        pytest.skip("needs 2 ranks")
    n, me = ctx.world, ctx.rank
    buf = torch.full((1000,), float(me))
    for _ in range(rounds):
        out = torch.empty_like(buf)
        works = dist.batch_isend_irecv([dist.P2POp(dist.irecv, out, (me - 1) % n),
                                        dist.P2POp(dist.isend, buf + me + 1, (me + 1) % n)])
        for w in works:
            w.wait()
        buf = out
    # After r rounds the buffer here started at rank (me - r) and each hop added the
    # sender's rank + 1.
    start = (me - rounds) % n
    added = sum(((me - j) % n) + 1 for j in range(1, rounds + 1))
    ctx.check(f"a buffer passed round the ring {rounds} times", buf,
              torch.full((1000,), float(start + added)))
    t = torch.ones(3)
    dist.all_reduce(t)
    ctx.check("all_reduce after the batches", t, torch.full((3,), float(n)))


def cases(world):
    out = []
    for which in ("world", "subgroup"):
        for dev in (False, True):
            for a in (True, False):
                tag = f"{which}/{'device_cpu' if dev else 'no_device'}/{'async' if a else 'sync'}"
                out.append(Case(f"coalesce/all_reduce_x32/float32/SUM/{tag}", all_reduce_x32,
                                which, dev, a, torch.float32, "SUM"))
                out += [Case(f"coalesce/all_gather_into_tensor_x8/{tag}", all_gather_x8,
                             which, dev, a),
                        Case(f"coalesce/reduce_scatter_tensor_x8/{tag}", reduce_scatter_x8,
                             which, dev, a)]
    for dev in (False, True):
        tag = "device_cpu" if dev else "no_device"
        out += [Case(f"coalesce/all_reduce_x32/int64/MAX/world/{tag}/async", all_reduce_x32,
                     "world", dev, True, torch.int64, "MAX")]
        out.append(Case(f"coalesce/all_reduce_in_order/{tag}", all_reduce_in_order, dev))
        out.append(Case(f"coalesce/strided_in_order/{tag}", strided_in_order, dev))
        for dtype, layout in ((torch.float32, "strided"), (torch.float32, "large"),
                              (torch.float16, "packed")):
            out.append(Case(f"coalesce/all_reduce_x32/{str(dtype)[6:]}/SUM/world/{tag}/sync/{layout}",
                            all_reduce_x32, "world", dev, False, dtype, "SUM", layout))
    out.append(Case("coalesce/failed_block_runs_nothing", failed_block_runs_nothing))
    for dtype, count in ((torch.float32, 1), (torch.float32, 1 << 20), (torch.int64, 33),
                         (torch.float16, 1000), (torch.bool, 7)):
        out.append(Case(f"batch_p2p/ring/{str(dtype)[6:]}/c{count}", ring, dtype, count))
    out += [Case("batch_p2p/ring_subgroup", ring_subgroup),
            Case("batch_p2p/pipeline_20_rounds", pipeline)]
    return out


@harness.table(cases(harness.WORLD))
def test_coalesced(ctx, case):
    case.run(ctx)

# Every c10d collective of torch 2.x on CPU tensors, checked against values
# computed here (never against another backend): broadcast, all_reduce (SUM, PRODUCT,
# MIN, MAX, AVG, PREMUL_SUM, BAND/BOR/BXOR), all_reduce_coalesced, reduce, all_gather,
# all_gather_into_tensor, all_gather_coalesced, gather, scatter, reduce_scatter,
# reduce_scatter_tensor, all_to_all_single (even and uneven splits), all_to_all,
# send/recv, isend/irecv, batch_isend_irecv and barrier, over 11 dtypes; in-place,
# out-of-place, non-contiguous and async (Work.wait/is_completed/get_future) variants;
# unsupported (op, dtype) pairs must raise RuntimeError naming the op and the dtype, and
# the group must still work afterwards; integer sums wrap, integer AVG truncates toward
# zero; new_group subsets and several groups with async operations in flight at once.
#
# Run: .venv/bin/python -m pytest tests/torch/test_ops.py --nranks N [--backend gloo] [-k EXPR]
import functools
import random
import time

import pytest
import torch
import torch.distributed as dist

import checks
from checks import DTYPES, dtype_name
import harness
from harness import Case

R = dist.ReduceOp
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM", "BAND", "BOR", "BXOR"]
BITWISE = ("BAND", "BOR", "BXOR")
# What torch's own argument checks raise (before the backend sees the call).
TORCH_CHECK_ERRORS = (ValueError, RuntimeError)
F32, I32 = torch.float32, torch.int32

# ------------------------------------------------------------------ expected semantics


def support(op, dtype):
    """'ok'; 'error': RuntimeError naming op and dtype; 'either': that error or a result.

    Complex takes SUM, AVG (and PREMUL_SUM, which torch turns into float32 pairs);
    bitwise ops take integers and bool; bool has no AVG or PREMUL_SUM; PREMUL_SUM on an
    integer dtype may be refused (torch's NCCL backend does) or scale by the factor."""
    if dtype.is_complex:
        return "ok" if op in ("SUM", "AVG", "PREMUL_SUM") else "error"
    if op in BITWISE and dtype.is_floating_point:
        return "error"
    if dtype == torch.bool and op in ("AVG", "PREMUL_SUM"):
        return "error"
    if op == "PREMUL_SUM" and not dtype.is_floating_point:
        return "either"
    return "ok"


def premul_factor(dtype):
    return 0.5 if dtype.is_floating_point or dtype.is_complex else 2.0


def make_op(op, dtype):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(premul_factor(dtype))
    return getattr(R, op)


def _unsigned(dtype):
    return dtype in (torch.uint8, torch.bool)


def values(kind, dtype, count, rank, salt=0):
    """Rank `rank`'s input: small integers, exact in every dtype (also in bfloat16 after a
    sum over 4 ranks). kind: 'range' (sums, min/max), 'product' (1, 2, 3 and negatives),
    'bits' (bit patterns; casting wraps them into the narrow types)."""
    i = torch.arange(count, dtype=torch.int64)
    raw = i * 7 + rank * 13 + salt * 5 + 3
    if dtype == torch.bool:
        return (raw % 3 != 0) if kind == "product" else (raw % 2 == 1)
    if dtype.is_complex:
        imag = values(kind, torch.float32, count, rank, salt + 1)
        return torch.complex(values(kind, torch.float32, count, rank, salt), imag)
    if kind == "product":
        table = torch.tensor([1, 2, 1, 3, 1] if _unsigned(dtype) else [1, -1, 2, 1, -2])
        v = table[raw % 5]
    elif kind == "bits":
        v = (i * 40503 + rank * 9973 + salt * 7 + 17) % 65536
        v = v * 65537 + (v >> 3)
    else:
        h = 25 if dtype in (torch.int8, torch.uint8) else 50
        v = raw % (2 * h) - (0 if _unsigned(dtype) else h)
    return v.to(dtype)


def kind_of(op):
    return "product" if op == "PRODUCT" else "bits" if op in BITWISE else "range"


def _wide(dtype):
    if dtype.is_complex:
        return torch.complex128
    return torch.float64 if dtype.is_floating_point else torch.int64


def _bool_reduce(op, s):
    if op in ("SUM", "MAX", "BOR"):
        return s.any(0)
    if op in ("PRODUCT", "MIN", "BAND"):
        return s.all(0)
    return s.to(torch.int64).sum(0) % 2 == 1  # BXOR


def reduce_ref(op, dtype, inputs):
    """The reduction of `inputs` (one tensor per rank) computed here, in a wide type."""
    if dtype == torch.bool:
        return _bool_reduce(op, torch.stack(inputs))
    s = torch.stack([t.to(_wide(dtype)) for t in inputs])
    integer = not (dtype.is_floating_point or dtype.is_complex)
    if op == "SUM":
        r = s.sum(0)
    elif op == "PREMUL_SUM":
        f = premul_factor(dtype)
        r = (s * (int(f) if integer else f)).sum(0)
    elif op == "PRODUCT":
        r = s.prod(0)
    elif op == "MIN":
        r = s.amin(0)
    elif op == "MAX":
        r = s.amax(0)
    elif op == "AVG" and integer:  # the wrapped sum, truncated toward zero
        r = torch.div(s.sum(0).to(dtype).to(torch.int64), len(inputs), rounding_mode="trunc")
    elif op == "AVG":
        r = s.sum(0) / len(inputs)
    else:
        fn = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}
        r = functools.reduce(fn[op], list(s))
    return r.to(dtype)


def tol(op, dtype):
    return checks.tol_for(dtype) if op == "AVG" else 0.0


# ------------------------------------------------------------------------ gloo's gaps
# What torch 2.x's gloo does not do (each entry found by running these cases on it);
# the cases skip it there, so that a gloo run checks the tests themselves.
GLOO_NO_DTYPES = (torch.int16,)  # "Invalid scalar type"
GLOO_NO_OPS = ("all_to_all",)  # equal sizes only; these cases send unequal ones
# (collective, mode) pairs it refuses: a 2-D output or input where it wants them flat,
# and reduce_scatter's Work, which has no future (nor is completed after wait()).
GLOO_NO_MODES = {("all_gather_into_tensor", "stack"): "a 2-D output tensor",
                 ("reduce_scatter_tensor", "2d"): "a 2-D input tensor",
                 ("reduce_scatter", "async"): "Work.get_future()",
                 ("reduce_scatter_tensor", "async"): "Work.get_future()"}
# torch hands complex tensors of these to the backend as they are (no view_as_real):
RAW_COMPLEX = ("gather",)


def gloo_gaps(ctx, coll, dtype=None, op=None, mode=None):
    """Skip (same decision on every rank) what torch 2.x's gloo does not support."""
    if ctx.backend != "gloo":
        return
    if coll in GLOO_NO_OPS:
        pytest.skip(f"gloo: no {coll} with unequal sizes")
    if (coll, mode) in GLOO_NO_MODES:
        pytest.skip(f"gloo: no {coll} with {GLOO_NO_MODES[coll, mode]}")
    if dtype in GLOO_NO_DTYPES:
        pytest.skip(f"gloo: no {dtype_name(dtype)} tensors")
    if dtype == torch.complex64 and coll in RAW_COMPLEX:
        pytest.skip(f"gloo: no complex64 tensors ({coll} passes them unconverted)")
    if op == "PREMUL_SUM":
        pytest.skip(f"gloo: no ReduceOp.{op}")
    if op == "SUM" and dtype == torch.bool and coll != "all_reduce_coalesced":
        # (its all_reduce_coalesced gives 0/1)
        pytest.skip("gloo: sums bool tensors as bytes (3 ranks give a bool holding 2)")
    if op == "AVG" and dtype is not None and not (dtype.is_floating_point
                                                  or dtype.is_complex):
        pytest.skip("gloo: no ReduceOp.AVG on integer or bool tensors")


def need_ranks(ctx, n):
    if ctx.world < n:
        pytest.skip(f"needs {n} ranks")


# --------------------------------------------------------------------- shared checks


def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _cat(ts):
    ts = [torch.view_as_real(t) if t.is_complex() else t for t in ts]
    return torch.cat([t.reshape(-1) for t in ts]) if ts else torch.empty(0)


def check_future(ctx, what, value, outputs):
    """The future's value holds the outputs (as a list, a nested list, or flattened)."""
    got = _tensors(value)
    if not got:
        ctx.fail(f"{what}: get_future().value() holds no tensor: {value!r}")
        return
    ctx.check(f"{what}: get_future().value()", _cat(got), _cat(_tensors(outputs)))


NONCONTIG = ("strided", "transposed")


def run(ctx, what, mode, call, outputs):
    """call(async_op) once, blocking or async; False if it refused non-contiguous
    tensors (the caller then checks nothing more). Async: the Work's wait() returns
    True, is_completed() is then True, and get_future().value() holds `outputs` (None:
    not checked, e.g. on a rank that receives nothing)."""
    if mode in NONCONTIG:
        return run_noncontig(ctx, what, lambda: call(False))
    if mode != "async":
        call(False)
        return True
    work = call(True)
    if not hasattr(work, "wait"):
        ctx.fail(f"{what}: async_op=True returned {work!r}, not a Work")
        return True
    ctx.expect(f"{what}: Work.wait() returns True", work.wait() is True)
    ctx.expect(f"{what}: Work.is_completed() after wait()", work.is_completed() is True)
    if outputs is not None:
        check_future(ctx, what, work.get_future().value(), outputs)
    return True


def run_noncontig(ctx, what, fn):
    """An op given a non-contiguous tensor either handles it correctly (the caller
    checks the values) or refuses it: RuntimeError saying "contiguous". Gloo does
    neither (torch 2.x's too): it reads such tensors as if they were contiguous."""
    if ctx.backend == "gloo":
        pytest.skip("gloo: reads non-contiguous tensors as if contiguous (wrong values)")
    try:
        fn()
        return True
    except RuntimeError as e:
        checks.check_message(ctx, f"{what}: refusing a non-contiguous tensor", str(e),
                             {"'contiguous'": "(?i)contiguous"})
        ctx.note(f"{what}: refused a non-contiguous tensor: {e}")
        return False


def still_works(ctx, group=None):
    """After an error the group must still run collectives correctly."""
    t = torch.full((3,), ctx.rank + 1, dtype=torch.int32)
    dist.all_reduce(t, group=group)
    n = ctx.world if group is None else dist.get_world_size(group)
    members = range(ctx.world) if group is None else dist.get_process_group_ranks(group)
    exp = torch.full((3,), sum(r + 1 for r in members), dtype=torch.int32)
    ctx.check(f"all_reduce after the error ({n} ranks)", t, exp)


def unsupported_patterns(ctx, op, dtype):
    """What the error must name; gloo's messages are not checked (any RuntimeError)."""
    if ctx.backend == "gloo":
        return {}
    return {f"the op {op}": checks.op_pattern(op),
            f"the dtype {dtype_name(dtype)}": checks.dtype_pattern(dtype)}


def expect_unsupported(ctx, what, fn, op, dtype):
    """fn() raises RuntimeError naming op and dtype."""
    checks.expect_error(ctx, what, fn, unsupported_patterns(ctx, op, dtype))


def strided(t):
    """A non-contiguous view holding t's values (every other element of a buffer)."""
    base = torch.zeros((t.numel(), 2), dtype=t.dtype)
    view = base[:, 1]
    view.copy_(t.reshape(-1))
    return view, base


def check_untouched(ctx, what, base):
    ctx.check(f"{what}: elements between the strided view's", base[:, 0],
              torch.zeros(base.shape[0], dtype=base.dtype))


# ----------------------------------------------------------------------- all_reduce


def all_reduce(ctx, op, dtype, count, mode):
    gloo_gaps(ctx, "all_reduce", dtype, op)
    sup = support(op, dtype)
    if sup == "error":
        return all_reduce_error(ctx, op, dtype)
    inputs = [values(kind_of(op), dtype, count, r) for r in range(ctx.world)]
    if mode == "transposed":  # (2, count) with strides (1, 2)
        inputs = [values(kind_of(op), dtype, 2 * count, r).reshape(2, count)
                  for r in range(ctx.world)]
    exp = reduce_ref(op, dtype, inputs)
    t, base = inputs[ctx.rank].clone(), None
    if mode == "strided":
        t, base = strided(t)
    elif mode == "transposed":
        t = torch.empty((count, 2), dtype=dtype).t()
        t.copy_(inputs[ctx.rank])
    what = f"all_reduce {op} {dtype_name(dtype)}"
    if not run_reduction(ctx, what, mode, op, dtype, [exp], lambda a: dist.all_reduce(
            t, make_op(op, dtype), async_op=a)):
        return
    ctx.check(what, t, exp, rtol=tol(op, dtype))
    if base is not None:
        check_untouched(ctx, what, base)


def run_reduction(ctx, what, mode, op, dtype, outputs, call):
    """run() for a supported or 'either' (op, dtype). An 'either' pair may raise a
    RuntimeError naming op and dtype (then the group must still work, and False is
    returned) or run (True: the caller checks the result)."""
    if support(op, dtype) != "either":
        return run(ctx, what, mode, call, outputs)
    try:
        return run(ctx, what, mode, call, outputs)
    except RuntimeError as e:
        checks.check_message(ctx, what, str(e), unsupported_patterns(ctx, op, dtype))
        ctx.note(f"{what} refused: {e}")
        still_works(ctx)
        return False


def all_reduce_error(ctx, op, dtype):
    what = f"all_reduce {op} on {dtype_name(dtype)}"
    t = values(kind_of(op), dtype, 7, ctx.rank)
    if dtype.is_complex:
        # torch refuses this itself, before the backend sees it (a ValueError since
        # torch 2.x); its message names "complex": only that is checked.
        checks.expect_error(ctx, what + " (torch's own check)",
                            lambda: dist.all_reduce(t, make_op(op, dtype)),
                            {"complex": "complex"}, TORCH_CHECK_ERRORS)
        opts = dist.AllreduceOptions()
        opts.reduceOp = make_op(op, dtype)
        pg = dist.distributed_c10d._get_default_group()
        expect_unsupported(ctx, what + " (ProcessGroup.allreduce)",
                           lambda: pg.allreduce([t], opts).wait(), op, dtype)
    else:
        expect_unsupported(ctx, what, lambda: dist.all_reduce(t, make_op(op, dtype)),
                           op, dtype)
    ctx.check(f"{what}: the refused call leaves its tensor", t,
              values(kind_of(op), dtype, 7, ctx.rank))
    still_works(ctx)


def all_reduce_wrap(ctx, dtype):
    """Integer sums wrap around (two's complement)."""
    gloo_gaps(ctx, "all_reduce", dtype)
    bits = torch.iinfo(dtype).bits
    big = 2 ** (bits - 1) - 3 if dtype != torch.uint8 else 2 ** bits - 3
    mine = [big, -big if dtype != torch.uint8 else 5, 1]
    t = torch.tensor(mine, dtype=dtype)
    dist.all_reduce(t)
    total = [ctx.world * v for v in mine]
    lo = 0 if dtype == torch.uint8 else -2 ** (bits - 1)
    wrapped = [(v - lo) % 2 ** bits + lo for v in total]
    ctx.check(f"all_reduce SUM {dtype_name(dtype)} wrapping", t,
              torch.tensor(wrapped, dtype=torch.int64).to(dtype))


def all_reduce_avg_trunc(ctx, dtype):
    """Integer AVG truncates toward zero: sums -(n+1) and n+1 average to -1 and 1."""
    gloo_gaps(ctx, "all_reduce", dtype, "AVG")
    first = ctx.rank == 0
    t = torch.tensor([-2 if first else -1, 2 if first else 1, 0], dtype=dtype)
    dist.all_reduce(t, R.AVG)
    n = ctx.world
    exp = torch.tensor([-1, 1, 0] if n > 1 else [-2, 2, 0], dtype=dtype)
    ctx.check(f"all_reduce AVG {dtype_name(dtype)} truncation", t, exp)


# -------------------------------------------------------------- other reducing ops


def reduce(ctx, op, dtype, count, root, mode):
    root = root % ctx.world
    gloo_gaps(ctx, "reduce", dtype, op)
    what = f"reduce {op} {dtype_name(dtype)} to {root}"
    if support(op, dtype) == "error":
        t = values(kind_of(op), dtype, 7, ctx.rank)
        expect_unsupported(ctx, what, lambda: dist.reduce(t, root, make_op(op, dtype)),
                           op, dtype)
        return still_works(ctx)
    inputs = [values(kind_of(op), dtype, count, r) for r in range(ctx.world)]
    exp = reduce_ref(op, dtype, inputs)
    t, base = inputs[ctx.rank].clone(), None
    if mode == "strided":
        t, base = strided(t)
    mine = ctx.rank == root
    if run_reduction(ctx, what, mode, op, dtype, [exp] if mine else None, lambda a:
                     dist.reduce(t, root, make_op(op, dtype), async_op=a)) and mine:
        ctx.check(what, t, exp, rtol=tol(op, dtype))
        if base is not None:
            check_untouched(ctx, what, base)


def all_reduce_coalesced(ctx, op, dtype, mode):
    gloo_gaps(ctx, "all_reduce_coalesced", dtype, op)
    what = f"all_reduce_coalesced {op} {dtype_name(dtype)}"
    counts = (7, 1, 1000)
    if support(op, dtype) == "error":
        ts = [values(kind_of(op), dtype, c, ctx.rank) for c in counts]
        pats = {"complex": "complex"} if dtype.is_complex else None
        if pats:  # refused by torch's own check, as for all_reduce
            checks.expect_error(ctx, what, lambda: dist.all_reduce_coalesced(
                ts, make_op(op, dtype)), pats, TORCH_CHECK_ERRORS)
        else:
            expect_unsupported(ctx, what, lambda: dist.all_reduce_coalesced(
                ts, make_op(op, dtype)), op, dtype)
        return still_works(ctx)
    inputs = [[values(kind_of(op), dtype, c, r, salt=k) for r in range(ctx.world)]
              for k, c in enumerate(counts)]
    exps = [reduce_ref(op, dtype, per) for per in inputs]
    ts = [per[ctx.rank].clone() for per in inputs]
    if not run_reduction(ctx, what, "sync", op, dtype, None,
                         lambda _: _coalesced(ctx, what, mode, op, dtype, ts, exps)):
        return
    for k, (t, e) in enumerate(zip(ts, exps)):
        ctx.check(f"{what} tensor {k}", t, e, rtol=tol(op, dtype))


def _coalesced(ctx, what, mode, op, dtype, ts, exps):
    if mode == "async":  # this one returns a Future, not a Work
        fut = dist.all_reduce_coalesced(ts, make_op(op, dtype), async_op=True)
        fut.wait()
        check_future(ctx, what, fut.value(), exps)
    else:
        dist.all_reduce_coalesced(ts, make_op(op, dtype))


def reduce_scatter(ctx, op, dtype, count, mode):
    gloo_gaps(ctx, "reduce_scatter", dtype, op, mode)
    n, me = ctx.world, ctx.rank
    what = f"reduce_scatter {op} {dtype_name(dtype)}"
    chunks = lambda r: [values(kind_of(op), dtype, count, r, salt=j)  # noqa: E731
                        for j in range(n)]
    if support(op, dtype) == "error":
        out = torch.empty(count, dtype=dtype)
        expect_unsupported(ctx, what, lambda: dist.reduce_scatter(
            out, chunks(me), make_op(op, dtype)), op, dtype)
        return still_works(ctx)
    exp = reduce_ref(op, dtype, [chunks(r)[me] for r in range(n)])
    out = torch.full((count,), 9, dtype=dtype)
    if not run_reduction(ctx, what, mode, op, dtype, [exp], lambda a: dist.reduce_scatter(
            out, chunks(me), make_op(op, dtype), async_op=a)):
        return
    ctx.check(what, out, exp, rtol=tol(op, dtype))


def reduce_scatter_tensor(ctx, op, dtype, count, mode):
    """mode: out-of-place 'flat' or '2d' input, 'inplace' (output is this rank's chunk
    of the input), 'async'."""
    gloo_gaps(ctx, "reduce_scatter_tensor", dtype, op, mode)
    n, me = ctx.world, ctx.rank
    what = f"reduce_scatter_tensor {op} {dtype_name(dtype)} {mode}"
    inp = lambda r: values(kind_of(op), dtype, n * count, r)  # noqa: E731
    if support(op, dtype) == "error":
        out = torch.empty(count, dtype=dtype)
        expect_unsupported(ctx, what, lambda: dist.reduce_scatter_tensor(
            out, inp(me), make_op(op, dtype)), op, dtype)
        return still_works(ctx)
    exp = reduce_ref(op, dtype, [inp(r)[me * count:(me + 1) * count] for r in range(n)])
    src = inp(me)
    if mode == "2d":
        src = src.reshape(n, count)
    out = src[me * count:(me + 1) * count] if mode == "inplace" else \
        torch.full((count,), 9, dtype=dtype)
    if not run_reduction(ctx, what, mode, op, dtype, [exp], lambda a:
                         dist.reduce_scatter_tensor(out, src, make_op(op, dtype),
                                                    async_op=a)):
        return
    ctx.check(what, out, exp, rtol=tol(op, dtype))


# ------------------------------------------------------------------- data movement


def broadcast(ctx, dtype, count, root, mode):
    root = root % ctx.world
    gloo_gaps(ctx, "broadcast", dtype)
    exp = values("range", dtype, count, root)
    t, base = values("range", dtype, count, ctx.rank), None
    if mode == "strided":
        t, base = strided(t)
    what = f"broadcast {dtype_name(dtype)} from {root}"
    if not run(ctx, what, mode, lambda a: dist.broadcast(t, root, async_op=a), [exp]):
        return
    ctx.check(what, t, exp)
    if base is not None:
        check_untouched(ctx, what, base)


def all_gather(ctx, dtype, count, mode):
    """mode: 'sync', 'async', 'inplace' (input is this rank's output tensor), 'strided'
    (non-contiguous input)."""
    gloo_gaps(ctx, "all_gather", dtype)
    exps = [values("range", dtype, count, r) for r in range(ctx.world)]
    outs = [torch.zeros(count, dtype=dtype) for _ in range(ctx.world)]
    t = exps[ctx.rank].clone()
    if mode == "inplace":
        outs[ctx.rank].copy_(t)
        t = outs[ctx.rank]
    elif mode == "strided":
        t, _ = strided(t)
    what = f"all_gather {dtype_name(dtype)} {mode}"
    if not run(ctx, what, mode, lambda a: dist.all_gather(outs, t, async_op=a), exps):
        return
    for r, (o, e) in enumerate(zip(outs, exps)):
        ctx.check(f"{what} from rank {r}", o, e)


def all_gather_into_tensor(ctx, dtype, count, mode):
    """mode: 'cat' (output n*count), 'stack' (output (n, count)), 'inplace' (input is
    this rank's slice of the output), 'async'."""
    gloo_gaps(ctx, "all_gather_into_tensor", dtype, mode=mode)
    n, me = ctx.world, ctx.rank
    exp = torch.cat([values("range", dtype, count, r) for r in range(n)])
    out = torch.zeros(n * count, dtype=dtype)
    t = values("range", dtype, count, me)
    if mode == "stack":
        out, exp = out.reshape(n, count), exp.reshape(n, count)
    elif mode == "inplace":
        t = out[me * count:(me + 1) * count]
        t.copy_(exp[me * count:(me + 1) * count])
    what = f"all_gather_into_tensor {dtype_name(dtype)} {mode}"
    run(ctx, what, mode, lambda a: dist.all_gather_into_tensor(out, t, async_op=a), [exp])
    ctx.check(what, out, exp)


def all_gather_coalesced(ctx, dtype, mode):
    gloo_gaps(ctx, "all_gather_coalesced", dtype)
    n, counts = ctx.world, (7, 1, 1000)
    mine = [values("range", dtype, c, ctx.rank, salt=k) for k, c in enumerate(counts)]
    outs = [[torch.zeros(c, dtype=dtype) for c in counts] for _ in range(n)]
    what = f"all_gather_coalesced {dtype_name(dtype)}"
    exps = [[values("range", dtype, c, r, salt=k) for k, c in enumerate(counts)]
            for r in range(n)]
    if mode == "async":  # this one returns a Future, not a Work
        fut = dist.all_gather_coalesced(outs, mine, async_op=True)
        fut.wait()
        check_future(ctx, what, fut.value(), exps)
    else:
        dist.all_gather_coalesced(outs, mine)
    for r in range(n):
        for k in range(len(counts)):
            ctx.check(f"{what} rank {r} tensor {k}", outs[r][k], exps[r][k])


def gather(ctx, dtype, count, root, mode):
    root = root % ctx.world
    gloo_gaps(ctx, "gather", dtype)
    n, me = ctx.world, ctx.rank
    exps = [values("range", dtype, count, r) for r in range(n)]
    outs = [torch.zeros(count, dtype=dtype) for _ in range(n)] if me == root else None
    t = exps[me].clone()
    if mode == "strided":
        t, _ = strided(t)
    what = f"gather {dtype_name(dtype)} to {root}"
    if not run(ctx, what, mode, lambda a: dist.gather(t, outs, root, async_op=a),
               exps if me == root else None):
        return
    for r in range(n) if me == root else []:
        ctx.check(f"{what} from rank {r}", outs[r], exps[r])


def scatter(ctx, dtype, count, root, mode):
    root = root % ctx.world
    gloo_gaps(ctx, "scatter", dtype)
    n, me = ctx.world, ctx.rank
    chunks = [values("range", dtype, count, r, salt=root) for r in range(n)]
    out, base = torch.zeros(count, dtype=dtype), None
    if mode == "strided":
        out, base = strided(out)
    what = f"scatter {dtype_name(dtype)} from {root}"
    if not run(ctx, what, mode, lambda a: dist.scatter(
            out, chunks if me == root else None, root, async_op=a), [chunks[me]]):
        return
    ctx.check(what, out, chunks[me])
    if base is not None:
        check_untouched(ctx, what, base)


def a2a_split(src, dst):
    """Elements rank src sends to rank dst in the uneven cases (0 to 3: some are empty)."""
    return (src + 2 * dst + 1) % 4


def a2a_chunk(dtype, src, dst, size, width=()):
    return values("range", dtype, size * (width[0] if width else 1), src,
                  salt=dst).reshape((size,) + width)


def all_to_all_single(ctx, dtype, count, mode):
    """mode: 'even' (no split sizes), 'uneven' (split sizes, some 0), 'rows' (uneven
    rows of a 2-D tensor), 'async', 'strided' (non-contiguous input)."""
    gloo_gaps(ctx, "all_to_all_single", dtype)
    n, me = ctx.world, ctx.rank
    even = mode in ("even", "async", "strided")
    split = (lambda s, d: count) if even else a2a_split
    width = (3,) if mode == "rows" else ()
    send = [a2a_chunk(dtype, me, d, split(me, d), width) for d in range(n)]
    exp = torch.cat([a2a_chunk(dtype, s, me, split(s, me), width) for s in range(n)])
    out = torch.zeros_like(exp)
    inp = torch.cat(send)
    if mode == "strided":
        inp, _ = strided(inp)
    sizes = {} if even else dict(input_split_sizes=[split(me, d) for d in range(n)],
                                 output_split_sizes=[split(s, me) for s in range(n)])
    what = f"all_to_all_single {dtype_name(dtype)} {mode}"
    if not run(ctx, what, mode, lambda a: dist.all_to_all_single(out, inp, async_op=a,
                                                                 **sizes), [exp]):
        return
    ctx.check(what, out, exp)


def all_to_all(ctx, dtype, mode):
    gloo_gaps(ctx, "all_to_all", dtype)
    n, me = ctx.world, ctx.rank
    size = lambda s, d: a2a_split(s, d) + 1  # noqa: E731
    send = [a2a_chunk(dtype, me, d, size(me, d)) for d in range(n)]
    exps = [a2a_chunk(dtype, s, me, size(s, me)) for s in range(n)]
    outs = [torch.zeros_like(e) for e in exps]
    what = f"all_to_all {dtype_name(dtype)}"
    run(ctx, what, mode, lambda a: dist.all_to_all(outs, send, async_op=a), exps)
    for s, (o, e) in enumerate(zip(outs, exps)):
        ctx.check(f"{what} from rank {s}", o, e)


# ---------------------------------------------------------------------- point to point


def _msg(dtype, count, src, dst, salt=0):
    return values("range", dtype, count, src, salt=dst * 3 + salt)


def send_recv(ctx, dtype, count, mode):
    """A ring: each rank sends to the next and receives from the previous.
    mode: 'blocking' (send/recv, even ranks send first), 'async' (isend/irecv), 'batch'
    (batch_isend_irecv, both directions when n > 2), 'strided' (non-contiguous)."""
    need_ranks(ctx, 2)
    gloo_gaps(ctx, "send_recv", dtype)
    n, me = ctx.world, ctx.rank
    nxt, prv = (me + 1) % n, (me - 1) % n
    out = torch.zeros(count, dtype=dtype)
    msg = _msg(dtype, count, me, nxt)
    what = f"{mode} send/recv {dtype_name(dtype)} from rank {prv}"
    if mode == "batch":
        return _batch(ctx, dtype, count, what)
    if mode == "async":
        works = [dist.isend(msg, nxt), dist.irecv(out, prv)]
        for w in works:
            ctx.expect(f"{what}: wait() returns True", w.wait() is True)
            ctx.expect(f"{what}: is_completed() after wait()", w.is_completed() is True)
    else:
        if mode == "strided":
            msg, _ = strided(msg)
            out, base = strided(out)
        order = (dist.send, dist.recv) if me % 2 == 0 else (dist.recv, dist.send)
        call = lambda a: [f(msg, nxt) if f is dist.send else f(out, prv)  # noqa: E731
                          for f in order]
        if not run(ctx, what, mode, call, None):
            return
    ctx.check(what, out, _msg(dtype, count, prv, me))
    if mode == "strided":
        check_untouched(ctx, what, base)


def _batch(ctx, dtype, count, what):
    n, me = ctx.world, ctx.rank
    nxt, prv = (me + 1) % n, (me - 1) % n
    out_p, out_n = torch.zeros(count, dtype=dtype), torch.zeros(count, dtype=dtype)
    ops = [dist.P2POp(dist.isend, _msg(dtype, count, me, nxt), nxt),
           dist.P2POp(dist.irecv, out_p, prv)]
    if n > 2:
        ops += [dist.P2POp(dist.irecv, out_n, nxt),
                dist.P2POp(dist.isend, _msg(dtype, count, me, prv, salt=1), prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    ctx.check(what, out_p, _msg(dtype, count, prv, me))
    if n > 2:
        ctx.check(f"{what} (reverse direction)", out_n, _msg(dtype, count, nxt, me, salt=1))


# -------------------------------------------------------------------------- barrier


def barrier(ctx, mode):
    """Rank 0 arrives 0.3 s late: nobody may leave the barrier before it arrived (one
    clock: the ranks share the machine)."""
    if ctx.rank == 0:
        time.sleep(0.3)
    arrived = time.time()
    run(ctx, "barrier", mode, lambda a: dist.barrier(async_op=a), None)
    left = time.time()
    t = torch.tensor([arrived], dtype=torch.float64)
    dist.broadcast(t, 0)
    ctx.expect("barrier: left only after rank 0 arrived", left >= t.item(),
               f"left {t.item() - left:.3f} s before rank 0 arrived")


# --------------------------------------------------------------------------- groups


def subgroup(ctx, ranks):
    """new_group(ranks): members run collectives on it (ranks given as global numbers);
    everybody else calls them too and they do nothing."""
    n, me = ctx.world, ctx.rank
    ranks = [r for r in ranks if r < n]
    g = dist.new_group(ranks, backend=ctx.backend, timeout=ctx.pg_timeout)
    member = me in ranks
    ctx.expect("get_rank(group)", dist.get_rank(g) == (ranks.index(me) if member else -1),
               f"{dist.get_rank(g)}")
    t = values("range", F32, 7, me)
    if member:
        ctx.expect("get_world_size(group)", dist.get_world_size(g) == len(ranks))
        dist.all_reduce(t, group=g)
        ctx.check(f"all_reduce on group {ranks}", t,
                  reduce_ref("SUM", F32, [values("range", F32, 7, r) for r in ranks]))
        b = values("range", I32, 5, me)
        dist.broadcast(b, ranks[-1], group=g)  # src is a global rank
        ctx.check(f"broadcast from {ranks[-1]} on group {ranks}", b,
                  values("range", I32, 5, ranks[-1]))
        outs = [torch.zeros(3, dtype=I32) for _ in ranks]
        dist.all_gather(outs, values("range", I32, 3, me), group=g)
        for o, r in zip(outs, ranks):
            ctx.check(f"all_gather on group {ranks} from {r}", o, values("range", I32, 3, r))
        dist.barrier(group=g)
    else:
        dist.all_reduce(t, group=g)  # not a member: nothing happens
        ctx.check("all_reduce by a non-member leaves the tensor", t,
                  values("range", F32, 7, me))
    if member:
        dist.destroy_process_group(g)


def concurrent_groups(ctx):
    """Async operations on several groups in flight at once, waited in reverse order."""
    n, me = ctx.world, ctx.rank
    new = lambda ranks: dist.new_group(ranks, backend=ctx.backend,  # noqa: E731
                                       timeout=ctx.pg_timeout)
    parity = [new([r for r in range(n) if r % 2 == p]) for p in range(min(n, 2))]
    mine = [r for r in range(n) if r % 2 == me % 2]
    world2 = new(list(range(n)))
    a, b, c = (values("range", F32, 1000, me, salt=s) for s in range(3))
    outs = [torch.zeros(7, dtype=I32) for _ in mine]
    works = [dist.all_reduce(a, group=parity[me % 2], async_op=True),
             dist.all_reduce(b, group=world2, async_op=True),
             dist.all_reduce(c, async_op=True),
             dist.all_gather(outs, values("range", I32, 7, me), group=parity[me % 2],
                             async_op=True)]
    for w in reversed(works):
        w.wait()
    ref = lambda s, rs: reduce_ref("SUM", F32, [values("range", F32, 1000, r, salt=s)  # noqa
                                                for r in rs])
    ctx.check(f"all_reduce on parity group {mine}", a, ref(0, mine))
    ctx.check("all_reduce on a second world group", b, ref(1, range(n)))
    ctx.check("all_reduce on the default group", c, ref(2, range(n)))
    for o, r in zip(outs, mine):
        ctx.check(f"all_gather on parity group from {r}", o, values("range", I32, 7, r))


def many_in_flight(ctx):
    """Eight async all_reduces on one group before the first wait, waited in reverse on
    even ranks and in order on odd ones: a wait may run its operation on the waiting
    thread (the one next in line), and every rank must still run them in call order."""
    ts = [values("range", F32, 1000 if k % 2 else 7, ctx.rank, salt=k) for k in range(8)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for w in (reversed(works) if ctx.rank % 2 == 0 else works):
        w.wait()
    for k, t in enumerate(ts):
        exp = reduce_ref("SUM", F32, [values("range", F32, t.numel(), r, salt=k)
                                      for r in range(ctx.world)])
        ctx.check(f"async all_reduce #{k}", t, exp)


def future_after_wait(ctx, iters=200):
    """Once wait() has returned, the future is done and holds the output: checked many
    times, with the ranks arriving in varying order (a race shows up here)."""
    rnd = random.Random(ctx.rank)
    bad, first = 0, None
    for i in range(iters):
        if rnd.random() < 0.5:
            time.sleep(rnd.random() * 0.002)
        t = torch.full((7,), float(ctx.rank + i))
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        fut = work.get_future()
        if not (work.is_completed() and fut.done()):
            bad += 1
            first = first or (f"iteration {i}: is_completed()={work.is_completed()}, "
                              f"get_future().done()={fut.done()}")
            fut.wait()
        exp = torch.full((7,), float(sum(r + i for r in range(ctx.world))))
        ctx.check(f"iteration {i}: get_future().value()", _cat(_tensors(fut.value())), exp)
    ctx.expect("after Work.wait(), is_completed() and get_future().done()", bad == 0,
               f"not so {bad} times of {iters}; first: {first}")


# ------------------------------------------------------------------------ case list

# Reductions run over every (op, dtype) by all_reduce; the other reducing operations
# take every op on float32 and int32, SUM and MAX on every dtype, and a few more.
REDUCE_SUBSET = sorted({(op, d) for op in OPS for d in (F32, I32)}
                       | {(op, d) for op in ("SUM", "MAX") for d in DTYPES}
                       | {("AVG", torch.int8), ("AVG", torch.bfloat16),
                          ("AVG", torch.complex64), ("PREMUL_SUM", torch.float16),
                          ("BXOR", torch.bool), ("BAND", torch.int64),
                          ("MIN", torch.complex64)},
                       key=lambda p: (OPS.index(p[0]), DTYPES.index(p[1])))


def _name(*parts):
    return "/".join(dtype_name(p) if isinstance(p, torch.dtype) else str(p) for p in parts)


def reduction_cases():
    out = []
    for op in OPS:
        for d in DTYPES:
            if support(op, d) == "error":
                out.append(Case(_name("all_reduce", op, d, "error"), all_reduce, op, d, 7,
                                "sync"))
                continue
            out += [Case(_name("all_reduce", op, d, f"c{c}", m), all_reduce, op, d, c, m)
                    for c, m in ((1, "sync"), (7, "async"), (1000, "sync"))]
    for d in DTYPES:
        for m in ("strided", "transposed"):
            out.append(Case(_name("all_reduce", "SUM", d, "c7", m), all_reduce, "SUM", d,
                            7, m))
    for d in (torch.int8, torch.uint8, torch.int16, I32, torch.int64):
        out.append(Case(_name("all_reduce", "SUM", d, "wrap"), all_reduce_wrap, d))
    for d in (torch.int8, I32, torch.int64):
        out.append(Case(_name("all_reduce", "AVG", d, "trunc"), all_reduce_avg_trunc, d))
    for op, d in REDUCE_SUBSET:
        out += [Case(_name("reduce", op, d, "root0"), reduce, op, d, 7, 0, "sync"),
                Case(_name("reduce", op, d, "rootlast"), reduce, op, d, 7, -1, "sync"),
                Case(_name("all_reduce_coalesced", op, d), all_reduce_coalesced, op, d,
                     "sync"),
                Case(_name("reduce_scatter", op, d), reduce_scatter, op, d, 7, "sync"),
                Case(_name("reduce_scatter_tensor", op, d), reduce_scatter_tensor, op, d,
                     7, "flat")]
    for d in (F32, torch.float16, torch.int64):
        out += [Case(_name("reduce", "SUM", d, "c1000", m), reduce, "SUM", d, 1000, -1, m)
                for m in ("async", "strided")]
        out += [Case(_name("all_reduce_coalesced", "SUM", d, "async"), all_reduce_coalesced,
                     "SUM", d, "async"),
                Case(_name("reduce_scatter", "SUM", d, "c1000", "async"), reduce_scatter,
                     "SUM", d, 1000, "async"),
                Case(_name("reduce_scatter", "SUM", d, "c1"), reduce_scatter, "SUM", d, 1,
                     "sync")]
        out += [Case(_name("reduce_scatter_tensor", "SUM", d, m), reduce_scatter_tensor,
                     "SUM", d, c, m) for c, m in ((1000, "2d"), (7, "inplace"),
                                                   (1000, "async"), (1, "flat"))]
    return out


def movement_cases():
    out = []
    for d in DTYPES:
        out += [Case(_name("broadcast", d, f"c{c}", f"root{r}", m), broadcast, d, c, r, m)
                for c, r, m in ((1, 0, "sync"), (7, -1, "async"), (1000, -1, "sync"),
                                (7, 0, "strided"))]
        out += [Case(_name("all_gather", d, f"c{c}", m), all_gather, d, c, m)
                for c, m in ((1, "sync"), (7, "async"), (1000, "inplace"), (7, "strided"))]
        out += [Case(_name("all_gather_into_tensor", d, f"c{c}", m), all_gather_into_tensor,
                     d, c, m) for c, m in ((1, "cat"), (7, "stack"), (1000, "inplace"),
                                           (7, "async"))]
        out += [Case(_name("all_gather_coalesced", d, m), all_gather_coalesced, d, m)
                for m in ("sync", "async")]
        out += [Case(_name("gather", d, f"c{c}", f"root{r}", m), gather, d, c, r, m)
                for c, r, m in ((1, 0, "sync"), (1000, -1, "async"), (7, -1, "strided"))]
        out += [Case(_name("scatter", d, f"c{c}", f"root{r}", m), scatter, d, c, r, m)
                for c, r, m in ((1, -1, "sync"), (1000, 0, "async"), (7, 0, "strided"))]
        out += [Case(_name("all_to_all_single", d, f"c{c}", m), all_to_all_single, d, c, m)
                for c, m in ((1, "even"), (1000, "async"), (7, "uneven"), (7, "rows"),
                             (7, "strided"))]
        out += [Case(_name("all_to_all", d, m), all_to_all, d, m) for m in ("sync", "async")]
        out += [Case(_name("send_recv", d, f"c{c}", m), send_recv, d, c, m)
                for c, m in ((1, "blocking"), (1000, "async"), (7, "batch"),
                             (7, "strided"))]
    return out


def group_cases(world):
    out = [Case("barrier/sync", barrier, "sync"), Case("barrier/async", barrier, "async")]
    specs = [[0], [world - 1], list(range(1, world - 1)), list(range(0, world, 2))]
    seen = []
    for ranks in specs:
        if ranks and ranks not in seen:
            seen.append(ranks)
            out.append(Case(_name("new_group", "-".join(map(str, ranks))), subgroup, ranks))
    out += [Case("new_group/concurrent_async", concurrent_groups),
            Case("async/many_in_flight", many_in_flight),
            Case("async/future_done_after_wait", future_after_wait)]
    return out


def cases(world):
    return reduction_cases() + movement_cases() + group_cases(world)


@harness.table(cases(harness.WORLD))
def test_op(ctx, case):
    case.run(ctx)

# Every way to create the default process group with the backend: init_method env://,
# tcp://127.0.0.1:port and file:///tmp/..., and a store passed in (dist.TCPStore,
# dist.FileStore); after each, collectives (and a new_group) must give the right values,
# get_backend/get_rank/get_world_size must answer, and destroy_process_group must leave
# torch.distributed uninitialized. Then destroy and init again, several times, in the
# same processes, mixing methods. For the backend's own options: pg_options as
# torch_collectives.Options or a dict work, and an unknown option, a value of the wrong
# kind or another backend's options raise RuntimeError naming them; set_timeout changes
# the group's timeout and refuses a negative one; completion hooks
# (_register_on_completion_hook) see each operation; an operation on a
# group that was destroyed raises RuntimeError naming the operation. handoff_us: an
# operation left for its waiter still starts at once when something says nobody will run
# it there (get_future, a wait with a limit or out of line, a call behind it).
#
# Run: .venv/bin/python -m pytest tests/torch/test_init.py --nranks N [--backend gloo] [-k EXPR]
import os
import time

import pytest
import torch
import torch.distributed as dist

import checks
import harness
from harness import Case

DEFAULT_PG = False  # the cases create (and destroy) it themselves


def _init_kwargs(ctx, method, slot):
    """init_process_group arguments for a method; `slot` picks a fresh port or file."""
    port = ctx.ports[slot]
    path = os.path.join(ctx.tmpdir, f"init_{method}_{slot}")
    if ctx.rank and method in ("env", "tcp", "tcpstore"):
        time.sleep(0.1)  # a TCPStore client that comes before rank 0's server retries 1 s later
    if method == "env":
        os.environ["MASTER_PORT"] = str(port)  # read by env:// at init time
        return dict(init_method="env://")
    if method == "tcp":
        return dict(init_method=f"tcp://127.0.0.1:{port}")
    if method == "file":
        return dict(init_method=f"file://{path}")
    if method == "tcpstore":
        return dict(store=dist.TCPStore("127.0.0.1", port, ctx.world, ctx.rank == 0,
                                        ctx.pg_timeout))
    if method == "filestore":
        return dict(store=dist.FileStore(path, ctx.world))
    raise ValueError(method)


def use_group(ctx, label):
    """What every freshly made default group must do correctly."""
    n, me = ctx.world, ctx.rank
    ctx.expect(f"{label}: is_initialized()", dist.is_initialized())
    ctx.expect(f"{label}: get_backend() == {ctx.backend!r}", dist.get_backend() == ctx.backend,
               f"got {dist.get_backend()!r}")
    ctx.expect(f"{label}: get_rank()", dist.get_rank() == me, f"got {dist.get_rank()}")
    ctx.expect(f"{label}: get_world_size()", dist.get_world_size() == n,
               f"got {dist.get_world_size()}")
    t = torch.arange(5, dtype=torch.float32) + me
    dist.all_reduce(t)
    ctx.check(f"{label}: all_reduce", t, torch.arange(5, dtype=torch.float32) * n
              + n * (n - 1) / 2)
    b = torch.full((3,), me, dtype=torch.int64)
    dist.broadcast(b, n - 1)
    ctx.check(f"{label}: broadcast from {n - 1}", b, torch.full((3,), n - 1, dtype=torch.int64))
    sub = list(range(0, n, 2))
    g = dist.new_group(sub, backend=ctx.backend, timeout=ctx.pg_timeout)
    s = torch.ones(4, dtype=torch.int32)
    dist.all_reduce(s, group=g)
    exp = torch.full((4,), len(sub) if me in sub else 1, dtype=torch.int32)
    ctx.check(f"{label}: all_reduce on new_group({sub})", s, exp)
    dist.barrier()


def init_use_destroy(ctx, method, slot):
    label = f"init {method}"
    dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world,
                            timeout=ctx.pg_timeout, **_init_kwargs(ctx, method, slot))
    use_group(ctx, label)
    dist.destroy_process_group()
    ctx.expect(f"{label}: not is_initialized() after destroy_process_group()",
               not dist.is_initialized())


def reinit_cycle(ctx, methods, first_slot):
    """destroy, then init again in the same processes: each round must work."""
    for k, method in enumerate(methods):
        init_use_destroy(ctx, method, first_slot + k)


METHODS = ["env", "tcp", "file", "tcpstore", "filestore"]


def options(ctx, slot):
    if ctx.backend != "collectives":
        pytest.skip("torch_collectives.Options are this backend's")
    import torch_collectives as tc

    checks.expect_error(ctx, "Options(colour=3)", lambda: tc.Options(colour=3),
                        {"the option": r"colour", "its value": r"=3", "the known ones": r"known: .*compress"})
    checks.expect_error(ctx, "Options(compress='fp8')", lambda: tc.Options(compress="fp8"),
                        {"the option": r"compress", "its value": r"'fp8'"})
    checks.expect_error(ctx, "Options(max_channels=0)", lambda: tc.Options(max_channels=0),
                        {"the option": r"max_channels", "its value": r"=0"})
    checks.expect_error(ctx, "pg_options of another kind", lambda: tc._options_of(["compress"]),
                        {"the argument": r"pg_options", "its type": r"list"})
    # A group with options (as a dict) works; its backend keeps them.
    dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world, timeout=ctx.pg_timeout,
                            pg_options={"deterministic": True, "max_channels": 2},
                            **_init_kwargs(ctx, "tcpstore", slot))
    use_group(ctx, "init with pg_options")
    be = tc.backend_of()
    ctx.expect("the backend keeps its options", be.options.deterministic == 1 and be.options.max_channels == 2,
               f"deterministic {be.options.deterministic}, max_channels {be.options.max_channels}")
    tc.set_timeout(None, 7.5)
    ctx.expect("set_timeout reaches the group's options", be.options.timeout_.total_seconds() == 7.5,
               f"timeout_ {be.options.timeout_}")
    checks.expect_error(ctx, "set_timeout(-1)", lambda: tc.set_timeout(None, -1),
                        {"the argument": r"seconds", "its value": r"-1"})
    use_group(ctx, "after set_timeout")
    pg, seen = dist.distributed_c10d._get_default_group(), []
    pg._register_on_completion_hook(lambda info: seen.append(info.op_type))
    pg._register_on_completion_hook(lambda info: seen.append("second"))
    dist.all_reduce(torch.ones(2))
    pg._wait_for_pending_works()
    ctx.expect("completion hooks see the all_reduce once each, in the order registered",
               seen == [torch._C._distributed_c10d.OpType.ALLREDUCE, "second"], f"seen {seen}")
    dist.destroy_process_group()
    if not hasattr(torch._C._distributed_c10d.ProcessGroup, "shutdown"):
        ctx.note("this torch does not shut a group's backends down at destroy (2.4)")
        return
    # The backend object outlives its group: an operation on it names itself and why.
    t = torch.ones(3)
    checks.expect_error(ctx, "allreduce on a destroyed group", lambda: be.allreduce([t]).wait(),
                        {"the operation": r"allreduce", "the cause": r"shut down"})


def _quick(ctx, what, fn, limit=5.0):
    """fn() returns well before the group's 10 s handoff would have let it (options/handoff)."""
    start = time.monotonic()
    fn()
    took = time.monotonic() - start
    ctx.expect(f"{what} returns at once", took < limit, f"took {took:.1f} s")


def handoff(ctx, slot):
    """handoff_us: how long a CPU operation is left for the thread that waits for it. At
    10 s, whatever says nobody is about to run it that way must hand it to the worker at
    once: get_future(), wait(timeout=...), a wait for an operation not next in line, a call
    behind it, waitForPendingWorks. At 0 the worker runs everything, unasked."""
    if ctx.backend != "collectives":
        pytest.skip("torch_collectives.Options are this backend's")
    import torch_collectives as tc
    from datetime import timedelta

    checks.expect_error(ctx, "Options(handoff_us=-1)", lambda: tc.Options(handoff_us=-1),
                        {"the option": r"handoff_us", "its value": r"=-1"})
    checks.expect_error(ctx, "Options(handoff_us=2**31)", lambda: tc.Options(handoff_us=2**31),
                        {"the option": r"handoff_us", "its value": r"=2147483648"})
    dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world, timeout=ctx.pg_timeout,
                            pg_options={"handoff_us": 10_000_000}, **_init_kwargs(ctx, "tcpstore", slot))
    be = tc.backend_of()
    ctx.expect("the group keeps handoff_us", be.options.handoff_us == 10_000_000, f"got {be.options.handoff_us}")
    n = ctx.world
    ts = [torch.full((3,), float(ctx.rank + k)) for k in range(6)]
    untouched = dist.all_reduce(torch.ones(1), async_op=True)
    time.sleep(0.3)
    ctx.expect("an async call nobody touches is left for its waiter", not untouched.is_completed())
    _quick(ctx, "its wait()", untouched.wait)
    exp = [torch.full((3,), float(n * (n - 1) / 2 + n * k)) for k in range(6)]
    _quick(ctx, "a synchronous all_reduce", lambda: dist.all_reduce(ts[0]))
    _quick(ctx, "get_future().wait()", lambda: dist.all_reduce(ts[1], async_op=True).get_future().wait())
    _quick(ctx, "wait(timeout=...)", lambda: dist.all_reduce(ts[2], async_op=True).wait(timedelta(seconds=30)))
    works = [dist.all_reduce(t, async_op=True) for t in ts[3:5]]
    _quick(ctx, "waiting for the later of two async calls", works[1].wait)
    works = [dist.all_reduce(t, async_op=True) for t in (ts[5], torch.ones(1))]

    def first_completes():  # is_completed() does not hand the operation over
        while not works[0].is_completed():
            time.sleep(0.001)
    _quick(ctx, "an async call with another call behind it", first_completes)
    works[1].wait()
    pending = dist.all_reduce(torch.ones(1), async_op=True)
    _quick(ctx, "waitForPendingWorks", dist.distributed_c10d._get_default_group()._wait_for_pending_works)
    ctx.expect("waitForPendingWorks: the call is done", pending.is_completed())
    for k in range(6):
        ctx.check(f"all_reduce #{k}", ts[k], exp[k])
    dist.destroy_process_group()
    dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world, timeout=ctx.pg_timeout,
                            pg_options=tc.Options(handoff_us=0), **_init_kwargs(ctx, "filestore", slot))
    use_group(ctx, "init with handoff_us=0")
    works = [dist.all_reduce(t, async_op=True) for t in ts]

    def all_complete():  # nobody asks: the worker runs them
        while not all(w.is_completed() for w in works):
            time.sleep(0.001)
    _quick(ctx, "handoff_us=0: async calls nobody touches", all_complete)
    for w in reversed(works):
        w.wait()
    for k in range(6):
        ctx.check(f"handoff_us=0: async all_reduce #{k}", ts[k], exp[k] * n)
    dist.destroy_process_group()


def keyed_hooks(ctx, slot):
    """torch 2.15's hooks by id. The flight recorder torch attaches to every group sees an
    operation completed once it has (a completion hook), with its time where the group
    times its operations; without the hook every entry stays "scheduled". An abort hook
    runs when abort() is called; an id taken twice is refused by name."""
    if ctx.backend != "collectives":
        pytest.skip("gloo has neither completion nor abort hooks")
    c10d = torch._C._distributed_c10d
    if not hasattr(c10d, "_dump_fr_trace_json") or not hasattr(c10d.Backend, "supports_abort_hooks"):
        pytest.skip(f"torch {torch.__version__} has no hooks by id (2.15 on)")
    if os.environ.get("TORCH_FR_BUFFER_SIZE", "2000") in ("", "0"):
        pytest.skip("the flight recorder is off (TORCH_FR_BUFFER_SIZE=0)")
    import json

    import torch_collectives as tc

    dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world, timeout=ctx.pg_timeout,
                            pg_options={"handoff_us": 10_000_000}, **_init_kwargs(ctx, "tcpstore", slot))
    be = tc.backend_of()
    be.enable_collectives_timing()
    c10d._reset_fr_trace(backend="collectives")

    def entries():
        trace = json.loads(c10d._dump_fr_trace_json(backend="collectives"))
        return [(e["state"], e.get("duration_ms")) for e in trace.get("entries", [])]
    t = torch.ones(3)
    dist.all_reduce(t)
    left = dist.all_reduce(t, async_op=True)  # left for its waiter (handoff_us): not run yet
    got = entries()
    ctx.expect("the recorder holds the two calls", len(got) == 2, f"entries {got}")
    if len(got) == 2:
        ctx.expect("the synchronous call is completed, with its time",
                   got[0][0] == "completed" and got[0][1] is not None and got[0][1] >= 0, f"entries {got}")
        ctx.expect("the call nobody waited for yet is still scheduled", got[1][0] == "scheduled", f"entries {got}")
    left.wait()
    got = entries()
    ctx.expect("after its wait the second is completed too",
               len(got) == 2 and got[1][0] == "completed", f"entries {got}")
    ctx.check("the two all_reduces", t, torch.full((3,), float(ctx.world ** 2)))

    sub = dist.new_group(backend=ctx.backend)
    sb = sub._get_backend(torch.device("cpu"))
    ran = []
    ctx.expect("abort hooks are supported", sb.supports_abort_hooks)
    sb.register_abort_hook(11, lambda: ran.append("abort"))
    checks.expect_error(ctx, "an abort hook id taken twice", lambda: sb.register_abort_hook(11, lambda: None),
                        {"the call": r"registerAbortHook", "the id": r"hook id 11"})
    sb.abort()
    ctx.expect("abort() ran the abort hook once", ran == ["abort"], f"ran {ran}")
    sb.unregister_abort_hook(11)
    sb.unregister_abort_hook(11)  # gone already: no error
    dist.destroy_process_group()


def cases(world):
    out = [Case(f"init/{m}", init_use_destroy, m, slot) for slot, m in enumerate(METHODS)]
    out.append(Case("options/and_destroyed_group", options, 12))
    out.append(Case("options/handoff", handoff, 13))
    out.append(Case("hooks/by_id", keyed_hooks, 14))
    out.append(Case("reinit/same_method_3x", reinit_cycle, ["tcpstore"] * 3, 5))
    out.append(Case("reinit/mixed", reinit_cycle, ["filestore", "env", "tcp", "file"], 8))
    return out


@harness.table(cases(harness.WORLD))
def test_init(ctx, case):
    case.run(ctx)

# Faults (collectives only; gloo prints "skipped: gloo"). One launch per case, since each
# breaks its world:
#  kill_*: a rank SIGKILLs itself in the middle of a loop of all_reduce or of DDP
#    training; every survivor must raise (not hang) within 20 s of the death, and the
#    message should name the dead rank as "rank K" (what it says is printed as a NOTE).
#  destroy_pending: rank 0 destroys its group with an all_reduce and an irecv that no
#    other rank will ever match (pg timeout 60 s): destroy_process_group must return
#    within the backend's 5 s grace (+ slack), and the pending Work must then fail.
#  stall_*: the group's timeout set to 3 s once it exists (dist.set_timeout: a rank that
#    starts late on a loaded machine must not fail the rendezvous, which keeps the 60 s
#    of init); after a few all_reduces rank K stops calling while the others
#    call all_reduce: they must raise after ~3 s (not before, at most 7 s later) with a
#    message holding the op name ("allreduce"/"all_reduce"), "timed out", and
#    "never arrived" followed by K; on torch 2.15 and later the group's abort hook has
#    run by then, and torch's flight recorder has written its trace.
#  wait_limit: work.wait(timeout=1 s) on an all_reduce that rank 1 has not joined must
#    raise within 1 + 5 s although the group's timeout is 60 s; rank 1 then joins and the
#    all_reduce completes.
#  init/missing_rank: the last rank never calls new_group (timeout 3 s): the others' must
#    raise within 3 s (+ slack) naming it, though COLL_BOOTSTRAP_TIMEOUT_S is 60 s.
# A watchdog turns a survivor that neither raises nor returns into a failure.
#
# Run: .venv/bin/python -m pytest tests/torch/test_faults.py --nranks 3 [--backend gloo] [-k EXPR]
#      (--force runs them on gloo too, where they are expected to fail)
import datetime
import os
import re
import signal
import threading
import time

import pytest
import torch
import torch.distributed as dist

import harness
from harness import Case

ISOLATED = True     # one launch per case
DEFAULT_PG = False  # each case picks its own timeout
DETECT_S = 20       # a survivor must raise within this many seconds of the death
KILL_PG_TIMEOUT = 60  # larger than DETECT_S: the death must be noticed, not timed out
# The slack covers the job-wide report (~2 s here) and, on torch 2.15 and later, the
# flight recorder writing its trace in the abort hook before the error is raised (~1 s).
STALL_TIMEOUT, STALL_SLACK = 3, 7
WAIT_LIMIT = 1  # wait_limit's limit (s), far below the group's KILL_PG_TIMEOUT


def guard(ctx):
    if ctx.backend == "gloo" and not os.environ.get("TC_FORCE"):
        pytest.skip("skipped: gloo (fault expectations hold only for collectives)")


def init(ctx, seconds):
    dist.init_process_group(ctx.backend, init_method="env://", rank=ctx.rank,
                            world_size=ctx.world,
                            timeout=datetime.timedelta(seconds=seconds))


def set_group_timeout(seconds):
    """The default group's timeout from now on: torch's dist.set_timeout where it exists
    (2.15 on); before it, torch's _set_pg_timeout reaches Gloo and NCCL alone, and ours
    takes torch_collectives.set_timeout."""
    limit = datetime.timedelta(seconds=seconds)
    setter = getattr(dist, "set_timeout", None)
    if setter is not None:
        setter(limit)
    elif dist.get_backend() == "collectives":
        import torch_collectives
        torch_collectives.set_timeout(dist.group.WORLD, seconds)
    else:
        dist.distributed_c10d._set_pg_timeout(limit)


def watchdog(ctx, seconds, before_exit=lambda: None):
    """If this rank is still in the case after `seconds`, report it as hung and leave."""
    def fire():
        before_exit()
        ctx.report.write(ev="result", case=ctx.case, status="fail", secs=seconds,
                         msgs=ctx.msgs + [f"still blocked {seconds} s into the case: "
                                          "no error was raised (hung)"])
        ctx.report.write(ev="done")
        os._exit(0)
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def _death_file(ctx):
    return os.path.join(ctx.tmpdir, "death_time")


def die(ctx):
    with open(_death_file(ctx) + ".tmp", "w") as f:
        f.write(repr(time.time()))
    os.rename(_death_file(ctx) + ".tmp", _death_file(ctx))
    ctx.dying()
    os.kill(os.getpid(), signal.SIGKILL)


def _death_time(ctx):
    for _ in range(100):
        if os.path.exists(_death_file(ctx)):
            with open(_death_file(ctx)) as f:
                return float(f.read())
        time.sleep(0.05)
    return None


def expect_death_noticed(ctx, victim, body):
    """body() loops on collectives until it raises; check how and how soon."""
    timer = watchdog(ctx, DETECT_S + 10)
    try:
        body()
        ctx.fail(f"rank {victim} died, yet no exception came out of the collectives")
        return
    except Exception as e:  # noqa: BLE001  (any exception type is acceptable)
        err, when = e, time.time()
    finally:
        timer.cancel()
    died = _death_time(ctx)
    delay = when - died if died else float("nan")
    msg = f"{type(err).__name__}: {err}"
    ctx.note(f"raised {delay:.1f} s after rank {victim} died: {msg}")
    ctx.expect(f"raised within {DETECT_S} s of rank {victim}'s death", delay <= DETECT_S,
               f"took {delay:.1f} s")
    ctx.expect(f"the message names the dead rank as 'rank {victim}'",
               re.search(rf"(?i)\brank\s*{victim}\b", str(err)), repr(str(err)))


def kill_in_allreduce(ctx, victim):
    guard(ctx)
    victim %= ctx.world
    init(ctx, KILL_PG_TIMEOUT)
    t = torch.ones(1000)

    def loop():
        for i in range(1000000):
            if ctx.rank == victim and i == 5:
                die(ctx)
            dist.all_reduce(t)
    if ctx.rank == victim:
        loop()
    expect_death_noticed(ctx, victim, loop)


def kill_in_ddp(ctx, victim):
    guard(ctx)
    victim %= ctx.world
    init(ctx, KILL_PG_TIMEOUT)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 4)

    def train():
        for step in range(1000000):
            if ctx.rank == victim and step == 3:
                die(ctx)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    if ctx.rank == victim:
        train()
    expect_death_noticed(ctx, victim, train)


def stall_in_allreduce(ctx, victim):
    guard(ctx)
    victim %= ctx.world
    init(ctx, KILL_PG_TIMEOUT)
    set_group_timeout(STALL_TIMEOUT)
    t = torch.ones(1000)
    for _ in range(3):
        dist.all_reduce(t)
    done = os.path.join(ctx.tmpdir, f"stall_done_{ctx.rank}")
    mark_done = lambda: open(done, "w").close()  # noqa: E731
    if ctx.rank == victim:  # stop calling until the others are through
        _wait_files([os.path.join(ctx.tmpdir, f"stall_done_{r}") for r in range(ctx.world)
                     if r != victim], STALL_TIMEOUT + STALL_SLACK + 15)
        return
    timer = watchdog(ctx, STALL_TIMEOUT + STALL_SLACK + 10, mark_done)
    aborts = _count_abort_hooks()
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
        ctx.fail(f"all_reduce returned although rank {victim} never called it")
    except Exception as e:  # noqa: BLE001
        _check_stall_error(ctx, victim, e, time.monotonic() - t0)
        _check_abort_hooks(ctx, aborts)
    finally:
        timer.cancel()
        mark_done()


def _count_abort_hooks():
    """A list the group's abort hook appends to (torch 2.15 on; None before)."""
    be = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    if not getattr(be, "supports_abort_hooks", False):
        return None
    ran = []
    be.register_abort_hook(101, lambda: ran.append(time.monotonic()))
    return ran


def _check_abort_hooks(ctx, ran):
    """The failure ran the abort hooks before its error was raised, and torch's flight
    recorder (an abort hook of its own) wrote its trace then."""
    if ran is None:
        ctx.note("this torch has no abort hooks")
        return
    ctx.expect("the abort hook ran before the error was raised", len(ran) >= 1, f"ran {len(ran)} times")
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE")
    if prefix and os.environ.get("TORCH_FR_BUFFER_SIZE", "2000") not in ("", "0"):
        trace = f"{prefix}{ctx.rank}"
        ctx.expect("the flight recorder wrote its trace", os.path.exists(trace), f"no {trace}")


def _check_stall_error(ctx, victim, err, secs):
    msg = str(err)
    ctx.note(f"raised after {secs:.1f} s: {type(err).__name__}: {msg}")
    ctx.expect(f"raised after the {STALL_TIMEOUT} s timeout, not before",
               secs >= STALL_TIMEOUT - 0.5, f"after {secs:.1f} s")
    ctx.expect(f"raised within {STALL_TIMEOUT} + {STALL_SLACK} s",
               secs <= STALL_TIMEOUT + STALL_SLACK, f"after {secs:.1f} s")
    for what, rx in (("the op name (allreduce/all_reduce)", r"(?i)all_?reduce"),
                     ("'timed out'", r"(?i)timed out"),
                     (f"'never arrived' followed by {victim}",
                      rf"(?is)never arrived.*(?<![0-9]){victim}(?![0-9])")):
        ctx.expect(f"the message names {what}", re.search(rx, msg), repr(msg))


def destroy_pending(ctx, _):
    guard(ctx)
    init(ctx, KILL_PG_TIMEOUT)
    done = os.path.join(ctx.tmpdir, "destroy_done")
    if ctx.rank != 0:  # never calls; stays alive until rank 0 is through
        _wait_files([done], 40)
        return
    timer = watchdog(ctx, 30, lambda: open(done, "w").close())
    try:
        work = dist.all_reduce(torch.ones(10), async_op=True)
        recv = dist.irecv(torch.zeros(3), 1)
        t0 = time.monotonic()
        dist.destroy_process_group()
        secs = time.monotonic() - t0
        ctx.note(f"destroy_process_group took {secs:.1f} s")
        ctx.expect("destroy_process_group returned within 5 s + 5 s", secs < 10, f"{secs:.1f} s")
        for name, w in (("all_reduce", work), ("irecv", recv)):
            try:
                w.wait()
                ctx.fail(f"the pending {name} completed although no peer ever joined it")
            except Exception as e:  # noqa: BLE001
                ctx.note(f"pending {name}: {type(e).__name__}: {str(e)[:160]}")
    finally:
        timer.cancel()
        open(done, "w").close()


def missing_rank(ctx, missing):
    guard(ctx)
    # The library's own bound on the rendezvous, far above the group's timeout (CTest
    # sets 10 s); read at the first init of this process, which is a fresh one.
    os.environ["COLL_BOOTSTRAP_TIMEOUT_S"] = "60"
    init(ctx, KILL_PG_TIMEOUT)
    if ctx.rank != missing:
        start = time.monotonic()
        msg = ""
        try:
            dist.new_group(list(range(ctx.world)), backend=ctx.backend,
                           timeout=datetime.timedelta(seconds=STALL_TIMEOUT))
        except RuntimeError as e:
            msg = str(e)
        took = time.monotonic() - start
        ctx.note(f"new_group raised after {took:.1f} s: {msg[:300]}")
        ctx.expect(f"new_group without rank {missing} raises naming it",
                   re.search(rf"rank\(s\) {missing} of {ctx.world} never joined", msg) is not None, msg[:300])
        ctx.expect(f"within the group's {STALL_TIMEOUT} s (+ {STALL_SLACK} s)", took <= STALL_TIMEOUT + STALL_SLACK,
                   f"took {took:.1f} s")
    dist.barrier()
    dist.destroy_process_group()


def wait_limit(ctx, late):
    """A Work's wait with a limit is kept although the operation could run on the waiting
    thread: it runs on the worker, so the wait can end on time."""
    guard(ctx)
    late %= ctx.world
    init(ctx, KILL_PG_TIMEOUT)
    t = torch.ones(10)
    done = [os.path.join(ctx.tmpdir, f"limit_done_{r}") for r in range(ctx.world)]
    if ctx.rank == late:  # joins once the others' waits have ended
        _wait_files([d for r, d in enumerate(done) if r != late], 30)
        dist.all_reduce(t)
    else:
        timer = watchdog(ctx, 30, lambda: open(done[ctx.rank], "w").close())
        work = dist.all_reduce(t, async_op=True)
        t0 = time.monotonic()
        try:
            work.wait(timeout=datetime.timedelta(seconds=WAIT_LIMIT))
            ctx.fail(f"wait returned although rank {late} had not called all_reduce")
        except Exception as e:  # noqa: BLE001
            secs = time.monotonic() - t0
            ctx.note(f"wait raised after {secs:.1f} s: {type(e).__name__}: {e}")
            ctx.expect(f"wait raised within its {WAIT_LIMIT} s limit + {STALL_SLACK} s",
                       secs <= WAIT_LIMIT + STALL_SLACK, f"after {secs:.1f} s")
        open(done[ctx.rank], "w").close()
        work.wait()  # rank `late` joins now
        timer.cancel()
    ctx.expect("the all_reduce then completed with every rank's part",
               torch.equal(t, torch.full((10,), float(ctx.world))), repr(t[:3]))


def _wait_files(paths, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not all(os.path.exists(p) for p in paths):
        time.sleep(0.1)


def cases(world):
    return [Case("kill/allreduce_loop/rank1", kill_in_allreduce, 1),
            Case("kill/allreduce_loop/rank0", kill_in_allreduce, 0),
            Case("kill/ddp_training/last_rank", kill_in_ddp, -1),
            Case("stall/allreduce/rank1", stall_in_allreduce, 1),
            Case("destroy_pending/rank0", destroy_pending, 0),
            Case("wait_limit/rank1_late", wait_limit, 1),
            Case("init/missing_rank/last", missing_rank, world - 1)]


@harness.table(cases(harness.WORLD))
def test_fault(ctx, case):
    case.run(ctx)

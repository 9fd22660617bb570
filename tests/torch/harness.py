# Multi-process harness for the torch_collectives tests (a c10d backend).
#
# Launcher: starts --nranks worker processes on 127.0.0.1 (env:// rendezvous with
# MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE on a free port), enforces a hard wall-clock
# limit per launch (on expiry every rank's Python stack is dumped, all ranks are killed
# and the launch is reported as "hung"; once a rank has failed, the others get
# STRAGGLER_GRACE_S before that happens), then prints each rank's failures (case, rank,
# what differed) and exits non-zero if any case failed on any rank, a rank crashed, or
# the launch hung. A rank's progress is a JSON-lines report file, so a crash or a hang
# still says in which case (or phase) it happened.
#
# Worker: imports torch_collectives first when --backend collectives, loads the test
# module and runs MANY cases in the same process (importing torch is slow). The module
# provides `cases(ctx)` (a list of Case), may raise Skip while it is imported (this torch
# lacks what it tests: the launch is then reported skipped, exit status 77, as it is when
# every case skipped), and optionally:
#   DEFAULT_PG = False  -- the harness does not create the default process group
#   ISOLATED = True     -- one case per launch (cases that break the world: faults)
# After every case the ranks exchange their status through a TCPStore of their own
# (not the process group under test); if any rank saw an unexpected exception, all
# ranks rebuild the default group so that one broken case does not cascade.
# destroy_process_group() must return within the group timeout + 10 s (a C watchdog,
# faulthandler, dumps the stacks and ends the process otherwise).
#
# Usage: harness.py [--backend collectives|gloo] [--nranks N] [-k REGEX] MODULE
#        (each test_*.py also accepts these options when run directly).
import argparse
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


class Skip(Exception):
    """Raised by a case (identically on every rank) before its first collective."""


class Case:
    def __init__(self, name, fn, *args, **kwargs):
        self.name, self.fn, self.args, self.kwargs = name, fn, args, kwargs

    def run(self, ctx):
        return self.fn(ctx, *self.args, **self.kwargs)


class Ctx:
    """What a case gets: its rank, the world, and where to record failures.

    Checks never raise: a rank that stopped half-way through a case would leave its
    peers blocked in the case's next collective. Failures are collected instead."""

    def __init__(self, rank, world, backend, pg_timeout, ports, tmpdir, report):
        self.rank, self.world, self.backend = rank, world, backend
        self.pg_timeout, self.ports, self.tmpdir = pg_timeout, ports, tmpdir
        self.report = report
        self.case = None
        self.msgs = []

    def fail(self, msg):
        self.msgs.append(msg)

    def check(self, what, got, expected, rtol=0.0, atol=0.0):
        import checks
        d = checks.diff(got, expected, rtol, atol)
        if d:
            self.fail(f"{what}: {d}")
        return d is None

    def expect(self, what, cond, detail=""):
        if not cond:
            self.fail(f"{what}{': ' + detail if detail else ''}")
        return bool(cond)

    def note(self, msg):
        """An informational line the launcher prints (e.g. an error message seen)."""
        self.report.write(ev="note", case=self.case, msg=msg)

    def dying(self):
        """Announce that this rank is about to kill itself on purpose."""
        self.report.write(ev="dying", case=self.case)


class Report:
    """One JSON object per line, flushed at once (survives SIGKILL)."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)

    def write(self, **kv):
        self.f.write(json.dumps(kv) + "\n")
        self.f.flush()


# ----------------------------------------------------------------------------- worker


def _load_module(path):
    name = "tc_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _init_default_pg(backend, rank, world, timeout, store=None):
    import torch.distributed as dist
    if store is None:
        dist.init_process_group(backend, init_method="env://", rank=rank,
                                world_size=world, timeout=timeout)
    else:
        dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                timeout=timeout)


def _run_case(ctx, case):
    ctx.case, ctx.msgs = case.name, []
    ctx.report.write(ev="start", case=case.name)
    t0 = time.monotonic()
    try:
        case.run(ctx)
        status = "fail" if ctx.msgs else "ok"
    except Skip as e:
        status, ctx.msgs = "skip", [str(e)]
    except Exception as e:  # an unexpected exception: the group may be out of step
        status = "error"
        ctx.msgs.append(f"unexpected {type(e).__name__}: {e}\n" + traceback.format_exc())
    ctx.report.write(ev="result", case=case.name, status=status, msgs=ctx.msgs,
                     secs=round(time.monotonic() - t0, 4))
    return status


def _sync_statuses(store, idx, rank, world, status):
    store.set(f"st/{idx}/{rank}", status)
    keys = [f"st/{idx}/{r}" for r in range(world)]
    store.wait(keys)
    return [store.get(k).decode() for k in keys]


def _select(cases, pattern):
    if not pattern:
        return cases
    rx = re.compile(pattern)
    return [c for c in cases if rx.search(c.name)]


def worker_main():
    env = os.environ
    rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
    backend = env["TC_BACKEND"]
    report = Report(env["TC_REPORT"])
    try:
        import faulthandler
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        if backend == "collectives":
            import torch_collectives  # noqa: F401  (registers the backend)
        import datetime
        mod = _load_module(env["TC_MODULE"])
    except Skip as e:  # the module cannot run here (the same on every rank)
        report.write(ev="unavailable", msg=str(e))
        report.write(ev="done")
        return 0
    except BaseException as e:
        report.write(ev="fatal", msg=f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        return 3
    timeout = datetime.timedelta(seconds=float(env["TC_PG_TIMEOUT"]))
    ports = [int(p) for p in env["TC_PORTS"].split(",")]
    ctx = Ctx(rank, world, backend, timeout, ports, env["TC_TMPDIR"], report)
    try:
        cases = _select(mod.cases(ctx), env.get("TC_FILTER"))
        if getattr(mod, "ISOLATED", False):
            _run_isolated(ctx, mod, cases, int(env["TC_CASE_INDEX"]))
        else:
            _run_all(ctx, mod, cases, timeout)
    except BaseException as e:  # outside any case: the harness itself cannot go on
        report.write(ev="fatal", msg=f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        _leave(3)
    if getattr(mod, "ISOLATED", False):
        _leave(0)  # no destructor may wait for the peers killed on purpose
    return 0  # a normal exit: destructors run (a hang there is reported)


def _leave(code):
    """Exit now: destructors of a broken group must not keep this process alive."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run_isolated(ctx, mod, cases, index):
    """One case, then leave at once: the world is broken on purpose."""
    if ctx.rank == 0:
        ctx.report.write(ev="plan", cases=[c.name for c in cases])
    if index < len(cases):
        if getattr(mod, "DEFAULT_PG", True):
            _init_default_pg(ctx.backend, ctx.rank, ctx.world, ctx.pg_timeout)
        _run_case(ctx, cases[index])
        ctx.report.write(ev="case_over")
        _wait_for_peers(ctx, ISOLATED_WAIT_S)
    ctx.report.write(ev="done")  # and leave without destroying anything (dead peers)


ISOLATED_WAIT_S = 30


def _wait_for_peers(ctx, limit):
    """Stay until every rank that did not kill itself is through the case: rank 0 hosts
    the env:// store, which a peer may still use to explain its error."""
    deadline = time.monotonic() + limit
    peers = set(range(ctx.world)) - {ctx.rank}
    while peers and time.monotonic() < deadline:
        for r in list(peers):
            events = {e["ev"] for e in _read_report(os.path.join(ctx.tmpdir, f"rank{r}.jsonl"))}
            if events & {"case_over", "done", "dying"}:
                peers.discard(r)
        time.sleep(0.05)


def _run_all(ctx, mod, cases, timeout):
    import datetime
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", int(os.environ["TC_SYNC_PORT"]), ctx.world,
                          ctx.rank == 0, timeout + datetime.timedelta(seconds=30))
    default_pg = getattr(mod, "DEFAULT_PG", True)
    # Time for an operation still queued to time out, and then some.
    destroy_limit = timeout.total_seconds() + 10
    if default_pg:
        _init_default_pg(ctx.backend, ctx.rank, ctx.world, timeout)
    for idx, case in enumerate(cases):
        status = _run_case(ctx, case)
        statuses = _sync_statuses(store, idx, ctx.rank, ctx.world, status)
        if default_pg and "error" in statuses:
            ctx.report.write(ev="regen", after=case.name)
            _destroy_within(ctx.report, destroy_limit, f"after case {case.name} failed")
            _init_default_pg(ctx.backend, ctx.rank, ctx.world, timeout,
                             dist.PrefixStore(f"regen{idx}", store))
    ctx.report.write(ev="teardown")
    if dist.is_initialized():
        _destroy_within(ctx.report, destroy_limit, "after the last case")
    _leave_together(store, ctx.rank, ctx.world)
    ctx.report.write(ev="done")



def _destroy_within(report, seconds, when):
    """dist.destroy_process_group(), which must return within `seconds`: if not, the
    process prints every thread's stack and exits (faulthandler's watchdog is a C
    thread: it works while a destructor holds the GIL)."""
    import faulthandler
    import torch.distributed as dist
    report.write(ev="destroying", when=when, limit=seconds)
    faulthandler.dump_traceback_later(seconds, exit=True)
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


def _leave_together(store, rank, world):
    """Rank 0 hosts the store: it leaves only once the others are done with it."""
    _sync_statuses(store, "end", rank, world, "end")
    if rank == 0:
        store.wait([f"left/{r}" for r in range(1, world)])
    else:
        store.set(f"left/{rank}", "1")


# --------------------------------------------------------------------------- launcher


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _read_report(path):
    events = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass  # a line cut short by a kill
    return events


def _tail(path, n=40):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _spawn(args, tmpdir, case_index):
    ports = free_ports(16)
    procs = []
    for rank in range(args.nranks):
        env = dict(os.environ)
        env.update(RANK=str(rank), WORLD_SIZE=str(args.nranks), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]),
                   TC_SYNC_PORT=str(ports[1]), TC_PORTS=",".join(map(str, ports[2:])),
                   TC_BACKEND=args.backend, TC_MODULE=args.module,
                   TC_FILTER=args.k or "", TC_PG_TIMEOUT=str(args.pg_timeout),
                   TC_TMPDIR=tmpdir, TC_CASE_INDEX=str(case_index),
                   TC_REPORT=os.path.join(tmpdir, f"rank{rank}.jsonl"))
        env.setdefault("OMP_NUM_THREADS", "1")  # 2-core CI machine, N ranks
        env.setdefault("PYTHONUNBUFFERED", "1")
        out = open(os.path.join(tmpdir, f"rank{rank}.log"), "w")
        code = f"import sys; sys.path.insert(0, {HERE!r}); import harness; " \
               "sys.exit(harness.worker_main())"
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env, stdout=out,
                                      stderr=subprocess.STDOUT, start_new_session=True))
    return procs


STRAGGLER_GRACE_S = 15
# The exit status when every case was skipped (CTest's SKIP_RETURN_CODE): not a pass.
SKIP_STATUS = 77


def _wait_all(procs, limit, tmpdir):
    """True once every rank has exited; False at the limit, or STRAGGLER_GRACE_S after
    a rank failed (exited non-zero without announcing its death), since its peers then
    wait for it in vain."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if all(p.poll() is not None for p in procs):
            return True
        failed = [r for r, p in enumerate(procs) if p.poll() not in (None, 0)
                  and not _announced_death(tmpdir, r)]
        if failed:
            deadline = min(deadline, time.monotonic() + STRAGGLER_GRACE_S)
        time.sleep(0.05)
    return False


def _announced_death(tmpdir, rank):
    return any(e["ev"] == "dying" for e in _read_report(os.path.join(tmpdir, f"rank{rank}.jsonl")))


def _kill_all(procs):
    """Dump the stacks of the ranks still running, kill them; returns their numbers."""
    alive = {r for r, p in enumerate(procs) if p.poll() is None}
    for r in alive:
        os.killpg(procs[r].pid, signal.SIGUSR1)  # faulthandler: every thread's stack
    time.sleep(1.0)
    for r in alive:
        if procs[r].poll() is None:
            os.killpg(procs[r].pid, signal.SIGKILL)
    for p in procs:
        p.wait()
    return alive


class Outcome:
    def __init__(self):
        self.failed, self.skipped, self.passed, self.problems = [], {}, 0, []
        self.notes = {}  # (case, message) -> ranks
        self.secs = {}  # case -> the longest any rank took

    @property
    def ok(self):
        return not self.failed and not self.problems


def _collect(args, tmpdir, procs, killed, secs, outcome, label):
    per_rank = [_read_report(os.path.join(tmpdir, f"rank{r}.jsonl"))
                for r in range(args.nranks)]
    results = {}  # case -> {rank: event}
    for rank, events in enumerate(per_rank):
        for ev in events:
            if ev["ev"] == "result":
                results.setdefault(ev["case"], {})[rank] = ev
                outcome.secs[ev["case"]] = max(outcome.secs.get(ev["case"], 0), ev["secs"])
            elif ev["ev"] == "note":
                outcome.notes.setdefault((ev["case"], ev["msg"]), []).append(rank)
            elif ev["ev"] == "fatal":
                outcome.problems.append(f"FATAL {label} rank {rank}: {ev['msg']}")
            elif ev["ev"] == "unavailable" and rank == 0:
                outcome.skipped.setdefault(ev["msg"], []).append("every case")
    for case, by_rank in results.items():
        statuses = {e["status"] for e in by_rank.values()}
        if statuses <= {"ok"}:
            outcome.passed += 1
        elif statuses == {"skip"}:
            reason = next(iter(by_rank.values()))["msgs"][0]
            outcome.skipped.setdefault(reason, []).append(case)
        elif "skip" in statuses:
            outcome.failed.append(f"FAIL {case}: ranks disagree on skipping it: "
                                  + str({r: e["status"] for r, e in by_rank.items()}))
        for rank, e in sorted(by_rank.items()):
            if e["status"] in ("fail", "error"):
                for m in e["msgs"]:
                    outcome.failed.append(f"FAIL {case} [rank {rank}]: {m}")
    for rank, (p, events) in enumerate(zip(procs, per_rank)):
        _rank_problem(tmpdir, rank, p, events, killed, secs, outcome, label)


def _rank_problem(tmpdir, rank, p, events, killed, secs, outcome, label):
    kinds = [e["ev"] for e in events]
    open_case = None
    for e in events:
        if e["ev"] == "start":
            open_case = e["case"]
        elif e["ev"] == "result":
            open_case = None
    phases = [e for e in events if e["ev"] not in ("fatal", "note")]
    where = f"in case {open_case}" if open_case else \
        _phase(phases[-1]) if phases else "before reporting anything"
    log = os.path.join(tmpdir, f"rank{rank}.log")
    if rank in killed:
        outcome.problems.append(f"HUNG {label} rank {rank}: still running after {secs:.0f} s "
                                f"(killed), {where}; its output and stacks:\n{_tail(log, 60)}")
    elif "dying" in kinds:
        if p.returncode != -signal.SIGKILL:
            outcome.problems.append(f"{label} rank {rank}: meant to die by SIGKILL, "
                                    f"exit status {p.returncode}")
    elif "fatal" in kinds:
        outcome.problems.append(f"CRASH {label} rank {rank}: exit status {p.returncode} "
                                f"{where} (its error is above)")
    elif p.returncode != 0 or "done" not in kinds:
        outcome.problems.append(f"CRASH {label} rank {rank}: exit status {p.returncode} "
                                f"{where}; last output:\n{_tail(log)}")


def _phase(ev):
    if ev["ev"] == "regen":
        return f"in init_process_group(), rebuilding the group after case {ev['after']} failed"
    if ev["ev"] == "destroying":
        return (f"in destroy_process_group() {ev['when']} (a watchdog ends the process if "
                f"it takes over {ev['limit']} s)")
    if ev["ev"] == "done":
        return "at exit, after its last case (destructors, threads)"
    return f"after event '{ev['ev']}'"


def _launch(args, case_index, outcome):
    label = f"[{os.path.basename(args.module)} backend={args.backend} n={args.nranks}" + \
            (f" case#{case_index}]" if args.isolated else "]")
    with tempfile.TemporaryDirectory(prefix="tc_") as tmpdir:
        t0 = time.monotonic()
        procs = _spawn(args, tmpdir, case_index)
        hung = not _wait_all(procs, args.timeout, tmpdir)
        killed = _kill_all(procs) if hung else set()
        secs = time.monotonic() - t0
        _collect(args, tmpdir, procs, killed, secs, outcome, label)
        plan = [e for e in _read_report(os.path.join(tmpdir, "rank0.jsonl"))
                if e["ev"] == "plan"]
        if args.verbose:
            for r in range(args.nranks):
                print(f"--- {label} rank {r} output:\n" + _tail(
                    os.path.join(tmpdir, f"rank{r}.log"), 200))
    print(f"{label} {'HUNG after' if hung else 'finished in'} {secs:.1f} s", flush=True)
    return plan[0]["cases"] if plan else []


def _is_isolated(path):
    # Read the flag without importing the module (which imports torch).
    with open(path) as f:
        return re.search(r"^ISOLATED\s*=\s*True", f.read(), re.M) is not None


def parse_args(argv, module=None):
    ap = argparse.ArgumentParser(description="Run a torch_collectives test module on N "
                                             "local ranks.")
    if module is None:
        ap.add_argument("module", help="test module (e.g. test_ops or test_ops.py)")
    ap.add_argument("--backend", default="collectives", choices=["collectives", "gloo"])
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("-k", metavar="REGEX", help="run only cases whose name matches")
    ap.add_argument("--timeout", type=float, default=150.0,
                    help="hard wall-clock limit per launch, seconds")
    ap.add_argument("--pg-timeout", type=float, default=30.0,
                    help="process-group timeout given to init_process_group, seconds")
    ap.add_argument("--force", action="store_true",
                    help="run cases that a module skips for this backend (fault tests)")
    ap.add_argument("--slowest", type=int, default=0, metavar="K",
                    help="print the K slowest cases")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every rank's output")
    args = ap.parse_args(argv)
    mod = module or args.module
    if not mod.endswith(".py"):
        mod += ".py"
    if not os.path.isabs(mod) and not os.path.exists(mod):
        mod = os.path.join(HERE, mod)
    args.module = os.path.abspath(mod)
    args.isolated = _is_isolated(args.module)
    return args


def _print_outcome(outcome, t0, slowest):
    for case, secs in sorted(outcome.secs.items(), key=lambda kv: -kv[1])[:slowest]:
        print(f"SLOW {secs:7.3f} s  {case}")
    for (case, msg), ranks in outcome.notes.items():
        print(f"NOTE {case} [rank{'s' if len(ranks) > 1 else ''} "
              f"{','.join(map(str, ranks))}]: {msg}")
    for reason, names in sorted(outcome.skipped.items()):
        print(f"SKIPPED {len(names)} case(s): {reason} (e.g. {names[0]})")
    for line in outcome.failed:
        print(line)
    for line in outcome.problems:
        print(line)
    nfail = len({f.split(" [rank")[0] for f in outcome.failed})
    print(f"{outcome.passed} passed, {nfail} failed, "
          f"{sum(map(len, outcome.skipped.values()))} skipped, {len(outcome.problems)} "
          f"crashed/hung rank reports; {time.monotonic() - t0:.1f} s total", flush=True)


def main(module=None, argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv, module)
    if args.force:
        os.environ["TC_FORCE"] = "1"
    t0 = time.monotonic()
    outcome = Outcome()
    if args.isolated:  # one launch per case; the first launch reports the plan
        plan = _launch(args, 0, outcome)
        for index in range(1, len(plan)):
            _launch(args, index, outcome)
    else:
        _launch(args, 0, outcome)
    _print_outcome(outcome, t0, args.slowest)
    if outcome.passed == 0 and not outcome.skipped and outcome.ok:
        print("no case was run (check -k)")
        return 1
    if outcome.passed == 0 and outcome.ok:  # nothing could run here: not a pass
        print("skipped: no case could run here (the reasons are above)")
        return SKIP_STATUS
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())

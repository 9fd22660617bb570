# The ranks of a torch_collectives test module, run by pytest.
#
# `pytest tests/torch/test_ops.py --nranks 2` does not run the cases in the process that
# pytest starts: that process is the launcher (conftest.py hands it to launch() here). It
# starts --nranks ranks on 127.0.0.1, each of them pytest again over the same module
# (env:// rendezvous with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE on a free port), so
# every rank collects the same cases in the same order and runs them together. The
# launcher enforces a hard wall-clock limit per launch (on expiry every rank's Python
# stack is dumped, all ranks are killed and the launch is reported as "hung"; once a rank
# has failed, the others get STRAGGLER_GRACE_S before that happens), then prints each
# rank's failures (case, rank, what differed) and exits non-zero if any case failed on any
# rank, a rank crashed, or the launch hung. A rank's progress is a JSON-lines report
# file, so a crash or a hang still says in which case (or phase) it happened.
#
# A module is a table of cases (Case: a name and a function taking a Ctx) handed to
# pytest by `@harness.table(cases(...))` on one test function. Checks go through the Ctx
# and never raise mid-case (a rank that stopped half-way would leave its peers blocked in
# the case's next collective); the case fails after it returns. A case or a module skips
# with pytest.skip (identically on every rank, before its first collective). Optional
# module flags:
#   DEFAULT_PG = False  -- the harness does not create the default process group
#   ISOLATED = True     -- one case per launch (cases that break the world: faults)
# After every case the ranks exchange their status through a TCPStore of their own
# (not the process group under test); if any rank saw an unexpected exception, all
# ranks rebuild the default group so that one broken case does not cascade.
# destroy_process_group() must return within the group timeout + 10 s (a C watchdog,
# faulthandler, dumps the stacks and ends the process otherwise).
import datetime
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from ports import free_ports

HERE = os.path.dirname(os.path.abspath(__file__))
# The world size of this rank (1 outside a launch, e.g. under --collect-only).
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


class Case:
    """One row of a module's table: a name (its pytest id) and the function to call."""

    def __init__(self, name, fn, *args, **kwargs):
        self.name, self.fn, self.args, self.kwargs = name, fn, args, kwargs

    def run(self, ctx):
        return self.fn(ctx, *self.args, **self.kwargs)


def table(cases):
    """Parametrizes a test function `(ctx, case)` over a table of cases."""
    return pytest.mark.parametrize("case", cases, ids=[c.name for c in cases])


class CheckFailed(AssertionError):
    """A case returned with failed checks (its Ctx holds what differed)."""


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


# ------------------------------------------------------------------------------- rank


class Rank:
    """This rank's side of a launch: its Ctx, the status store and the default group.
    conftest.py drives it from pytest's hooks."""

    def __init__(self, module_flags):
        env = os.environ
        self.isolated = module_flags.get("ISOLATED", False)
        self.default_pg = module_flags.get("DEFAULT_PG", True)
        self.timeout = datetime.timedelta(seconds=float(env["TC_PG_TIMEOUT"]))
        self.report = Report(env["TC_REPORT"])
        ports = [int(p) for p in env["TC_PORTS"].split(",")]
        self.ctx = Ctx(int(env["RANK"]), WORLD, env["TC_BACKEND"], self.timeout, ports,
                       env["TC_TMPDIR"], self.report)
        self.store, self.index, self.started = None, 0, False

    def begin_case(self, name):
        """Before a case's first collective: the world exists, the Ctx is fresh."""
        if not self.started:
            self.started = True
            if not self.isolated:
                import torch.distributed as dist
                self.store = dist.TCPStore("127.0.0.1", int(os.environ["TC_SYNC_PORT"]),
                                           WORLD, self.ctx.rank == 0,
                                           self.timeout + datetime.timedelta(seconds=30))
            if self.default_pg:
                _init_default_pg(self.ctx.backend, self.ctx.rank, WORLD, self.timeout)
        self.ctx.case, self.ctx.msgs = name, []
        return self.ctx

    def end_case(self, status):
        """After a case on every rank: rebuild the group if a rank saw an error; an
        isolated case leaves at once (its world is broken on purpose)."""
        if self.isolated:
            self.report.write(ev="case_over")
            _wait_for_peers(self.ctx, ISOLATED_WAIT_S)
            self.report.write(ev="done")
            _leave(0)  # no destructor may wait for the peers killed on purpose
        import torch.distributed as dist
        idx, self.index = self.index, self.index + 1
        statuses = _sync_statuses(self.store, idx, self.ctx.rank, WORLD, status)
        if self.default_pg and "error" in statuses:
            self.report.write(ev="regen", after=self.ctx.case)
            _destroy_within(self.report, self._destroy_limit(),
                            f"after case {self.ctx.case} failed")
            _init_default_pg(self.ctx.backend, self.ctx.rank, WORLD, self.timeout,
                             dist.PrefixStore(f"regen{idx}", self.store))

    def finish(self):
        """After the last case: destroy the group, leave together, report done."""
        if self.started:
            import torch.distributed as dist
            self.report.write(ev="teardown")
            if dist.is_initialized():
                _destroy_within(self.report, self._destroy_limit(), "after the last case")
            _leave_together(self.store, self.ctx.rank, WORLD)
        self.report.write(ev="done")

    def _destroy_limit(self):
        # Time for an operation still queued to time out, and then some.
        return self.timeout.total_seconds() + 10


def _init_default_pg(backend, rank, world, timeout, store=None):
    import torch.distributed as dist
    if store is None:
        dist.init_process_group(backend, init_method="env://", rank=rank,
                                world_size=world, timeout=timeout)
    else:
        dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                timeout=timeout)


def _sync_statuses(store, idx, rank, world, status):
    store.set(f"st/{idx}/{rank}", status)
    keys = [f"st/{idx}/{r}" for r in range(world)]
    store.wait(keys)
    return [store.get(k).decode() for k in keys]


def _leave(code):
    """Exit now: destructors of a broken group must not keep this process alive."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
    ports = free_ports(17)
    procs = []
    for rank in range(args.nranks):
        env = dict(os.environ)
        env.update(RANK=str(rank), WORLD_SIZE=str(args.nranks), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]),
                   TC_SYNC_PORT=str(ports[1]), TC_PORTS=",".join(map(str, ports[2:])),
                   TC_BACKEND=args.backend, TC_PG_TIMEOUT=str(args.pg_timeout),
                   TC_TMPDIR=tmpdir, TC_CASE_INDEX=str(case_index),
                   TC_REPORT=os.path.join(tmpdir, f"rank{rank}.jsonl"))
        env.setdefault("OMP_NUM_THREADS", "1")  # 2-core CI machine, N ranks
        # A failed operation runs the backend's abort hooks, where torch's flight recorder
        # writes its trace: into the launch's folder, not ~/.cache/torch.
        env["TORCH_FR_DUMP_TEMP_FILE"] = os.path.join(tmpdir, "fr_trace_rank_")
        env.setdefault("PYTHONUNBUFFERED", "1")
        out = open(os.path.join(tmpdir, f"rank{rank}.log"), "w")
        cmd = [sys.executable, "-m", "pytest", args.module, "-p", "no:cacheprovider",
               "--color=no", "-q", "-rfE", "--tb=short", "--capture=no",
               "-p", "no:logging", "-p", "no:warnings"] + (["-k", args.k] if args.k else [])
        procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    return procs


STRAGGLER_GRACE_S = 15
# pytest's exit status of a rank that ran to the end: all passed, some failed (each
# failure is in its report), nothing selected.
RANK_EXIT_OK = (0, 1, 5)
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
    elif p.returncode not in RANK_EXIT_OK or "done" not in kinds:
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


class Launch:
    """What one launch of one module needs from the pytest command line."""

    def __init__(self, config, module):
        opt = config.option
        self.module, self.isolated = module, _is_isolated(module)
        self.nranks, self.backend = opt.nranks, opt.backend
        self.timeout, self.pg_timeout = opt.launch_timeout, opt.pg_timeout
        self.k, self.verbose = opt.keyword, opt.rank_output


def ranked_modules(paths):
    """The modules with a table of cases among pytest's arguments (files, or folders of
    test_*.py)."""
    out = []
    for p in paths:
        p = os.path.abspath(p.split("::")[0])
        files = [p] if not os.path.isdir(p) else sorted(
            os.path.join(p, f) for f in os.listdir(p)
            if f.startswith("test_") and f.endswith(".py"))
        out += [f for f in files if _ranked(f)]
    return out


def _ranked(path):
    with open(path) as f:
        return re.search(r"^@harness\.table\(", f.read(), re.M) is not None


def launch(config):
    """The launcher's whole run: every module named, on --nranks ranks; the exit status."""
    if config.option.force:
        os.environ["TC_FORCE"] = "1"
    t0 = time.monotonic()
    outcome = Outcome()
    for module in ranked_modules(config.args):
        args = Launch(config, module)
        plan = _launch(args, 0, outcome)  # an isolated module: the first launch's plan
        for index in range(1, len(plan) if args.isolated else 0):
            _launch(args, index, outcome)
    _print_outcome(outcome, t0, config.option.slowest)
    if outcome.passed == 0 and not outcome.skipped and outcome.ok:
        print("no case was run (check -k)")
        return 1
    if outcome.passed == 0 and outcome.ok:  # nothing could run here: not a pass
        print("skipped: no case could run here (the reasons are above)")
        return SKIP_STATUS
    return 0 if outcome.ok else 1

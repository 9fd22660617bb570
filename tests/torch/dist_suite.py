#!/usr/bin/env python3
"""PyTorch's own distributed test suite run against a c10d backend.

PyTorch ships its distributed tests as a library class,
torch.testing._internal.distributed.distributed_test.DistributedTest._DistTestBase
(about 285 tests: collectives, groups, p2p, objects, DDP, join, profiling, ...).
This runner runs that class with BACKEND set to "collectives" (ours) or "gloo", at a
world size of 2 or 4, and records every test's outcome.

    dist_suite.py run --backend collectives|gloo [--world 2|4] [--tests-file F]
                      [-k REGEX]... [--exclude REGEX]... [--json OUT.json] [--log F]
    dist_suite.py compare --out DIFF.md [--worlds 2 4] [filters as for run]
    dist_suite.py ci                      # ours on the tests Gloo passes; exit 1 if one fails
    dist_suite.py passlist [--runs 2]     # regenerates suite_gloo_passes_w2.txt with Gloo
    dist_suite.py list --backend B [--world N]   # test names, and skips decided at import
Every mode also takes --timeout S (per test, default 180), --start fork|spawn,
--env NAME=VALUE (for the ranks), --pythonpath DIR (where torch_collectives is,
default <repo>/build/python), --gpus auto|hide|use, --no-profiling, --open-gloo-gates.

How a test runs: as in PyTorch's own runner, one process per rank runs the test body
after init_process_group(BACKEND, file://...) and the suite's file barrier; a parent
process joins them and maps their exit codes to passed / failed / skipped (the reason
of a skip raised inside the ranks is kept; a rank other than 0 that exits non-zero
after rank 0 passed fails the test, where PyTorch looks at rank 0 only). -k selects
tests whose name matches any of the regular expressions; --tests-file takes one name
per line ('#' starts a comment).

Start methods: fork (default) forks the ranks from the process that imported torch and
the suite once: a test costs its own time (0.3-1 s for most on 2 cores). spawn starts
fresh interpreters for every rank of every test, as PyTorch's test_distributed_spawn.py
does: each imports torch and the suite again, 10-17 s per test on 2 cores. With fork,
forked ranks skip the interpreter's shutdown (a hang or crash there is seen only with
spawn), and the parent must not have initialized CUDA or started threads: it checks
the thread count and uses PYTORCH_NVML_BASED_CUDA_CHECK=1 so that asking whether CUDA
is available does not initialize it.

Time limits: each test has --timeout seconds; on expiry its ranks' Python stacks are
dumped to the log, they are killed and the test fails with the reason "timeout". The
process that runs the tests is itself watched: if it does not report within the limit
plus 60 s, or dies, it is killed with all its ranks and restarted after the test it
was in, which is recorded as failed.

Environment of the ranks: loopback only (MASTER_ADDR=127.0.0.1, NCCL_SOCKET_IFNAME=lo,
GLOO_SOCKET_IFNAME=lo), OMP_NUM_THREADS=1, and TMPDIR, TEMP_DIR and INIT_METHOD
(file://) inside a directory of the run that is removed at the end. For "collectives"
every rank imports torch_collectives before the test body. With --gpus auto, GPUs are
hidden when fewer than the world size are visible (the suite would skip every test).

Our backend is described to the suite as Gloo-like: before the suite is imported, it is
added to every set of DistTestCases.backend_feature and .skip_collective that holds
"gloo", and to backend_feature["plugin"]. Tests the suite gates on a backend by name
(BACKEND == "gloo", "Only Nccl supports ...") still skip for us; they are counted
separately ("skipped by a backend-name gate").
Our ranks get COLL_TORCH_ANY_SOURCE=1 (receives from any source are a backend option),
and we are added to the suite's profiling allow-lists, so the collective tests require
"collectives:<op>" profiler events with the inputs' shapes as they do of Gloo;
  --no-profiling     leaves us out of those lists.
  --open-gloo-gates  exploratory: the suite's decorators see BACKEND=gloo, the tests run
                     with ours; bodies that branch on the name (if BACKEND == "gloo") then
                     fail for reasons of the suite, not of the backend.

Results (--json): {"backend", "world_size", "start_method", "torch", "seconds", "counts",
"skip_kinds", "tests": {name: {"outcome": passed|failed|skipped, "reason": first line,
"skip_kind", "seconds", "detail"}}}. The ranks' output goes to the log (--log, by
default next to the JSON file; without either it is dropped).

compare: Gloo then ours at each world size; writes DIFF.md (a table per world size of
the tests whose outcome differs: test, gloo, collectives, reason; the tests we skip by a
backend-name gate in a table of their own) and the JSON and log of each run beside it.

ci: runs ours at world 2 on tests/torch/suite_gloo_passes_w2.txt (the tests Gloo passed
in two runs in a row) and exits 1 if one of them does not pass, except those listed in
tests/torch/suite_known_differences.txt ("test_name  reason" per line; not run unless
--run-known) and those we skip by a backend-name gate (counted, not failed).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OURS = "collectives"
BACKENDS = (OURS, "gloo")
PASSES_FILE = os.path.join(HERE, "suite_gloo_passes_w2.txt")
KNOWN_FILE = os.path.join(HERE, "suite_known_differences.txt")
DEFAULT_TIMEOUT = 180
# After the per-test limit, how long the test-running process may take to report the
# timeout itself (it collects the ranks' stacks first) before it is killed.
WATCHDOG_GRACE_S = 60
BACKEND_NAMES = ("gloo", "nccl", "mpi", "ucc", "xccl", "hccl")


# ----------------------------------------------------------------------------- the suite
# Everything in this section runs in the process that runs the tests and in every rank.


class SuiteTimeout(Exception):
    """A test's ranks did not all finish within the per-test limit."""


def _describe_as_gloo_like(cases, name):
    """Adds `name` wherever DistTestCases lists Gloo as capable, and as a plugin backend.

    Must run before the suite is imported: its decorators test membership then."""
    cases.backend_feature["plugin"].add(name)
    for table in (cases.backend_feature, cases.skip_collective):
        for members in table.values():
            if "gloo" in members:
                members.add(name)


def _expect_profiling_events(name, dt):
    """Makes the suite require "<name>:<op>" profiler events, as it does of Gloo.

    On unless --no-profiling: the collective tests check the events of every call before
    they check its values, so a backend without them would fail every such test."""
    for allow_list in (dt.PROFILING_SUPPORTED_BACKENDS, dt.CUDA_PROFILING_SUPPORTED_BACKENDS,
                       dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
        if "gloo" in allow_list and name not in allow_list:
            allow_list.append(name)


def _setup_suite():
    """Imports the suite for the backend in $BACKEND; returns {start method: test class}.

    The suite reads BACKEND and WORLD_SIZE when it is imported (its skip decorators
    are evaluated then), so the capability tables are completed before that import."""
    backend = os.environ["BACKEND"]
    if backend == OURS:
        import torch_collectives  # noqa: F401  (registers the backend "collectives")
    import unittest

    import torch
    from torch.testing._internal import common_distributed as cd

    if backend == OURS:
        _describe_as_gloo_like(cd.DistTestCases, backend)
    open_gates = backend == OURS and os.environ.get("DIST_SUITE_OPEN_GLOO_GATES") == "1"
    if open_gates:  # the suite's decorators see "gloo"; the tests then run with ours
        os.environ["BACKEND"] = "gloo"
    try:
        from torch.testing._internal.distributed import distributed_test as dt
    finally:
        os.environ["BACKEND"] = backend
    dt.BACKEND = backend

    if backend == OURS and os.environ.get("DIST_SUITE_PROFILING") == "1":
        _expect_profiling_events(backend, dt)

    skip_reason_file = "skip_reason"

    class SuiteMixin:
        """What both start methods share: time limit, skip reasons, rank exit codes."""

        limit_s = DEFAULT_TIMEOUT

        def setUp(self):
            super().setUp()  # temp dirs, the suite's file barrier, a fresh $INIT_METHOD
            # The suite read INIT_METHOD at import; a spawned rank re-imports it and sees
            # this test's file, a forked rank inherits the module: give it the same file.
            dt.INIT_METHOD = os.environ["INIT_METHOD"]
            self.start_ranks()

        def tearDown(self):
            super().tearDown()
            # The rendezvous file is removed by the last FileStore; not after a failure.
            if getattr(self, "file_name", None) and os.path.exists(self.file_name):
                os.unlink(self.file_name)

        # -- in each rank
        def run_test(self, test_name, parent_pipe):
            body = getattr(self, test_name)

            def body_recording_skip_reason():
                try:
                    return body()
                except unittest.SkipTest as e:  # the rank exits with the generic code
                    path = os.path.join(os.environ["TEMP_DIR"], skip_reason_file)
                    with open(path, "w") as f:
                        f.write(str(e))
                    raise

            setattr(self, test_name, body_recording_skip_reason)
            super().run_test(test_name, parent_pipe)

        # -- in the parent, once the ranks are done, errored or out of time
        def _check_return_codes(self, fn, elapsed_time):
            codes = [p.exitcode for p in self.processes]
            errored = any(c == self.TEST_ERROR_EXIT_CODE for c in codes)
            still_running = [r for r, c in enumerate(codes) if c is None]
            for p in self.processes:  # reap every rank: none survives its test
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join(5)
            if still_running and not errored:
                others = ", ".join(f"rank {r} exited with {c}" for r, c in enumerate(codes)
                                   if c is not None)
                raise SuiteTimeout(
                    f"ranks {still_running} still running after {elapsed_time:.0f} s"
                    + (f" ({others})" if others else ""))
            if self.processes and self.processes[0].exitcode == cd.TEST_SKIPS["generic"].exit_code:
                path = os.path.join(os.environ["TEMP_DIR"], skip_reason_file)
                if os.path.exists(path):
                    with open(path) as f:
                        raise unittest.SkipTest(f.read().strip() or "skipped in the ranks")
            super()._check_return_codes(fn, elapsed_time)
            # PyTorch looks at rank 0 only; a rank that crashed after its test is a failure.
            if fn not in self.skip_return_code_checks and codes and codes[0] == 0:
                for r, p in enumerate(self.processes):
                    if p.exitcode != 0:
                        raise AssertionError(f"rank {r} exited with code {p.exitcode} "
                                             f"while rank 0 passed")

    class TestDistBackendWithFork(SuiteMixin, dt.TestDistBackend,
                                  dt.DistributedTest._DistTestBase):
        def start_ranks(self):
            self._start_processes(torch.multiprocessing.get_context("fork").Process)

    class TestDistBackendWithSpawn(SuiteMixin, dt.TestDistBackend,
                                   dt.DistributedTest._DistTestBase):
        def start_ranks(self):
            self._spawn_processes()

    # Spawned ranks find their class by name in this module.
    for cls in (TestDistBackendWithFork, TestDistBackendWithSpawn):
        cls.__module__ = __name__
        cls.__qualname__ = cls.__name__
        globals()[cls.__name__] = cls

    def join_limit(test_id):
        return SuiteMixin.limit_s

    cd.get_timeout = join_limit  # the parent's join loop reads it per test
    return {"fork": TestDistBackendWithFork, "spawn": TestDistBackendWithSpawn}, SuiteMixin


if __name__ == "__mp_main__":  # a rank started with spawn re-imports this file
    _setup_suite()


def _test_names(cls):
    import unittest
    return list(unittest.TestLoader().getTestCaseNames(cls))


def _static_skip(cls, name):
    """The skip reason the suite decided at import for this backend, or None."""
    fn = getattr(cls, name)
    if getattr(fn, "__unittest_skip__", False):
        return getattr(fn, "__unittest_skip_why__", "") or "skipped"
    return None


def skip_kind(reason):
    """Why a test was skipped, in a few classes (for the summary)."""
    # "Test requires backend gloo to be one of {'nccl'}" names the backend under test too.
    r = re.sub(r"requires backend \S+ to be", "requires backend to be", (reason or "").lower())
    if "gloo" in r:
        return "backend-name:gloo"
    if any(re.search(rf"\b{b}\b", r) for b in BACKEND_NAMES[1:]):
        return "backend-name:other"
    if any(w in r for w in ("accelerator", "cuda", "gpu", "device")):
        return "gpu"
    if "world size" in r or "worldsize" in r or "ranks" in r:
        return "world-size"
    return "other"


def _exception_lines(text):
    """The first exception of the first failing rank (or of the parent): its lines."""
    m = re.search(r"Process \d+ exited with error code \d+ and exception:\n", text)
    if m:
        text = text[m.end():]
        nxt = re.search(r"\nProcess \d+ exited with error code", text)
        if nxt:
            text = text[:nxt.start()]
    lines = text.splitlines()
    start = None
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            start = i + 1
            break
    if start is None:
        return [ln for ln in lines if ln.strip()][:1]
    i = start
    while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
        i += 1
    out = []
    for line in lines[i:]:
        if line.startswith(("Traceback (most recent", "During handling of the above",
                            "The above exception was")):
            break
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def failure_reason(text):
    lines = _exception_lines(text)
    for i, line in enumerate(lines):  # the repro hint common_utils appends
        if line.startswith("To execute this test, run the following"):
            lines = lines[:i]
            break
    if not lines:
        return "failed (no message)", ""
    first = lines[0].strip()
    rest = [ln.strip() for ln in lines[1:] if ln.strip()]
    reason = first
    # assertEqual's first line says only "... are not equal!": add what differed (and
    # the test's own message, which comes last).
    if rest and (first.endswith("!") or first.endswith(":")):
        stats = ("Absolute difference", "Relative difference", "Greatest absolute",
                 "Greatest relative", "Mismatch at index", "The failure occurred")
        said = [ln for ln in rest if ln.startswith(("Expected", "Mismatched elements"))]
        if not rest[-1].startswith(stats) and rest[-1] not in said:
            said.append(rest[-1])
        reason = " ".join([first] + (said or rest[-1:]))
    return reason[:300], "\n".join(lines[:25])


def _run_one(cls, name):
    import unittest
    result = unittest.TestResult()
    t0 = time.monotonic()
    try:
        test = cls(name)
    except (ValueError, AttributeError):
        return {"outcome": "missing", "reason": "no such test in this torch version"}
    test.run(result)
    out = {"seconds": round(time.monotonic() - t0, 2)}
    if result.skipped:
        reason = str(result.skipped[0][1]).strip()
        out.update(outcome="skipped", reason=reason.splitlines()[0] if reason else "",
                   skip_kind=skip_kind(reason))
    elif result.errors or result.failures:
        text = (result.errors + result.failures)[0][1]
        if "SuiteTimeout: " in text:
            detail = text.split("SuiteTimeout: ", 1)[1].strip().splitlines()[0]
            out.update(outcome="failed", reason="timeout", detail=detail)
        else:
            reason, detail = failure_reason(text)
            out.update(outcome="failed", reason=reason, detail=detail)
    elif result.unexpectedSuccesses:
        out.update(outcome="failed", reason="unexpected success of an expected failure")
    else:
        out.update(outcome="passed", reason="")
    return out


def _select(names, tests_file=None, patterns=(), excludes=()):
    if tests_file:
        wanted = read_list(tests_file)
        known = set(names)
        names = [n for n in wanted if n in known] + [n for n in wanted if n not in known]
    if patterns:
        rx = [re.compile(p) for p in patterns]
        names = [n for n in names if any(r.search(n) for r in rx)]
    if excludes:
        rx = [re.compile(p) for p in excludes]
        names = [n for n in names if not any(r.search(n) for r in rx)]
    return names


def worker_main(args):
    """Runs tests one after another; each event is one JSON line in --events."""
    events = open(args.events, "a", buffering=1)

    def emit(**kv):
        events.write(json.dumps(kv) + "\n")
        events.flush()

    classes, mixin = _setup_suite()
    cls = classes[args.start]
    mixin.limit_s = args.timeout
    names = _test_names(cls)
    if args.names_file:
        plan = read_list(args.names_file)
    else:
        plan = _select(names, args.tests_file, args.k or (), args.exclude or ())
    import torch
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    warning = None
    if args.start == "fork" and threads > 1:
        # fork copies only the calling thread: state owned by the others is lost.
        warning = (f"the test process runs {threads} threads before forking the ranks; "
                   "compare with --start spawn if tests fail oddly")
    emit(plan=plan, torch=torch.__version__, warning=warning)
    cls.setUpClass()
    try:
        for name in plan:
            emit(start=name)
            emit(result=name, **_run_one(cls, name))
    finally:
        cls.tearDownClass()
    emit(done=True)
    return 0


def list_main(args):
    os.environ.update(BACKEND=args.backend, WORLD_SIZE=str(args.world),
                      TEMP_DIR=tempfile.gettempdir(), OMP_NUM_THREADS="1",
                      INIT_METHOD="file://" + os.path.join(tempfile.gettempdir(), "unused"))
    if args.backend == OURS:
        sys.path.insert(0, args.pythonpath or os.path.join(ROOT, "build", "python"))
    classes, _ = _setup_suite()
    cls = classes["fork"]
    for name in _test_names(cls):
        why = _static_skip(cls, name)
        print(name if why is None else f"{name}\tskipped: {why}")
    return 0


# ----------------------------------------------------------------------------- the driver


def read_list(path):
    """Test names, one per line; '#' starts a comment; the first word of a line counts."""
    names = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line.split()[0])
    return names


def read_known(path):
    """{test: reason} from 'test_name  reason' lines; a name without a reason is an error."""
    known, bad = {}, []
    if not os.path.exists(path):
        return known
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.strip().split(None, 1)
            if len(parts) < 2:
                bad.append(f"{path}:{n}: {parts[0]} has no reason")
            else:
                known[parts[0]] = parts[1]
    if bad:
        raise SystemExit("\n".join(bad))
    return known


def _gpu_count():
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([d for d in vis.split(",") if d.strip() and not d.strip().startswith("-")])
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return len([ln for ln in out.stdout.splitlines() if ln.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 0


def _worker_env(opts, backend, world, rundir):
    env = dict(os.environ)
    tmp = os.path.join(rundir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    env.update(
        BACKEND=backend, WORLD_SIZE=str(world), TEMP_DIR=tmp, TMPDIR=tmp,
        MASTER_ADDR="127.0.0.1", NCCL_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo",
        TP_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
        PYTORCH_NVML_BASED_CUDA_CHECK="1")
    # As PyTorch's file-init runs: tests gated on a file:// INIT_METHOD run (each test
    # then gets its own init file).
    env["INIT_METHOD"] = "file://" + os.path.join(tmp, "init_file")
    if backend == OURS:
        # recv without a source needs the backend's any_source option (Gloo has no such
        # switch: its sends always announce themselves; ours then count in the store).
        env["COLL_TORCH_ANY_SOURCE"] = "1"
    for kv in opts.env or ():
        key, _, value = kv.partition("=")
        env[key] = value
    for flag, var in ((opts.profiling, "DIST_SUITE_PROFILING"),
                      (opts.open_gloo_gates, "DIST_SUITE_OPEN_GLOO_GATES")):
        if flag and backend == OURS:
            env[var] = "1"
        else:
            env.pop(var, None)
    if backend == OURS:
        path = opts.pythonpath or os.path.join(ROOT, "build", "python")
        env["PYTHONPATH"] = os.pathsep.join([path] + ([env["PYTHONPATH"]]
                                                      if env.get("PYTHONPATH") else []))
    # The suite skips every test when fewer GPUs than ranks are visible.
    if opts.gpus == "hide" or (opts.gpus == "auto" and 0 < _gpu_count() < world):
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class _Events:
    def __init__(self, path):
        self.path, self.pos, self.buf = path, 0, ""

    def read(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            f.seek(self.pos)
            data = f.read()
            self.pos = f.tell()
        self.buf += data
        *lines, self.buf = self.buf.split("\n")
        return [json.loads(ln) for ln in lines if ln.strip()]


def _kill_group(proc):
    """Kills the test process and every rank it started (they are in its POSIX process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _fmt_line(i, n, name, r):
    extra = r.get("reason") or ""
    return (f"[{i:>3}/{n}] {r['outcome']:<8} {r.get('seconds', 0):6.1f}s  {name}"
            + (f"  -- {extra}" if extra and r["outcome"] != "passed" else ""))


def run_config(opts, backend, world, names=None, json_path=None, log_path=None,
               label=None):
    """Runs the selected tests for one backend and world size; returns the results.

    names: exact test names; otherwise the filters in opts select them."""
    rundir = tempfile.mkdtemp(prefix=f"dist_suite_{backend}_w{world}_")
    keep_log = log_path is not None
    log_path = log_path or os.path.join(rundir, "ranks.log")
    label = label or f"{backend} world {world}"
    t_start = time.monotonic()
    state = {"plan": None, "torch": None, "results": {}}
    try:
        env = _worker_env(opts, backend, world, rundir)
        events_path = os.path.join(rundir, "events.jsonl")
        names_path = os.path.join(rundir, "names.txt")
        base = [sys.executable, os.path.abspath(__file__), "_worker", "--start", opts.start,
                "--timeout", str(opts.timeout), "--events", events_path]
        cmd = list(base)
        if names is not None:
            with open(names_path, "w") as f:
                f.write("\n".join(names) + "\n")
            cmd += ["--names-file", names_path]
        else:
            if opts.tests_file:
                cmd += ["--tests-file", opts.tests_file]
            for p in opts.k or ():
                cmd += ["-k", p]
            for p in opts.exclude or ():
                cmd += ["--exclude", p]
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        print(f"== {label} (start {opts.start}, limit {opts.timeout} s per test"
              + (f", log {log_path})" if keep_log else ")"), flush=True)
        events = _Events(events_path)
        fruitless = 0
        with open(log_path, "a") as log:
            log.write(f"==== {label}: "
                      f"{datetime.datetime.now().isoformat(timespec='seconds')}\n")
            log.flush()
            while True:
                rc, progressed = _run_worker(cmd, env, rundir, log, events, state, opts.timeout)
                if state["plan"] is None:
                    log.flush()
                    raise RuntimeError(f"{label}: the test process failed before listing "
                                       f"its tests (exit {rc}); its output:\n"
                                       + _tail(log_path))
                remaining = [n for n in state["plan"] if n not in state["results"]]
                if not remaining:
                    break
                fruitless = 0 if progressed else fruitless + 1
                if fruitless >= 2:
                    for n in remaining:
                        state["results"][n] = {"outcome": "failed", "reason": "not run: the "
                                               f"test process keeps failing (exit {rc})"}
                    break
                with open(names_path, "w") as f:  # go on after the test it was in
                    f.write("\n".join(remaining) + "\n")
                cmd = base + ["--names-file", names_path]
        seconds = round(time.monotonic() - t_start, 1)
        doc = _summarize(backend, world, opts.start, state["torch"], seconds, state["plan"],
                         state["results"])
        if json_path:
            os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
            with open(json_path, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
        _print_summary(doc, label, log_path if keep_log else None)
        return doc
    finally:
        shutil.rmtree(rundir, ignore_errors=True)


def _run_worker(cmd, env, rundir, log, events, state, limit):
    """Starts the test process and follows its events until it ends or is killed.

    Returns (exit code, whether a test result was recorded)."""
    results = state["results"]
    current, since, progressed = None, None, False

    def record(name, result):
        nonlocal current, progressed
        results[name] = result
        current, progressed = None, True
        print(_fmt_line(len(results), len(state["plan"]), name, result), flush=True)

    def take(evs):
        nonlocal current, since
        for ev in evs:
            if "plan" in ev:
                if state["plan"] is None:  # a restarted process lists what is left
                    state["plan"], state["torch"] = ev["plan"], ev.get("torch")
                if ev.get("warning") and not results:
                    print(f"   warning: {ev['warning']}", flush=True)
            elif "start" in ev:
                current, since = ev["start"], time.monotonic()
            elif "result" in ev:
                record(ev.pop("result"), ev)

    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, cwd=rundir)
    try:
        while True:
            take(events.read())
            rc = proc.poll()
            if rc is not None:
                _kill_group(proc)  # ranks it left behind, if it died
                take(events.read())  # what it wrote just before it ended
                if current is not None:
                    record(current, {"outcome": "failed",
                                     "seconds": round(time.monotonic() - since, 2),
                                     "reason": f"the test process exited with code {rc} "
                                               "during the test"})
                return rc, progressed
            if current is not None and time.monotonic() - since > limit + WATCHDOG_GRACE_S:
                _kill_group(proc)
                record(current, {"outcome": "failed", "reason": "timeout",
                                 "seconds": round(time.monotonic() - since, 2),
                                 "detail": "the test process did not report the timeout "
                                           "itself and was killed"})
                return proc.returncode, progressed
            time.sleep(0.2)
    finally:
        if proc.poll() is None:  # interrupted: leave no rank behind
            _kill_group(proc)


def _tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def _summarize(backend, world, start, torch_version, seconds, plan, results):
    tests = {n: results[n] for n in plan if n in results}
    counts = {"passed": 0, "failed": 0, "skipped": 0, "missing": 0}
    kinds = {}
    for r in tests.values():
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        if r["outcome"] == "skipped":
            kinds[r.get("skip_kind", "other")] = kinds.get(r.get("skip_kind", "other"), 0) + 1
    return {"backend": backend, "world_size": world, "start_method": start,
            "torch": torch_version, "seconds": seconds, "counts": counts,
            "skip_kinds": dict(sorted(kinds.items())), "tests": tests}


def _print_summary(doc, label, log_path):
    c = doc["counts"]
    print(f"== {label}: {len(doc['tests'])} tests in {doc['seconds']} s: "
          f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"
          + (f", {c['missing']} missing" if c.get("missing") else ""))
    if doc["skip_kinds"]:
        print("   skipped by kind: " + ", ".join(f"{k} {v}" for k, v in doc["skip_kinds"].items()))
        named = sum(v for k, v in doc["skip_kinds"].items() if k.startswith("backend-name"))
        if named:
            print(f"   skipped by a backend-name gate in the suite: {named}")
    failed = [(n, r) for n, r in doc["tests"].items() if r["outcome"] in ("failed", "missing")]
    for n, r in failed:
        print(f"   FAILED {n}: {r.get('reason', '')}")
    slow = sorted(doc["tests"].items(), key=lambda kv: -kv[1].get("seconds", 0))[:5]
    if slow and slow[0][1].get("seconds"):
        print("   slowest: " + ", ".join(f"{n} {r.get('seconds', 0)}s" for n, r in slow))
    if log_path:
        print(f"   log: {log_path}")
    sys.stdout.flush()


def _log_path(opts):
    """--log, else the --json path with .log, else none (the log is dropped)."""
    if opts.log:
        return opts.log
    return os.path.splitext(opts.json)[0] + ".log" if opts.json else None


def run_main(opts):
    doc = run_config(opts, opts.backend, opts.world, json_path=opts.json,
                     log_path=_log_path(opts))
    return 0 if doc["counts"]["failed"] == 0 and not doc["counts"].get("missing") else 1


def _md(s):
    return (s or "").replace("|", "\\|").replace("\n", " ")


def _cell(r):
    if r is None:
        return "not run"
    return r["outcome"]


def compare_main(opts):
    out = os.path.abspath(opts.out)
    stem = os.path.splitext(out)[0]
    docs = {}
    for world in opts.worlds:
        for backend in ("gloo", OURS):
            docs[(backend, world)] = run_config(
                opts, backend, world, json_path=f"{stem}.{backend}.w{world}.json",
                log_path=f"{stem}.{backend}.w{world}.log")
    lines = [f"# PyTorch distributed suite: Gloo against {OURS}", ""]
    first = docs[("gloo", opts.worlds[0])]
    lines.append(f"torch {first['torch']}, ranks started with {opts.start}, "
                 f"{opts.timeout} s limit per test.")
    lines.append("")
    lines.append("| world | backend | tests | passed | failed | skipped | "
                 "skipped by backend name | seconds |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for (backend, world), d in docs.items():
        c = d["counts"]
        named = sum(v for k, v in d["skip_kinds"].items() if k.startswith("backend-name"))
        lines.append(f"| {world} | {backend} | {len(d['tests'])} | {c['passed']} | "
                     f"{c['failed']} | {c['skipped']} | {named} | {d['seconds']} |")
    total_diff = 0
    for world in opts.worlds:
        g, o = docs[("gloo", world)]["tests"], docs[(OURS, world)]["tests"]
        names = list(dict.fromkeys(list(g) + list(o)))
        differ, gated = [], []
        for n in names:
            rg, ro = g.get(n), o.get(n)
            if _cell(rg) == _cell(ro):
                continue
            reason = (ro or {}).get("reason") if _cell(ro) != "passed" else (rg or {}).get("reason")
            row = f"| {n} | {_cell(rg)} | {_cell(ro)} | {_md(reason)} |"
            if ro and ro["outcome"] == "skipped" and ro.get("skip_kind", "").startswith(
                    "backend-name"):
                gated.append(row)
            else:
                differ.append(row)
        total_diff += len(differ) + len(gated)
        lines += ["", f"## World size {world}: outcome differs ({len(differ)})", ""]
        lines += ["| test | gloo | collectives | reason |", "|---|---|---|---|"] + (
            differ or ["| (none) | | | |"])
        lines += ["", f"## World size {world}: skipped for {OURS} by a backend-name gate "
                      f"in the suite ({len(gated)})", ""]
        lines += ["| test | gloo | collectives | reason |", "|---|---|---|---|"] + (
            gated or ["| (none) | | | |"])
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"== {total_diff} differences written to {out}")
    return 0


def ci_main(opts):
    t0 = time.monotonic()
    names = read_list(opts.passes)
    known = read_known(opts.known)
    run = [n for n in names if opts.run_known or n not in known]
    doc = run_config(opts, OURS, opts.world, names=run, json_path=opts.json,
                     log_path=_log_path(opts), label=f"{OURS} world {opts.world} on {os.path.basename(opts.passes)}")
    bad, gated, fixed = [], [], []
    for n in run:
        r = doc["tests"].get(n, {"outcome": "failed", "reason": "no result"})
        if r["outcome"] == "passed":
            if n in known:
                fixed.append(n)
            continue
        if r["outcome"] == "missing":
            print(f"   warning: {n} is not in this torch version's suite")
            continue
        if r["outcome"] == "skipped" and r.get("skip_kind", "").startswith("backend-name"):
            gated.append(n)
            continue
        if n in known:
            continue
        bad.append((n, r))
    print(f"== ci: {len(names)} tests Gloo passes; {len(run)} run, "
          f"{len(known)} known differences{' (run too)' if opts.run_known else ' (not run)'}, "
          f"{len(gated)} skipped by a backend-name gate; {len(bad)} not passing; "
          f"{time.monotonic() - t0:.0f} s")
    for n in fixed:
        print(f"   {n} passes now: remove it from {os.path.basename(opts.known)}")
    for n, r in bad:
        print(f"   NOT PASSING {n}: {r['outcome']}: {r.get('reason', '')}")
    return 1 if bad else 0


def passlist_main(opts):
    passed = None
    docs = []
    for i in range(opts.runs):
        doc = run_config(opts, "gloo", opts.world, label=f"gloo world {opts.world}, run {i + 1}")
        docs.append(doc)
        ok = {n for n, r in doc["tests"].items() if r["outcome"] == "passed"}
        passed = ok if passed is None else passed & ok
    flaky = sorted({n for d in docs for n, r in d["tests"].items()
                    if r["outcome"] == "passed"} - passed)
    order = list(docs[0]["tests"])
    with open(opts.out, "w") as f:
        f.write(f"# Tests of torch's distributed suite (DistributedTest._DistTestBase) that\n"
                f"# passed with Gloo at world size {opts.world} in {opts.runs} runs in a row, "
                f"torch {docs[0]['torch']}.\n"
                f"# Regenerate: tests/torch/dist_suite.py passlist (the CI mode runs our "
                f"backend on them).\n")
        if flaky:
            f.write("# Left out, passed only in some runs: " + ", ".join(flaky) + "\n")
        for n in order:
            if n in passed:
                f.write(n + "\n")
    seconds = [d["seconds"] for d in docs]
    print(f"== {len(passed)} tests written to {opts.out}; left out as flaky: {flaky or 'none'}; "
          f"runs took {seconds} s")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)

    def common(p, backend=True, world=True, filters=True):
        if backend:
            p.add_argument("--backend", choices=BACKENDS, required=True)
        if world:
            p.add_argument("--world", type=int, default=2, help="world size (default 2)")
        if filters:
            p.add_argument("--tests-file", help="test names, one per line")
            p.add_argument("-k", action="append", metavar="REGEX",
                           help="run tests whose name matches (repeatable: any)")
            p.add_argument("--exclude", action="append", metavar="REGEX",
                           help="leave out tests whose name matches (repeatable)")
        p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT,
                       help=f"seconds per test (default {DEFAULT_TIMEOUT})")
        p.add_argument("--start", choices=("fork", "spawn"), default="fork",
                       help="how ranks are started (default fork)")
        p.add_argument("--pythonpath", help="where torch_collectives is "
                       "(default <repo>/build/python)")
        p.add_argument("--gpus", choices=("auto", "hide", "use"), default="auto",
                       help="auto: hide GPUs when fewer than the world size are visible "
                       "(the suite would skip every test)")
        p.add_argument("--env", action="append", metavar="NAME=VALUE",
                       help="set in the ranks' environment (repeatable), e.g. a backend "
                       "option")
        p.add_argument("--no-profiling", dest="profiling", action="store_false",
                       help=f"do not require profiler events from {OURS} (by default the "
                       "suite requires them as it does of Gloo)")
        p.add_argument("--open-gloo-gates", action="store_true",
                       help=f"exploratory: run tests the suite keeps for Gloo by name "
                       f"with {OURS} too (decorators see BACKEND=gloo)")

    p = sub.add_parser("run", help="run the suite for one backend and world size")
    common(p)
    p.add_argument("--json", help="write the results here (and the log next to it)")
    p.add_argument("--log", help="the ranks' output (default: next to --json, else dropped)")

    p = sub.add_parser("compare", help="Gloo and ours side by side; Markdown of differences")
    common(p, backend=False, world=False)
    p.add_argument("--out", required=True, help="the Markdown file (JSON and logs beside it)")
    p.add_argument("--worlds", type=int, nargs="+", default=[2, 4])

    p = sub.add_parser("ci", help="ours on the tests Gloo passes; exit 1 on a regression")
    common(p, backend=False, filters=False)
    p.add_argument("--passes", default=PASSES_FILE)
    p.add_argument("--known", default=KNOWN_FILE)
    p.add_argument("--run-known", action="store_true",
                   help="run the known differences too (reported, never failed)")
    p.add_argument("--json")
    p.add_argument("--log")

    p = sub.add_parser("passlist", help="regenerate the list of tests Gloo passes")
    common(p, backend=False)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--out", default=PASSES_FILE)

    p = sub.add_parser("list", help="test names and skips decided at import")
    p.add_argument("--backend", choices=BACKENDS, required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--pythonpath")

    p = sub.add_parser("_worker")  # the process that runs the tests (started by the modes)
    p.add_argument("--start", choices=("fork", "spawn"), default="fork")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT)
    p.add_argument("--events", required=True)
    p.add_argument("--names-file")
    p.add_argument("--tests-file")
    p.add_argument("-k", action="append")
    p.add_argument("--exclude", action="append")

    opts = ap.parse_args(argv)
    if opts.mode == "_worker":
        return worker_main(opts)
    if opts.mode == "list":
        return list_main(opts)
    return {"run": run_main, "compare": compare_main, "ci": ci_main,
            "passlist": passlist_main}[opts.mode](opts)


if __name__ == "__main__":
    sys.exit(main())

# pytest's side of the multi-rank tests (harness.py says how a launch works).
#
#   pytest tests/torch/test_ops.py --nranks 2 [-k EXPR] [--backend gloo]
#
# Without TC_REPORT in the environment this process is the launcher: it starts the
# ranks and reports what they saw instead of running cases itself. With it (set by the
# launcher) this process is one rank: its cases take the `ctx` fixture, and the hooks
# below create the world, record every case in the rank's report, exchange the statuses
# after each case and tear the world down at the end. A module without a table of cases
# (test_examples.py: each test starts its own processes) runs in pytest's process.
import faulthandler
import os
import signal

import pytest

import harness

RANK_PROCESS = "TC_REPORT" in os.environ
_rank = None  # this rank's harness.Rank, once its module is collected


def pytest_addoption(parser):
    g = parser.getgroup("ranks", "torch_collectives multi-rank launch")
    g.addoption("--nranks", type=int, default=2, help="ranks per launch")
    g.addoption("--backend", default="collectives", choices=["collectives", "gloo"])
    g.addoption("--launch-timeout", type=float, default=150.0,
                help="hard wall-clock limit per launch, seconds")
    g.addoption("--pg-timeout", type=float, default=30.0,
                help="process-group timeout given to init_process_group, seconds")
    g.addoption("--force", action="store_true",
                help="run cases that a module skips for this backend (fault tests)")
    g.addoption("--slowest", type=int, default=0, metavar="K", help="print the K slowest cases")
    g.addoption("--rank-output", action="store_true", help="print every rank's output")


def pytest_cmdline_main(config):
    if RANK_PROCESS or config.option.help or config.option.collectonly or \
            not harness.ranked_modules(config.args):
        return None  # pytest's own run
    return harness.launch(config)


def pytest_configure(config):
    if not RANK_PROCESS:
        return
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if os.environ["TC_BACKEND"] == "collectives":
        import torch_collectives  # noqa: F401  (registers the backend)


_own_report = None


def _report():
    """The rank's report for what happens before its Rank exists (opened once)."""
    global _own_report
    if _own_report is None:
        _own_report = harness.Report(os.environ["TC_REPORT"])
    return _own_report


def pytest_collectreport(report):
    """A module that cannot be imported, or skips itself, says so in the rank's report."""
    if not RANK_PROCESS or report.passed:
        return
    out = _report()
    if report.skipped:
        out.write(ev="unavailable", msg=_skip_reason(report))
    else:
        out.write(ev="fatal", msg=report.longreprtext)


def pytest_collection_modifyitems(config, items):
    global _rank
    if not RANK_PROCESS or not items:
        return
    _rank = harness.Rank(vars(items[0].module))
    if _rank.isolated:  # one case per launch: rank 0 says how many there are
        if _rank.ctx.rank == 0:
            _rank.report.write(ev="plan", cases=[i.name for i in items])
        index = int(os.environ["TC_CASE_INDEX"])
        items[:] = items[index:index + 1]


@pytest.fixture
def ctx(request):
    """The case's rank, world and checks (harness.Ctx), with the world set up."""
    if _rank is None:
        pytest.fail("run through the launcher: pytest tests/torch/MODULE.py --nranks N")
    return _rank.begin_case(request.node.name)


def pytest_runtest_logstart(nodeid, location):
    if _rank is not None:
        _rank.report.write(ev="start", case=nodeid.split("::", 1)[-1])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A case whose checks failed fails once it has returned (never half-way)."""
    result = yield
    if _rank is not None and _rank.ctx.msgs:
        raise harness.CheckFailed("\n".join(_rank.ctx.msgs))
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if _rank is not None and (rep.when == "call" or not rep.passed):
        status, msgs = _status(rep, call)
        item.tc_status = status
        _rank.report.write(ev="result", case=item.name, status=status, msgs=msgs,
                           secs=round(rep.duration, 4))
    return rep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)
    finally:
        if _rank is not None:
            _rank.end_case(getattr(item, "tc_status", "error"))


def pytest_sessionfinish(exitstatus):
    if _rank is not None:
        _rank.finish()
    elif RANK_PROCESS:  # nothing was collected: the launcher still needs "done"
        _report().write(ev="done")


def _status(rep, call):
    if rep.passed:
        return "ok", []
    if rep.skipped:
        return "skip", [_skip_reason(rep)]
    if call.excinfo is not None and call.excinfo.errisinstance(harness.CheckFailed):
        return "fail", list(_rank.ctx.msgs)
    # An unexpected exception: the group may be out of step.
    return "error", list(_rank.ctx.msgs) + [f"unexpected ({rep.when}): {rep.longreprtext}"]


def _skip_reason(rep):
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    return reason.removeprefix("Skipped: ")

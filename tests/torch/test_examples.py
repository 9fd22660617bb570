# The user-facing examples, run as a user runs them, must train:
#  torchrun --standalone --nproc_per_node N examples/ddp_cpu.py   (DDP)
#  torchrun --standalone --nproc_per_node N examples/fsdp_cpu.py  (FSDP2 fully_shard)
#  examples/fsdp_cpu.py --nprocs N                                (its own launcher)
# each with --backend B. A run passes when it exits 0 within --launch-timeout seconds,
# says it ran N processes on backend B, and prints at least 3 "loss X" lines whose last
# is under half the first. torchrun is the one beside this Python (else
# python -m torch.distributed.run). Skipped where torch has no torch.distributed.run.
# pytest runs these in its own process: each run starts its ranks itself.
#
# Run: .venv/bin/python -m pytest tests/torch/test_examples.py --nranks N [--backend gloo]
#      (with collectives, PYTHONPATH must hold build/python)
import os
import re
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")


def torchrun():
    beside = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if os.access(beside, os.X_OK):
        return [beside]
    return [sys.executable, "-m", "torch.distributed.run"]


def command(name, nranks, backend):
    """The command line of one run."""
    ex = lambda name: os.path.normpath(os.path.join(EXAMPLES, name))  # noqa: E731
    tr = torchrun() + ["--standalone", "--nproc_per_node", str(nranks)]
    back = ["--backend", backend]
    return {"torchrun/ddp_cpu": tr + [ex("ddp_cpu.py")] + back,
            "torchrun/fsdp_cpu": tr + [ex("fsdp_cpu.py")] + back,
            "nprocs/fsdp_cpu": [sys.executable, ex("fsdp_cpu.py"), "--nprocs",
                                str(nranks)] + back}[name]


def run_one(cmd, timeout):
    """(exit status or None if it ran past timeout, output, seconds)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("PYTHONUNBUFFERED", "1")
    # A rank killed by a signal (an abort at exit, say) prints every Python thread's stack.
    env.setdefault("PYTHONFAULTHANDLER", "1")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)  # torchrun's ranks leave its process group
        out, _ = proc.communicate()
        code = None
    return code, out, time.monotonic() - t0


def kill_tree(pid):
    """SIGKILL a process and every process below it (found through /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        except (ValueError, OSError, IndexError):
            pass
    todo, tree = [pid], []
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    for p in tree:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def check(opt, code, out):
    """The problems with one run's result (none: it passed)."""
    problems = []
    if code is None:
        problems.append(f"still running after {opt.launch_timeout:.0f} s (killed)")
    elif code != 0:
        problems.append(f"exit status {code}")
    banner = f"{opt.nranks} processes, backend {opt.backend}"
    if banner not in out:
        problems.append(f"it does not say {banner!r}")
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", out)]
    if len(losses) < 3:
        problems.append(f"{len(losses)} 'loss' lines, expected 3 or more")
    elif not losses[-1] < 0.5 * losses[0]:
        problems.append(f"the loss did not fall to under half: {losses}")
    return problems


@pytest.mark.parametrize("name", ["torchrun/ddp_cpu", "torchrun/fsdp_cpu", "nprocs/fsdp_cpu"])
def test_example(pytestconfig, name):
    pytest.importorskip("torch.distributed.run", reason="torch has no torchrun")
    if "fsdp" in name:
        import torch.distributed.fsdp as fsdp
        if not hasattr(fsdp, "fully_shard"):  # 2.6 on; before it FSDP2 needs CUDA
            pytest.skip("this torch has no public FSDP2 (torch.distributed.fsdp.fully_shard)")
    opt = pytestconfig.option
    cmd = command(name, opt.nranks, opt.backend)
    code, out, secs = run_one(cmd, opt.launch_timeout)
    losses = re.findall(r"loss ([0-9.]+)", out)
    print(f"[{name} backend={opt.backend} n={opt.nranks}] {secs:.1f} s, losses "
          f"{' '.join(losses)}", flush=True)
    problems = check(opt, code, out)
    assert not problems, "; ".join(problems) + f"\n--- {' '.join(cmd)}\n{out.rstrip()}\n---"

# The user-facing examples, run as a user runs them, must train:
#  torchrun --standalone --nproc_per_node N examples/ddp_cpu.py   (DDP)
#  torchrun --standalone --nproc_per_node N examples/fsdp_cpu.py  (FSDP2 fully_shard)
#  examples/fsdp_cpu.py --nprocs N                                (its own launcher)
# each with --backend B. A run passes when it exits 0 within --timeout seconds, says it
# ran N processes on backend B, and prints at least 3 "loss X" lines whose last is
# under half the first. torchrun is the one beside this Python (else
# python -m torch.distributed.run). Exits 77 (skipped) where torch has no
# torch.distributed.
#
# Run: python3 test_examples.py --backend collectives|gloo --nranks N [-k REGEX]
#      (python3: one with torch 2.x, the interpreter COLL_TORCH_PYTHON names; with
#      collectives, PYTHONPATH must hold build/python)
import argparse
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
SKIP = 77


def torchrun():
    beside = os.path.join(os.path.dirname(sys.executable), "torchrun")
    if os.access(beside, os.X_OK):
        return [beside]
    return [sys.executable, "-m", "torch.distributed.run"]


def runs(args):
    """name -> command line."""
    ex = lambda name: os.path.normpath(os.path.join(EXAMPLES, name))  # noqa: E731
    tr = torchrun() + ["--standalone", "--nproc_per_node", str(args.nranks)]
    back = ["--backend", args.backend]
    return {"torchrun/ddp_cpu": tr + [ex("ddp_cpu.py")] + back,
            "torchrun/fsdp_cpu": tr + [ex("fsdp_cpu.py")] + back,
            "nprocs/fsdp_cpu": [sys.executable, ex("fsdp_cpu.py"), "--nprocs",
                                str(args.nranks)] + back}


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
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and every rank it started
        out, _ = proc.communicate()
        code = None
    return code, out, time.monotonic() - t0


def check(args, name, code, out, secs):
    """The problems with one run's result (none: it passed)."""
    problems = []
    if code is None:
        problems.append(f"still running after {args.timeout:.0f} s (killed)")
    elif code != 0:
        problems.append(f"exit status {code}")
    banner = f"{args.nranks} processes, backend {args.backend}"
    if banner not in out:
        problems.append(f"it does not say {banner!r}")
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", out)]
    if len(losses) < 3:
        problems.append(f"{len(losses)} 'loss' lines, expected 3 or more")
    elif not losses[-1] < 0.5 * losses[0]:
        problems.append(f"the loss did not fall to under half: {losses}")
    return problems


def main():
    ap = argparse.ArgumentParser(description="Run the examples under torchrun and their "
                                             "own launcher; their loss must fall.")
    ap.add_argument("--backend", default="collectives", choices=["collectives", "gloo"])
    ap.add_argument("--nranks", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=100.0,
                    help="hard wall-clock limit per run, seconds")
    ap.add_argument("-k", metavar="REGEX", help="run only runs whose name matches")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every run's output")
    args = ap.parse_args()
    try:
        import torch.distributed.run  # noqa: F401
    except ImportError as e:
        print(f"skipped: torch has no torch.distributed.run (torchrun): {e}")
        return SKIP
    t0 = time.monotonic()
    failed = passed = 0
    for name, cmd in runs(args).items():
        if args.k and not re.search(args.k, name):
            continue
        code, out, secs = run_one(cmd, args.timeout)
        problems = check(args, name, code, out, secs)
        losses = re.findall(r"loss ([0-9.]+)", out)
        print(f"[{name} backend={args.backend} n={args.nranks}] {secs:.1f} s, losses "
              f"{' '.join(losses)}", flush=True)
        if problems or args.verbose:
            print(f"--- {' '.join(cmd)}\n{out.rstrip()}\n---")
        for p in problems:
            print(f"FAIL {name}: {p}")
        failed += bool(problems)
        passed += not problems
    print(f"{passed} passed, {failed} failed; {time.monotonic() - t0:.1f} s total")
    if passed + failed == 0:
        print("no run was selected (check -k)")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

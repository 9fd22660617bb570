#!/usr/bin/env python3
"""The device path's targets (docs/PERFORMANCE.md, "Current figures"), each with what
was measured and whether it holds.

    scripts/gpu/targets.py LOG_DIR

Reads the logs scripts/gpu/check.sh leaves in LOG_DIR (its summary.txt gives each step's
exit code; 124 is a step its time limit cut off, i.e. a hang) and prints one row per
target. A target whose logs are missing says "not run". Tables are nccl-tests' format
(ours and NCCL's alike): the out-of-place time and busbw of each size are read.
"""
import glob
import os
import re
import statistics
import sys

HANG = 124


def table(path):
    """{bytes: (time_us, busbw)} of an nccl-tests style table; None if the file is missing."""
    if not os.path.exists(path):
        return None
    rows = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) >= 8 and f[0].isdigit() and re.match(r"^[0-9.]+$", f[5]):
            rows[int(f[0])] = (float(f[5]), float(f[7]))
    return rows or None


def exits(log_dir):
    """{step: exit code} from summary.txt ("name: exit N, S s")."""
    codes = {}
    path = os.path.join(log_dir, "summary.txt")
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            m = re.match(r"^(\S+): exit (\d+),", line)
            if m:
                codes[m.group(1)] = int(m.group(2))
    return codes


def copy_bw(log_dir):
    """The device copy rate (GB/s of reads plus writes) at the largest size reduce_kernel_perf ran."""
    path = os.path.join(log_dir, "reduce_kernel.log")
    if not os.path.exists(path):
        return None
    best = None
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) == 5 and f[0].isdigit():
            best = float(f[1])
    return best


def missing(d, *steps):
    """Why a target's table is missing: the first of `steps` that ran and failed, else "not run"."""
    codes = exits(d)
    for step in steps:
        if step in codes and codes[step] != 0:
            log = os.path.join(d, step + ".log")
            first = open(log, errors="replace").readline().strip() if os.path.exists(log) else ""
            return f"{step} {'hung' if codes[step] == HANG else f'exit {codes[step]}'}" + (f": {first[:60]}" if first else "")
    return "not run"


def size_name(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def rounds(d, name):
    """The tables of name.log and of name_<k>.log (rounds run side by side), those present."""
    paths = [os.path.join(d, name + ".log")] + sorted(glob.glob(os.path.join(d, name + "_[0-9]*.log")))
    return [t for t in (table(p) for p in paths) if t]


def one_rank(d):
    # A few microseconds per call: one sample swings 2x between runs, so where the check
    # ran several rounds, each size compares the medians of the rounds that reached it.
    ours, nccl = rounds(d, "ours_1rank"), rounds(d, "nccl_1rank")
    if not ours or not nccl:
        steps = [f"{who}_1rank{k}" for k in ("", "_1", "_2", "_3") for who in ("ours", "nccl")]
        return missing(d, *steps), None
    common = sorted(set().union(*ours) & set().union(*nccl))
    if not common:
        return "no common sizes", None

    def med(tables, b):
        return statistics.median(t[b][0] for t in tables if b in t)

    worst = max(common, key=lambda b: med(ours, b) / med(nccl, b))
    o, n = med(ours, worst), med(nccl, worst)
    of = f", medians of {min(len(ours), len(nccl))} rounds" if len(ours) > 1 or len(nccl) > 1 else ""
    text = f"worst {o / n:.2f}x at {size_name(worst)} ({o:.1f} vs {n:.1f} us{of})"
    if o / n <= 1.1 and common[-1] < (1 << 30):  # the target asks up to 1 GiB
        return text + f", sizes only to {size_name(common[-1])}", None
    return text, o / n <= 1.1


def two_threads_bw(d):
    t2, bw = table(os.path.join(d, "allreduce_256M_ch0.log")), copy_bw(d)
    if not t2 or (256 << 20) not in t2 or not bw:
        return missing(d, "allreduce_256M_ch0", "reduce_kernel"), None
    bound = bw / 4  # 2 ranks: ~4 S through HBM per allreduce of S; busbw = algbw
    got = t2[256 << 20][1]
    return f"{got:.0f} GB/s, {100 * got / bound:.0f} % of {bound:.0f} (copy {bw:.0f} GB/s / 4)", got >= 0.6 * bound


def two_threads_small(d):
    t2 = table(os.path.join(d, "allreduce_t2.log"))
    if not t2 or 8 not in t2:
        return missing(d, "allreduce_t2"), None
    return f"{t2[8][0]:.1f} us", t2[8][0] <= 15


def eight_threads(d):
    t2, t8 = table(os.path.join(d, "allreduce_256M_ch0.log")), table(os.path.join(d, "allreduce_t8.log"))
    size = 256 << 20
    if not t2 or not t8 or size not in t2 or size not in t8:
        return missing(d, "allreduce_256M_ch0", "allreduce_t8"), None
    return f"{t8[size][1]:.1f} GB/s vs {t2[size][1]:.1f} / 2 at 256 MiB", t8[size][1] >= t2[size][1] / 2


def procs(d, size, test):
    p = table(os.path.join(d, "procs2.log"))
    if not p or size not in p:
        return missing(d, "procs2"), None
    time_us, busbw = p[size]
    return (f"{time_us:.1f} us", test(time_us, busbw)) if size == 8 else (f"{busbw:.2f} GB/s", test(time_us, busbw))


def steps_ok(codes, prefix, what):
    names = [n for n in codes if n.startswith(prefix)]
    if not names:
        return "not run", None
    bad = [n for n in names if codes[n] != 0]
    hung = [n for n in bad if codes[n] == HANG]
    if not bad:
        return f"{len(names)} {what} passed", True
    return f"{len(hung)} hung, {len(bad) - len(hung)} failed: {', '.join(sorted(bad))}", False


def step_ok(d, codes, name, what):
    if name not in codes:
        return "not run", None
    log = os.path.join(d, name + ".log")
    text = open(log, errors="replace").read() if os.path.exists(log) else ""
    # A case that found no usable GPU says so; other "skipped:" lines (a case checking
    # the skip itself) don't count when every case passed.
    skipped = [l.strip() for l in text.splitlines() if "skipped: no usable" in l]
    if skipped and "All tests passed" not in text:
        return skipped[0][:90], None  # a [gpu] case that found no usable GPU
    c = codes[name]
    return (what if c == 0 else ("hung" if c == HANG else f"exit {c}")), c == 0


def rows(d):
    codes = exits(d)
    yield "1 rank: <= 1.1x NCCL's time, every size 8 B-1 GiB", one_rank(d)
    yield "2 ranks (threads): busbw 256 MiB >= 60 % of HBM bound", two_threads_bw(d)
    yield "2 ranks (threads): 8 B <= 15 us", two_threads_small(d)
    yield "8 ranks (threads): busbw >= 2 ranks' / 2", eight_threads(d)
    yield "2 processes, no MPS: 8 B <= 100 us", procs(d, 8, lambda t, b: t <= 100)
    yield "2 processes, no MPS: 128 MiB >= 20 GB/s", procs(d, 128 << 20, lambda t, b: b >= 20)
    yield "no hang: 16 ranks as threads, every collective", steps_ok(codes, "hang_t16_", "collectives")
    yield "no hang: 4 processes, every collective", steps_ok(codes, "hang_np4_", "collectives")
    yield "fp16 prod (and all) equal to the host (gpu_tests)", step_ok(d, codes, "gpu_tests", "all cases passed")
    yield "compute-sanitizer memcheck clean", step_ok(d, codes, "memcheck", "0 errors")
    yield "compute-sanitizer racecheck clean", step_ok(d, codes, "racecheck", "0 hazards")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = list(rows(sys.argv[1]))
    width = max(len(t) for t, _ in out)
    mwidth = max(len(m) for _, (m, _) in out)
    print(f"{'target':{width}}  {'measured':{mwidth}}  holds")
    for target, (measured, holds) in out:
        verdict = "-" if holds is None else ("yes" if holds else "NO")
        print(f"{target:{width}}  {measured:{mwidth}}  {verdict}")


if __name__ == "__main__":
    main()

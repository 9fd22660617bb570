#!/usr/bin/python3
"""Ratios of our perf_tests tables to the peers' (../shared/peers), per target of the
host path (docs/PERFORMANCE.md, "Current figures").

    compare.py DIR [--medians OUTDIR]

DIR holds runs written by scripts/compare/peers.sh: <name>.<k>.txt for repeat k, each an
nccl-tests style table (ours: out-of-place columns, in-place for broadcast, which is what
MPI_Bcast does; peers: their only columns).
Medians over the repeats are compared. Prints one line per target with the measured
values, the ratio, the goal and PASS/FAIL; exits 0 (the verdicts are information).
With --medians, also writes each series' medians as a table (peers' format) to
OUTDIR/<name>.txt, for perf_tests/plot.
"""
import glob
import os
import statistics
import sys


# MPI_Bcast has one buffer: the same operation as our in-place broadcast (out-of-place
# additionally copies the root's sendbuff to its recvbuff, which MPI never does).
IN_PLACE = {"ours_shm_broadcast"}


def parse(path, in_place=False):
    """{size: (time_us, busbw)} from one table (ours or a peer's)."""
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            parts = line.split()
            if not parts[0].isdigit():
                continue
            try:
                if len(parts) >= 13:  # ours: size count type redop root time algbw busbw ...
                    # in-place time, algbw, busbw follow #wrong (--wire: #wrong maxerr, 15 columns)
                    col = (10 if len(parts) == 15 else 9) if in_place else 5
                    rows[int(parts[0])] = (float(parts[col]), float(parts[col + 2]))
                elif len(parts) == 8:  # peers: size count type redop time algbw busbw #wrong
                    rows[int(parts[0])] = (float(parts[4]), float(parts[6]))
            except ValueError:
                continue
    return rows


def medians(d, name):
    """{size: (median time, median busbw)} over d/name.*.txt; {} if none."""
    runs = [parse(p, name in IN_PLACE) for p in sorted(glob.glob(os.path.join(d, name + ".*.txt")))]
    runs = [r for r in runs if r]
    if not runs:
        return {}
    out = {}
    for size in runs[0]:
        vals = [r[size] for r in runs if size in r]
        out[size] = (statistics.median(v[0] for v in vals), statistics.median(v[1] for v in vals))
    return out


def human(size):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return "%d %s" % (size // div, unit)
    return "%d B" % size


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--medians"):
        print(__doc__)
        return 2
    d = sys.argv[1]
    t = {n: medians(d, n) for n in (
        "ours_shm_allreduce", "ours_tcp_allreduce", "ours_shm_broadcast", "ours_shm_allgather",
        "ours_shm_reduce_scatter", "ours_shm_allreduce_np8",
        "ompi_sm_allreduce", "ompi_tcp_allreduce", "ompi_sm_bcast", "ompi_sm_reduce_scatter",
        "ompi_sm_allgather", "mpich_sm_allreduce", "mpich_tcp_allreduce",
        "gloo_tcp_ring_allreduce", "gloo_tcp_bcube_allreduce",
        "gloo_tcp_halving_doubling_allreduce", "ompi_sm_allreduce_np8")}
    if len(sys.argv) == 4:
        os.makedirs(sys.argv[3], exist_ok=True)
        for name, rows in t.items():
            if not rows:
                continue
            with open(os.path.join(sys.argv[3], name + ".txt"), "w") as f:
                f.write("# %s: medians over the rounds in %s\n" % (name, d))
                f.write("#size count type redop time(us) algbw busbw #wrong\n")
                for size in sorted(rows):
                    tm, bw = rows[size]
                    f.write("%d %d float sum %.2f %.2f %.2f 0\n" % (size, size // 4, tm, size / tm / 1e3, bw))
    results = []

    def check(what, ours, peer, size, metric, goal, lower_is_better=False):
        a, b = t.get(ours, {}).get(size), t.get(peer, {}).get(size)
        if a is None or b is None:
            results.append((what, "-", "-", "-", goal, "MISSING"))
            return
        va, vb = (a[0], b[0]) if metric == "time" else (a[1], b[1])
        ratio = va / vb if vb else float("inf")
        ok = ratio <= goal if lower_is_better else ratio >= goal
        unit = "us" if metric == "time" else "GB/s"
        results.append((what, "%.2f %s" % (va, unit), "%.2f %s" % (vb, unit), "%.2f" % ratio,
                        ("<= " if lower_is_better else ">= ") + "%.1f" % goal, "PASS" if ok else "FAIL"))

    M = 1 << 20
    check("shm allreduce time @ 8 B vs Open MPI sm", "ours_shm_allreduce", "ompi_sm_allreduce", 8, "time", 1.5, True)
    for size, goal in ((M, 1.0), (16 * M, 2.0), (128 * M, 3.0)):
        check("shm allreduce busbw @ %s vs Open MPI sm" % human(size), "ours_shm_allreduce",
              "ompi_sm_allreduce", size, "bw", goal)
    # Never below the best peer from 64 KiB up.
    peers = [p for p in ("ompi_sm_allreduce", "mpich_sm_allreduce", "ompi_tcp_allreduce",
                         "mpich_tcp_allreduce", "gloo_tcp_ring_allreduce", "gloo_tcp_bcube_allreduce",
                         "gloo_tcp_halving_doubling_allreduce") if t.get(p)]
    ours = t.get("ours_shm_allreduce", {})
    for size in sorted(s for s in ours if s >= 64 * 1024):
        best = max(((t[p][size][1], p) for p in peers if size in t[p]), default=None)
        if best is None:
            continue
        ratio = ours[size][1] / best[0] if best[0] else float("inf")
        results.append(("shm allreduce busbw @ %s vs best peer (%s)" % (human(size), best[1]),
                        "%.2f GB/s" % ours[size][1], "%.2f GB/s" % best[0], "%.2f" % ratio,
                        ">= 1.0", "PASS" if ratio >= 1.0 else "FAIL"))
    check("TCP allreduce time @ 8 B vs Open MPI TCP", "ours_tcp_allreduce", "ompi_tcp_allreduce", 8, "time", 1.0, True)
    for size in sorted(s for s in t.get("ours_tcp_allreduce", {}) if s >= M):
        check("TCP allreduce busbw @ %s vs Open MPI TCP" % human(size), "ours_tcp_allreduce",
              "ompi_tcp_allreduce", size, "bw", 1.5)
    for ours_name, peer, label in (("ours_shm_broadcast", "ompi_sm_bcast", "broadcast"),
                                   ("ours_shm_allgather", "ompi_sm_allgather", "allgather"),
                                   ("ours_shm_reduce_scatter", "ompi_sm_reduce_scatter", "reduce-scatter")):
        for size in (M, 64 * M):
            check("shm %s busbw @ %s vs Open MPI sm" % (label, human(size)), ours_name, peer, size, "bw", 1.0)
    check("8 ranks on 2 cores, shm allreduce busbw @ 16 MiB vs Open MPI sm --oversubscribe",
          "ours_shm_allreduce_np8", "ompi_sm_allreduce_np8", 16 * M, "bw", 1.0)

    w = max(len(r[0]) for r in results)
    print("%-*s %14s %14s %7s %8s  %s" % (w, "target (2 ranks unless said)", "ours", "peer", "ratio", "goal", "verdict"))
    for r in results:
        print("%-*s %14s %14s %7s %8s  %s" % (w, *r))
    fails = sum(1 for r in results if r[5] != "PASS")
    print("# %d of %d targets met" % (len(results) - fails, len(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

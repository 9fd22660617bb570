#!/usr/bin/env bash
# Large allreduces: 2 ranks as processes against 2 ranks as threads of one process, in
# alternating launches. Processes run twice: with plain buffers (the FIFOs) and with
# symmetric windows on collMemAlloc memory (-R 2: each reads the other's buffers
# directly). Each round starts with the machine's 2-thread copy rate (all_reduce_perf
# --copy_bound), from which the memory-traffic bound on busbw follows. Prints per size
# the median busbw (out of place) of each, and the medians of the per-round ratios:
# processes / threads and each / the bound.
#
#   bash scripts/compare/processes.sh [ROUNDS]     # 5 rounds, 1-128 MiB: ~4 min
#
# Environment: BUILD_DIR [build]; MINB [1M], MAXB [128M]. Processes are bound to cores 0
# and 1 (collrun --bind core), the threads' process to the same two cores.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
ROUNDS="${1:-5}"
BUILD_DIR="${BUILD_DIR:-build}"
[ -x "$BUILD_DIR/perf_tests/all_reduce_perf" ] || bash scripts/build.sh
PERF=("$BUILD_DIR/perf_tests/all_reduce_perf" -b "${MINB:-1M}" -e "${MAXB:-128M}" -f 2 -w 3 -n 10 -c 0)
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT
rows() {  # who round < table: one line per size
  awk -v who="$1" -v k="$2" '/^# copy bound/ {print "bound", k, 0, $(NF-1)} /^ +[0-9]+ +[0-9]+ +float/ {print who, k, $1, $8}'
}
for k in $(seq 1 "$ROUNDS"); do
  taskset -c 0,1 "${PERF[@]}" -t 2 --copy_bound | rows threads "$k" >> "$RAW"
  "$BUILD_DIR/tools/collrun" -np 2 --bind core -- "${PERF[@]}" | rows fifo "$k" >> "$RAW"
  "$BUILD_DIR/tools/collrun" -np 2 --bind core -- "${PERF[@]}" -R 2 | rows windows "$k" >> "$RAW"
  echo "compare/processes.sh: round $k of $ROUNDS done" >&2
done
python3 - "$RAW" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(dict)
bound = {}
for line in open(sys.argv[1]):
    who, k, size, bw = line.split()
    if who == "bound":
        bound[k] = float(bw)
    else:
        d[(int(size), who)][k] = float(bw)
med = statistics.median
print("copy bound on busbw: median %.2f GB/s (rounds: %s)" % (med(bound.values()),
      " ".join("%.2f" % v for v in bound.values())))
print("%10s %8s %8s %8s %10s %10s %9s %9s" % ("bytes", "threads", "fifo", "windows", "fifo/thr", "win/thr",
                                             "thr/bound", "win/bound"))
for size in sorted({s for s, _ in d}):
    t, f, w = (d.get((size, x), {}) for x in ("threads", "fifo", "windows"))
    if not (t and f and w):
        continue
    def ratio(a, b):
        r = [a[k] / b[k] for k in a if k in b and b[k] > 0]
        return med(r) if r else float("nan")
    def vs_bound(a):
        r = [a[k] / bound[k] for k in a if k in bound and bound[k] > 0]
        return med(r) if r else float("nan")
    print("%10d %8.2f %8.2f %8.2f %10.2f %10.2f %9.2f %9.2f" % (size, med(t.values()), med(f.values()),
          med(w.values()), ratio(f, t), ratio(w, t), vs_bound(t), vs_bound(w)))
PY

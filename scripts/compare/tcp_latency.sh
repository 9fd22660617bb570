#!/usr/bin/env bash
# Small-message allreduce over TCP loopback, ours (two simulated hosts) and Open MPI TCP,
# in alternating launches, then the median per size and the ratio. Small-message times
# here drift by 20-50 % from one moment to the next, so alternating launches and medians
# are the only fair comparison.
#
#   bash scripts/compare/tcp_latency.sh [ROUNDS]     # default 8 rounds, ~2 minutes
#
# Environment: PEERS_BUILD [/tmp/peers-build] (built by ../shared/peers/setup.sh, which
# this runs), BUILD_DIR [build].
source "$(dirname "${BASH_SOURCE[0]}")/tcp_setup.sh" "$@"
for k in $(seq 1 "$ROUNDS"); do
  COLL_SOCKET_IFNAME=lo "$BUILD_DIR/tools/collrun" -np 2 --nodes 2 --bind core -- \
    "$BUILD_DIR/perf_tests/all_reduce_perf" -b 8 -e 1024 -f 8 -w 200 -n 5000 -c 0 2>&1 |
    awk '/^ +[0-9]+ +[0-9]+ +float/ {print "ours", $1, $6}' >> "$RAW"
  "${OMPI[@]}" "$PEERS_BUILD/mpi_allreduce_perf" -C allreduce -b 8 -e 1024 -w 200 -n 5000 -T 0 2>/dev/null |
    awk '/^ +[0-9]+ +[0-9]+ +float/ {print "ompi", $1, $5}' >> "$RAW"
  echo "compare/tcp_latency.sh: round $k of $ROUNDS done" >&2
done
python3 - "$RAW" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    who, size, t = line.split()
    d[(int(size), who)].append(float(t))
print("%8s %12s %12s %7s" % ("bytes", "ours us", "ompi us", "ratio"))
for size in sorted({s for s, _ in d}):
    o, m = d.get((size, "ours")), d.get((size, "ompi"))
    if o and m:
        a, b = statistics.median(o), statistics.median(m)
        print("%8d %12.2f %12.2f %7.2f" % (size, a, b, a / b))
PY

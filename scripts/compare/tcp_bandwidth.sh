#!/usr/bin/env bash
# Large-message allreduce over TCP loopback, ours (two simulated hosts) and Open MPI TCP,
# launched in alternation, with the ratio taken per round (paired) as well as of the
# medians. Loopback throughput here depends on where the VM's two vCPUs sit at the
# moment (sharing a last-level cache or not: Open MPI's "fast mode" at 1-4 MiB), which
# changes from minute to minute; a launch of ours right beside a launch of theirs sees
# the same placement more often than launches minutes apart, so the paired ratio is the
# fairer one.
#
#   bash scripts/compare/tcp_bandwidth.sh [ROUNDS]     # default 8 rounds, ~4 minutes
#
# Environment: PEERS_BUILD [/tmp/peers-build] (built by ../shared/peers/setup.sh, which
# this runs), BUILD_DIR [build].
source "$(dirname "${BASH_SOURCE[0]}")/tcp_setup.sh" "$@"
for k in $(seq 1 "$ROUNDS"); do
  COLL_SOCKET_IFNAME=lo timeout 300 "$BUILD_DIR/tools/collrun" -np 2 --nodes 2 --bind core -- \
    "$BUILD_DIR/perf_tests/all_reduce_perf" -b 1M -e 128M -f 2 -w 3 -n 20 -c 0 2>&1 |
    awk -v k="$k" '/^ +[0-9]+ +[0-9]+ +float/ {print k, "ours", $1, $8}' >> "$RAW"
  timeout 300 "${OMPI[@]}" "$PEERS_BUILD/mpi_allreduce_perf" -C allreduce -b 1M -e 128M -w 3 -n 20 -T 0 2>/dev/null |
    awk -v k="$k" '/^ +[0-9]+ +[0-9]+ +float/ {print k, "ompi", $1, $7}' >> "$RAW"
  echo "compare/tcp_bandwidth.sh: round $k of $ROUNDS done" >&2
done
python3 - "$RAW" <<'PY'
import collections, statistics, sys
bw = collections.defaultdict(dict)  # (size, who) -> {round: GB/s}
for line in open(sys.argv[1]):
    k, who, size, b = line.split()
    bw[(int(size), who)][int(k)] = float(b)
print("%10s %9s %9s %8s %13s %s" % ("bytes", "ours GB/s", "ompi GB/s", "ratio", "paired ratio", "(per round: ours/ompi)"))
for size in sorted({s for s, _ in bw}):
    o, m = bw.get((size, "ours"), {}), bw.get((size, "ompi"), {})
    both = sorted(set(o) & set(m))
    if not both:
        continue
    pairs = [o[k] / m[k] for k in both]
    print("%10d %9.2f %9.2f %8.2f %13.2f %s" % (
        size, statistics.median(o.values()), statistics.median(m.values()),
        statistics.median(o.values()) / statistics.median(m.values()), statistics.median(pairs),
        " ".join("%.2f/%.2f" % (o[k], m[k]) for k in both)))
PY

#!/usr/bin/env bash
# Small-message allreduce, ours against Open MPI, in alternating launches; then per size
# the median time of each and the median of the per-round ratios (ours / Open MPI, below
# 1: ours is faster). Small-message times here drift by 20-50 % from one moment to the
# next, so alternating launches and medians are the only fair comparison.
#
#   bash scripts/compare/latency.sh shm [ROUNDS]   # 2 processes over shared memory (Open
#                                                  # MPI's vader), 8-256 B; 8 rounds, ~1 min
#   bash scripts/compare/latency.sh tcp [ROUNDS]   # two simulated hosts on loopback (Open
#                                                  # MPI's TCP), 8 B-1 KiB; 8 rounds, ~2 min
#
# Environment: PEERS_BUILD [/tmp/peers-build] (built by ../shared/peers/setup.sh, which
# this runs), BUILD_DIR [build]. Both sides are bound to cores 0 and 1.
WHERE=${1:?usage: latency.sh shm|tcp [ROUNDS]}
shift
source "$(dirname "${BASH_SOURCE[0]}")/tcp_setup.sh" "$@"
JSON=$(mktemp)
trap 'rm -f "$RAW" "$JSON"' EXIT
case "$WHERE" in
  shm)
    OMPI=(mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1
          --mca oob_tcp_if_include lo --mca btl vader,self)
    OURS=("$BUILD_DIR/tools/collrun" -np 2 --bind core)
    SIZES=(-b 8 -e 256 -f 2 -w 1000 -n 20000) ;;
  tcp)
    OURS=(env COLL_SOCKET_IFNAME=lo "$BUILD_DIR/tools/collrun" -np 2 --nodes 2 --bind core)
    SIZES=(-b 8 -e 1024 -f 8 -w 200 -n 5000) ;;
  *) echo "latency.sh: shm or tcp, not '$WHERE'" >&2; exit 2 ;;
esac
for k in $(seq 1 "$ROUNDS"); do
  "${OURS[@]}" -- "$BUILD_DIR/perf_tests/all_reduce_perf" "${SIZES[@]}" -c 0 -J "$JSON" >/dev/null 2>&1
  python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["rows"]: print("ours", sys.argv[2], r["size"], r["out_of_place"]["time_us"])' \
    "$JSON" "$k" >> "$RAW"
  "${OMPI[@]}" "$PEERS_BUILD/mpi_allreduce_perf" -C allreduce "${SIZES[@]}" -T 0 2>/dev/null |
    awk -v k="$k" '/^ +[0-9]+ +[0-9]+ +float/ {print "ompi", k, $1, $5}' >> "$RAW"
  echo "compare/latency.sh: round $k of $ROUNDS done" >&2
done
python3 - "$RAW" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    who, k, size, t = line.split()
    d[(int(size), who)][k] = float(t)
print("%8s %10s %10s %7s" % ("bytes", "ours us", "ompi us", "ratio"))
for size in sorted({s for s, _ in d}):
    o, m = d.get((size, "ours")), d.get((size, "ompi"))
    if o and m:
        ratios = [o[k] / m[k] for k in o if k in m and m[k] > 0]
        print("%8d %10.3f %10.3f %7.3f" % (size, statistics.median(o.values()), statistics.median(m.values()),
                                           statistics.median(ratios)))
PY

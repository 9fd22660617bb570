#!/usr/bin/env bash
# perf_tests --wire: compressed calls within collectives.h's error bound (#wrong 0: a run
# exits non-zero otherwise), between threads as they come (COLL_DIRECT=1: large calls read
# the peers' fp32 buffers, exact) and with COLL_DIRECT=0, where values cross between ranks
# encoded (maxerr > 0 somewhere); --wire on int32 is refused.
# Usage: perf_wire_test.sh BUILD_DIR
set -euo pipefail
P=$1/perf_tests
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
sizes=(-b 8 -e 1M -f 16)
# $1: a table; $2: the encoding its header must name; no row with wrong results.
ok() { grep -q "^# wire: $2 " "$1" && awk '!/^#/ && ($9 != 0 || $14 != 0) {bad = 1} END {exit bad}' "$1"; }
for direct in 1 0; do
  COLL_DIRECT=$direct "$P/all_reduce_perf" -t 2 "${sizes[@]}" --wire half > "$d/ar"; ok "$d/ar" half
  COLL_DIRECT=$direct "$P/reduce_scatter_perf" -t 3 "${sizes[@]}" --wire bfloat16 > "$d/rs"; ok "$d/rs" bfloat16
  COLL_DIRECT=$direct "$P/broadcast_perf" -t 2 "${sizes[@]}" --wire half > "$d/bc"; ok "$d/bc" half
done
cat "$d/ar" "$d/rs" "$d/bc" | awk '!/^#/ && $10 > 0 {f = 1} END {exit !f}'
if "$P/all_reduce_perf" -t 2 -b 8 -e 8 --wire half -d int32 2> "$d/err"; then exit 1; fi
grep -q -- '--wire half' "$d/err"

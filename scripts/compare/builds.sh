#!/usr/bin/env bash
# Two builds of the library side by side (a refactor's before and after): all_reduce_perf
# with 2 threads (-t 2) and 2 processes (collrun -np 2), the builds alternating run by run
# so both see the same machine noise. Prints, per setup and size, the median out-of-place
# time of each build and the median of the per-round ratios new/old (<1: new is faster).
#   scripts/compare/builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]
# Extra all_reduce_perf options may be given in PERF_ARGS (default: 8 B .. 64 MiB, x8).
set -euo pipefail
OLD=${1:?old build dir}
NEW=${2:?new build dir}
ROUNDS=${3:-5}
ARGS=(${PERF_ARGS:--b 8 -e 64M -f 8 -n 20 -w 5})
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # BUILD LABEL SETUP ROUND
  local b=$1 setup=$3 json="$OUT/$3.$2.$4.json"
  if [ "$setup" = threads ]; then
    "$b/perf_tests/all_reduce_perf" -t 2 "${ARGS[@]}" -J "$json" >/dev/null
  else
    "$b/tools/collrun" -np 2 -- "$b/perf_tests/all_reduce_perf" "${ARGS[@]}" -J "$json" >/dev/null
  fi
  echo "$json"
}
for round in $(seq 1 "$ROUNDS"); do
  for setup in threads procs; do
    echo "old $setup $round $(run "$OLD" old "$setup" "$round")" >>"$OUT/index"
    echo "new $setup $round $(run "$NEW" new "$setup" "$round")" >>"$OUT/index"
  done
done
python3 - "$OUT/index" <<'EOF'
import json, statistics, sys
times = {}  # (setup, size) -> {build: {round: us}}
for line in open(sys.argv[1]):
    build, setup, rnd, path = line.split()
    for row in json.load(open(path))["rows"]:
        times.setdefault((setup, row["size"]), {}).setdefault(build, {})[rnd] = row["out_of_place"]["time_us"]
print(f"{'setup':8} {'bytes':>10} {'old us':>10} {'new us':>10} {'new/old':>8}")
for (setup, size), t in sorted(times.items()):
    ratios = [t["new"][r] / t["old"][r] for r in t["old"] if r in t["new"] and t["old"][r] > 0]
    print(f"{setup:8} {size:>10} {statistics.median(t['old'].values()):>10.2f} "
          f"{statistics.median(t['new'].values()):>10.2f} {statistics.median(ratios):>8.3f}")
EOF

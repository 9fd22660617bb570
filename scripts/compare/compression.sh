#!/usr/bin/env bash
# Compressed against uncompressed collectives, side by side in one run (their speed
# targets: docs/PERFORMANCE.md): per setup, all_reduce_perf (or $BENCH) plain and with
# --wire alternating round by round so both see the same machine noise. Prints per
# setup and size the median time and busbw of each and the median of the per-round
# speedups (plain time / compressed time, = the busbw ratio).
#   scripts/compare/compression.sh BUILD_DIR [ROUNDS] [WIRE]
# Setups: shm (collrun -np 2, processes on one host), tcp2 and tcp4 (collrun --nodes 2,
# 2 and 4 ranks: two simulated hosts over TCP). SETUPS, BENCH and PERF_ARGS (default
# 8 B and 1-64 MiB) override.
set -euo pipefail
B=${1:?build dir}
ROUNDS=${2:-3}
WIRE=${3:-half}
BENCH=${BENCH:-all_reduce_perf}
SETUPS=${SETUPS:-shm tcp2 tcp4}
ARGS=(${PERF_ARGS:--b 1M -e 64M -f 4 -n 10 -w 2})
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
run() {  # SETUP LABEL ROUND EXTRA...
  local setup=$1 label=$2 rnd=$3 json="$OUT/$1.$2.$3.json"
  shift 3
  case $setup in
    shm) "$B/tools/collrun" -np 2 -- "$B/perf_tests/$BENCH" "${ARGS[@]}" "$@" -J "$json" >/dev/null ;;
    tcp2) "$B/tools/collrun" -np 2 --nodes 2 -- "$B/perf_tests/$BENCH" "${ARGS[@]}" "$@" -J "$json" >/dev/null ;;
    tcp4) "$B/tools/collrun" -np 4 --nodes 2 -- "$B/perf_tests/$BENCH" "${ARGS[@]}" "$@" -J "$json" >/dev/null ;;
  esac
  echo "$label $setup $rnd $json" >>"$OUT/index"
}
for rnd in $(seq 1 "$ROUNDS"); do
  for setup in $SETUPS; do
    run "$setup" plain "$rnd"
    run "$setup" wire "$rnd" --wire "$WIRE"
  done
done
python3 - "$OUT/index" <<'PY'
import json, statistics, sys
bw, us = {}, {}  # (setup, size) -> {label: {round: busbw or time}}
for line in open(sys.argv[1]):
    label, setup, rnd, path = line.split()
    for row in json.load(open(path))["rows"]:
        key = (setup, row["size"])
        bw.setdefault(key, {}).setdefault(label, {})[rnd] = row["out_of_place"]["busbw_gbs"]
        us.setdefault(key, {}).setdefault(label, {})[rnd] = row["out_of_place"]["time_us"]
print(f"{'setup':6} {'bytes':>10} {'plain us':>10} {'wire us':>10} {'plain GB/s':>11} {'wire GB/s':>10} {'speedup':>8}")
for key, t in sorted(us.items()):
    ratios = [t["plain"][r] / t["wire"][r] for r in t["plain"] if r in t["wire"] and t["wire"][r] > 0]
    med = lambda d: statistics.median(d.values())
    print(f"{key[0]:6} {key[1]:>10} {med(t['plain']):>10.1f} {med(t['wire']):>10.1f} {med(bw[key]['plain']):>11.2f} "
          f"{med(bw[key]['wire']):>10.2f} {statistics.median(ratios) if ratios else 0:>8.2f}")
PY

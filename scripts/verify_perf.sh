#!/usr/bin/env bash
# Correctness sweep through the perf binaries (not part of CI: ~4 minutes on 2 cores):
# every collective with -c 1 over every dtype and op, odd sizes (1, 7, 49, ... bytes up to
# 2 MiB), 1, 2, 3, 5 and 8 processes on one host and on two simulated hosts, and 2 and 4
# threads in one process. Prints one line per run; exits 1 if any run fails or finds a
# wrong element. With COLL_DEVICE_EMULATE=1 every run goes through the device executor
# (on host threads); on a GPU machine, perf_tests default to --mem device.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
[ -x "$BUILD_DIR/perf_tests/all_reduce_perf" ] || bash scripts/build.sh
R="$BUILD_DIR/tools/collrun"
P="$BUILD_DIR/perf_tests"
ARGS=(-b 1 -e 2M -f 7 -d all -o all -n 2 -w 1 -c 1)
fail=0
check() {  # LABEL CMD...
  local label="$1"; shift
  local out rc
  out=$(timeout 600 "$@" 2>&1); rc=$?
  echo "$label: exit $rc, $(echo "$out" | grep 'Out of bounds' || echo 'no summary')"
  [ "$rc" = 0 ] || fail=1
}
for np in 1 2 3 5 8; do
  for b in all_reduce reduce_scatter all_gather broadcast reduce alltoall gather scatter; do
    check "np=$np $b" "$R" -np "$np" -- "$P/${b}_perf" "${ARGS[@]}"
    [ "$np" -gt 1 ] && check "np=$np --nodes 2 $b" "$R" -np "$np" --nodes 2 -- "$P/${b}_perf" "${ARGS[@]}"
  done
done
for t in 2 4; do check "threads=$t all_reduce" "$P/all_reduce_perf" -t "$t" "${ARGS[@]}"; done
echo "verify_perf: $([ $fail = 0 ] && echo all passed || echo FAILURES)"
exit $fail

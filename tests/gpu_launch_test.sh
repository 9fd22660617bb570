#!/usr/bin/env bash
# [gpu] launch tests: perf_tests on device buffers (--mem device, checked with -c 1) as
# threads on one GPU, as processes on one GPU, and across two simulated hosts (the net
# transport through the proxy thread). Without a usable GPU: skipped (exit 77) with the
# reason printed.
#
#   bash tests/gpu_launch_test.sh BUILD_DIR CASE     (CASE: threads | procs | hosts)
set -uo pipefail
B="$1"
CASE="$2"
P="$B/perf_tests"
probe=$("$P/all_reduce_perf" --mem device -b 8 -e 8 -n 1 -w 0 2>&1)
if [ $? -ne 0 ]; then
  echo "skipped: $probe"
  exit 77
fi
ARGS=(--mem device -b 8 -e 4M -f 16 -c 1 -n 2 -w 1)
fail=0
run() {  # run LABEL command...
  local label="$1"
  shift
  local out
  out=$(timeout 300 "$@" 2>&1)
  local rc=$?
  if [ $rc -ne 0 ] || ! grep -q "Out of bounds values : 0 OK" <<<"$out"; then
    echo "FAILED ($rc): $label"
    echo "$out" | tail -20
    fail=1
  else
    echo "ok: $label"
  fi
}
for bin in all_reduce_perf reduce_scatter_perf all_gather_perf broadcast_perf reduce_perf sendrecv_perf; do
  case "$CASE" in
    threads) run "$bin -t 4 (threads on one GPU)" env CUDA_VISIBLE_DEVICES=0 "$P/$bin" -t 4 "${ARGS[@]}" -o all ;;
    procs) run "$bin, 2 processes on one GPU" env CUDA_VISIBLE_DEVICES=0 "$B/tools/collrun" -np 2 -- "$P/$bin" "${ARGS[@]}" ;;
    hosts) run "$bin, 2 simulated hosts" env COLL_SOCKET_IFNAME=lo "$B/tools/collrun" -np 2 --nodes 2 -- "$P/$bin" "${ARGS[@]}" ;;
    *) echo "unknown case $CASE"; exit 2 ;;
  esac
done
exit $fail

#!/usr/bin/env bash
# Launch-path tests of perf_tests and collrun. Usage: launch_test.sh BUILD_DIR CASE
# Exit 77 means "skipped" (CTest SKIP_RETURN_CODE), with the reason printed.
set -uo pipefail
B=$1; case_=$2
P=$B/perf_tests; R=$B/tools/collrun
export COLL_SOCKET_IFNAME=lo
small="-b 8 -e 256K -f 8 -n 3 -w 1"
case $case_ in
  collrun_all)   # every type and op through collrun, 4 processes
    exec $R -np 4 --timeout 300 -- $P/all_reduce_perf $small -d all -o all ;;
  threads_all)
    exec $P/all_reduce_perf -t 4 $small -d all -o all ;;
  every_binary)  # each benchmark once, 3 ranks as processes (two simulated hosts) and as threads
    for b in all_reduce all_gather broadcast reduce reduce_scatter sendrecv alltoall gather scatter; do
      $R -np 3 --nodes 2 --timeout 120 -- $P/${b}_perf $small -r all -o all -d int32 || { echo "$b failed under collrun"; exit 1; }
      $P/${b}_perf -t 3 $small -d bfloat16 -o all -r all || { echo "$b failed with -t 3"; exit 1; }
    done ;;
  mpirun)
    if ! command -v mpirun >/dev/null; then echo "SKIP: mpirun not installed (apt-get install openmpi-bin)"; exit 77; fi
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    exec mpirun --allow-run-as-root --oversubscribe -np 4 -x COLL_COMM_ID=127.0.0.1:$port -x COLL_SOCKET_IFNAME=lo \
      $P/all_reduce_perf $small -d all -o all ;;
  no_address)    # a multi-process launch with no rendezvous address must fail clearly
    out=$(COLL_RANK=1 COLL_NRANKS=2 $P/all_reduce_perf $small 2>&1); rc=$?
    [ $rc -ne 0 ] && grep -q "COLL_COMM_ID" <<<"$out" || { echo "expected a clear error, got rc=$rc: $out"; exit 1; } ;;
  collrun_failure)  # the first failing rank's status is collrun's; the others are stopped
    $R -np 3 --timeout 60 -- bash -c 'if [ "$COLL_RANK" = 1 ]; then exit 7; fi; sleep 30'; rc=$?
    [ $rc -eq 7 ] || { echo "expected 7, got $rc"; exit 1; } ;;
  collrun_timeout)
    start=$(date +%s); $R -np 2 --timeout 1 -- sleep 30; rc=$?
    [ $rc -eq 124 ] && [ $(( $(date +%s) - start )) -lt 10 ] || { echo "expected 124 within 10 s, got $rc"; exit 1; } ;;
  collrun_killed)  # collrun stopped by a signal takes its ranks with it
    # A sleep only this test runs (any other "sleep 60" on the machine was once counted).
    nap="sleep 60.$$"
    $R -np 2 -- bash -c "$nap" & pid=$!
    sleep 1; kill -TERM $pid; wait $pid; rc=$?
    sleep 0.5
    left=$(pgrep -f "^$nap\$" | wc -l)
    [ $rc -eq 143 ] && [ "$left" -eq 0 ] || { echo "rc=$rc, $left ranks left running"; pkill -f "^$nap\$"; exit 1; } ;;
  collrun_env)   # rank variables, --nodes host ids, -x and --tag-output
    out=$($R -np 4 --nodes 2 -x FOO=bar --tag-output -- bash -c 'echo "$COLL_RANK/$COLL_NRANKS/$COLL_LOCAL_RANK $COLL_HOSTID $FOO ${COLL_COMM_ID%%:*}"')
    for want in "[0] 0/4/0 collrun-node0 bar 127.0.0.1" "[1] 1/4/1 collrun-node0 bar" "[3] 3/4/1 collrun-node1 bar"; do
      grep -qF "$want" <<<"$out" || { echo "missing '$want' in: $out"; exit 1; }
    done ;;
  json)          # -J writes what docs/PERFORMANCE.md says it writes
    f=$(mktemp); trap 'rm -f $f' EXIT
    $R -np 2 -- $P/all_reduce_perf $small -d all -o sum -J $f >/dev/null || exit 1
    python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("program", "library_version", "date", "host", "nranks", "nprocs", "nthreads", "launcher",
          "transports", "options", "busbw_factor", "rows", "out_of_bounds", "avg_busbw_gbs", "ok"):
    assert k in d, "missing key " + k
assert d["program"] == "all_reduce_perf" and d["nranks"] == 2 and d["launcher"] == "collrun", d
assert len(d["transports"]) == 2 and d["ok"] is True and d["out_of_bounds"] == 0
assert len(d["rows"]) == 12 * 6, len(d["rows"])
for r in d["rows"]:
    for half in ("out_of_place", "in_place"):
        h = r[half]
        assert h["wrong"] == 0
        assert abs(h["busbw_gbs"] - h["algbw_gbs"] * d["busbw_factor"]) < 1e-6 * max(1, h["busbw_gbs"])
        assert abs(h["algbw_gbs"] - r["size"] / h["time_us"] / 1e3) < 1e-6 * max(1, h["algbw_gbs"])
print("json ok:", len(d["rows"]), "rows")
PY
    ;;
  hosts_trees)   # ring and tree allreduce on 1-4 simulated hosts, up to 16 ranks (processes)
    for shape in "1 1" "2 2" "5 3" "8 4" "16 4"; do
      set -- $shape
      for algo in allreduce:ring allreduce:tree; do
        COLL_ALGO=$algo $R -np $1 --nodes $2 --timeout 240 -- $P/all_reduce_perf -b 1 -e 300K -f 17 -n 2 -w 1 \
          -d float -o all >/dev/null || { echo "$algo failed with $1 ranks on $2 hosts"; exit 1; }
      done
      # The other collectives (ring and chains) at the same shapes, one type.
      for b in broadcast reduce all_gather reduce_scatter; do
        $R -np $1 --nodes $2 --timeout 240 -- $P/${b}_perf -b 1 -e 300K -f 17 -n 2 -w 1 -d int32 >/dev/null ||
          { echo "$b failed with $1 ranks on $2 hosts"; exit 1; }
      done
      echo "ok: $1 ranks on $2 hosts"
    done
    # Buffers page-aligned and at odd offsets over the network: the socket backend pads
    # large messages' headers to keep their alignment (socketHeaderPad).
    for off in 0 56 4095; do
      $R -np 2 --nodes 2 --timeout 240 -- $P/all_reduce_perf -b 16K -e 2M -f 8 -n 2 -w 1 --offset $off \
        -d all -o sum >/dev/null || { echo "buffers at page offset $off failed"; exit 1; }
    done
    echo "ok: buffers at page offsets 0, 56 and 4095" ;;
  *) echo "unknown case $case_"; exit 2 ;;
esac

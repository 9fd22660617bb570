#!/usr/bin/env bash
# Multi-host for real on one machine: three network namespaces ("hosts"), each with its
# own veth interface and IP address on a bridge that lives in a fourth namespace, two
# ranks per host, every rank started inside its host's namespace with
# COLL_SOCKET_IFNAME=collv0 (so the bootstrap and the net transport use only addresses
# inside the namespaces). Collectives run over the ring and over the trees and are checked
# (-c 1). Usage: netns_test.sh BUILD_DIR. Exit 77 means skipped, with the reason printed.
set -uo pipefail
B=$1
P=$B/perf_tests
HOSTS=3
PER=2
NP=$((HOSTS * PER))
TAG=c$$  # namespace names unique to this run
SW=${TAG}sw

if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root to create network namespaces"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP: ip (iproute2) not installed"; exit 77; fi

cleanup() {
  for h in $(seq 0 $((HOSTS - 1))); do ip netns del "${TAG}h$h" 2>/dev/null; done
  ip netns del "$SW" 2>/dev/null
  return 0
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if ! ip netns add "$SW" 2>/dev/null; then echo "SKIP: cannot create network namespaces here"; exit 77; fi
ip -n "$SW" link add br0 type bridge || exit 1
ip -n "$SW" link set br0 up || exit 1
for h in $(seq 0 $((HOSTS - 1))); do
  ns=${TAG}h$h
  ip netns add "$ns" || exit 1
  ip -n "$ns" link set lo up
  # The pair is created inside the host namespace, its peer moved to the switch.
  ip -n "$ns" link add collv0 type veth peer name "p$h" netns "$SW" || exit 1
  ip -n "$ns" addr add "10.213.0.$((h + 1))/24" dev collv0 || exit 1
  ip -n "$ns" link set collv0 up || exit 1
  ip -n "$SW" link set "p$h" master br0 || exit 1
  ip -n "$SW" link set "p$h" up || exit 1
done
# The bridge forwards once its ports are up; wait until host 0 reaches the last host.
for _ in $(seq 1 50); do
  ip netns exec "${TAG}h0" ping -c1 -W1 "10.213.0.$HOSTS" >/dev/null 2>&1 && break
  sleep 0.1
done

tx() { ip netns exec "${TAG}h$1" cat /sys/class/net/collv0/statistics/tx_bytes 2>/dev/null || echo 0; }

# run NAME ENV... -- BINARY ARGS: every rank in its host's namespace; all must succeed.
run() {
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local port=$((20000 + RANDOM % 20000))
  local pids=() out=/tmp/${TAG}_$name
  local before; before=$(tx 1)
  for r in $(seq 0 $((NP - 1))); do
    local h=$((r / PER))
    ip netns exec "${TAG}h$h" env COLL_RANK=$r COLL_NRANKS=$NP COLL_LOCAL_RANK=$((r % PER)) \
      COLL_COMM_ID=10.213.0.1:$port COLL_SOCKET_IFNAME==collv0 COLL_HOSTID=${TAG}h$h \
      COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET,TUNING "${envs[@]}" \
      timeout 120 "$@" >"$out.$r" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for r in $(seq 0 $((NP - 1))); do
    wait "${pids[$r]}"
    local st=$?
    [ $st -eq 0 ] || { echo "[$name] rank $r failed (exit status $st; 124: timed out, >128: signal)"; tail -20 "$out.$r"; rc=1; }
  done
  if [ $rc -eq 0 ]; then
    grep -q "Out of bounds values : 0 OK" "$out.0" || { echo "[$name] no verified result:"; tail -20 "$out.0"; rc=1; }
    # The net backend used the namespace's veth, and bytes left host 1 through it.
    grep -q "socket backend: collv0 (10.213.0.2" "$out.$PER" || { echo "[$name] rank $PER did not use collv0:"; grep NET "$out.$PER" | head -3; rc=1; }
    [ "$(tx 1)" -gt "$before" ] || { echo "[$name] nothing left host 1 through collv0"; rc=1; }
    echo "[$name] ok: $(grep -c 'Tree/Simple' "$out.0") tree and $(grep -c 'Ring/Simple' "$out.0") ring choices logged on rank 0"
  fi
  rm -f "$out".*
  return $rc
}

small="-b 1 -e 1M -f 16 -n 2 -w 1 -c 1 -d all -o all"
fail=0
run ring  COLL_ALGO=allreduce:ring -- "$P/all_reduce_perf" $small || fail=1
run tree  COLL_ALGO=allreduce:tree -- "$P/all_reduce_perf" $small || fail=1
run tuned COLL_ALGO= -- "$P/all_reduce_perf" -b 1 -e 4M -f 8 -n 2 -w 1 -c 1 || fail=1
for b in broadcast reduce all_gather reduce_scatter; do
  run "$b" COLL_ALGO= -- "$P/${b}_perf" -b 1 -e 1M -f 32 -n 2 -w 1 -c 1 -d int32 || fail=1
done
exit $fail

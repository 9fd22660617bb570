#!/usr/bin/env bash
# Two rails for real: two network namespaces ("hosts") joined by two veth pairs (rail0 and
# rail1, each its own subnet), one rank per host, COLL_SOCKET_IFNAME=rail naming both
# and two channels. The allreduce is checked (-c 1), each channel's connection must be
# served by its own rail (INFO), and both rails must carry the data (tx_bytes of each grows
# by at least a quarter of what the operation moves). Usage: netns_rails_test.sh BUILD_DIR.
# Exit 77 means skipped, with the reason printed.
set -uo pipefail
B=$1
TAG=r$$
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root to create network namespaces"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP: ip (iproute2) not installed"; exit 77; fi
cleanup() {
  ip netns del "${TAG}h0" 2>/dev/null
  ip netns del "${TAG}h1" 2>/dev/null
  return 0
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if ! ip netns add "${TAG}h0" 2>/dev/null; then echo "SKIP: cannot create network namespaces here"; exit 77; fi
ip netns add "${TAG}h1" || exit 1
for h in 0 1; do ip -n "${TAG}h$h" link set lo up; done
for k in 0 1; do
  ip -n "${TAG}h0" link add "rail$k" type veth peer name "rail$k" netns "${TAG}h1" || exit 1
  for h in 0 1; do
    ip -n "${TAG}h$h" addr add "10.214.$k.$((h + 1))/24" dev "rail$k" || exit 1
    ip -n "${TAG}h$h" link set "rail$k" up || exit 1
  done
done
for _ in $(seq 1 50); do
  ip netns exec "${TAG}h0" ping -c1 -W1 10.214.1.2 >/dev/null 2>&1 && break
  sleep 0.1
done
tx() { ip netns exec "${TAG}h1" cat "/sys/class/net/rail$1/statistics/tx_bytes"; }
before0=$(tx 0)
before1=$(tx 1)
port=$((20000 + RANDOM % 20000))
bytes=$((64 << 20))
out=/tmp/${TAG}_rails
pids=()
for r in 0 1; do
  ip netns exec "${TAG}h$r" env COLL_RANK=$r COLL_NRANKS=2 COLL_LOCAL_RANK=0 COLL_COMM_ID=10.214.0.1:$port \
    COLL_SOCKET_IFNAME=rail COLL_HOSTID=${TAG}h$r COLL_MIN_NCHANNELS=2 COLL_MAX_NCHANNELS=2 \
    COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET \
    timeout 120 "$B/perf_tests/all_reduce_perf" -b $bytes -e $bytes -n 5 -w 1 -c 1 >"$out.$r" 2>&1 &
  pids+=($!)
done
rc=0
for r in 0 1; do
  wait "${pids[$r]}" || { echo "rank $r failed:"; tail -20 "$out.$r"; rc=1; }
done
if [ $rc -eq 0 ]; then
  grep -q "Out of bounds values : 0 OK" "$out.0" || { echo "no verified result:"; tail -20 "$out.0"; rc=1; }
  grep -q "socket backend: rail0 (10.214.0.2.*), rail1 (10.214.1.2" "$out.1" ||
    { echo "rank 1 did not see both rails:"; grep "socket backend" "$out.1"; rc=1; }
  for k in 0 1; do
    grep -q "channel $k from rank 0: net device $k of 2 (rail$k)" "$out.1" ||
      { echo "channel $k of rank 1 is not on rail$k:"; grep "net device" "$out.1"; rc=1; }
  done
  # 6 allreduces of 64 MiB, 2 ranks: each rank sends 64 MiB per operation, half per rail.
  d0=$(($(tx 0) - before0))
  d1=$(($(tx 1) - before1))
  echo "rail0 carried $d0 bytes, rail1 $d1 bytes out of host 1"
  for d in $d0 $d1; do
    [ "$d" -ge $((6 * bytes / 4)) ] || { echo "a rail carried less than a quarter of the data"; rc=1; }
  done
fi
rm -f "$out".*
exit $rc

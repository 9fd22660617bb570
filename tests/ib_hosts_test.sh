#!/usr/bin/env bash
# The ib net backend end to end: multi-process collectives across two and three simulated
# hosts (collrun --nodes N) with every inter-host connection on ib over the verbs
# emulation (COLL_NET=IB, COLL_IB_VERBS_LIB=libcoll_verbs_emu.so, a fabric of this run's
# own), each benchmark checking its results (a wrong value fails it).
# Usage: ib_hosts_test.sh BUILD_DIR VERBS_EMU_LIB [quick]
set -uo pipefail
B=$1; EMU=$2; MODE=${3:-full}
P=$B/perf_tests; R=$B/tools/collrun
fabric=/coll_ib_hosts_$$
export COLL_NET=IB COLL_IB_VERBS_LIB=$EMU COLL_VERBS_EMU_FABRIC=$fabric COLL_SOCKET_IFNAME=lo
export COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET
log=$(mktemp); trap 'rm -f $log /dev/shm${fabric}' EXIT

# ib carried data both ways and the socket backend never started.
check() {
  for dir in send receive; do
    n=$(grep -c "ib $dir .*: first data delivered" $log)
    [ "$n" -gt 0 ] || { echo "no ib $dir connection delivered data ($*)"; return 1; }
  done
  if grep -q "socket backend:" $log; then echo "the socket backend was started ($*)"; return 1; fi
  if grep -q "WARN" $log; then grep WARN $log | head -5; echo "warnings ($*)"; return 1; fi
}

run() {  # ranks hosts benchmark args...
  local n=$1 h=$2 b=$3; shift 3
  $R -np $n --nodes $h --timeout 240 -- $P/${b}_perf "$@" > $log 2>&1 ||
    { tail -40 $log; echo "FAILED: $b with $n ranks on $h hosts over ib: $*"; exit 1; }
  check "$b $n/$h" || { tail -40 $log; exit 1; }
}

small="-b 8 -e 300K -f 17 -n 2 -w 1"
shapes="2:2 3:3 4:2 5:3 8:2 8:3"
[ "$MODE" = quick ] && shapes="2:2 5:3"
for shape in $shapes; do
  n=${shape%:*}; h=${shape#*:}
  # Every type and op where the collective reduces, one type where it only moves data, on
  # two shapes; floats on the others (the transport moves bytes whatever their type, and
  # the sweep's sizes give odd byte counts): the whole grid on all six took 4.3 minutes.
  types="-d float"; ops=""; moved="-d float"
  case "$shape" in 2:2|5:3) types="-d all"; ops="-o all"; moved="-d all" ;; esac
  for b in all_reduce reduce_scatter; do run $n $h $b $small $types $ops; done
  run $n $h reduce $small $types $ops -r all
  run $n $h broadcast $small $moved -r all
  for b in all_gather sendrecv; do run $n $h $b $small $moved; done
  run $n $h alltoall $small $moved  # every cross-host pair connected
  for algo in allreduce:ring allreduce:tree; do COLL_ALGO=$algo run $n $h all_reduce $small -d float; done
  echo "ok: $n ranks on $h hosts"
done

# Several QPs per connection (each message split across them), RoCE addressing (GIDs),
# and messages of several FIFO slots.
COLL_IB_QPS_PER_CONNECTION=3 run 4 2 all_reduce -b 8 -e 4M -f 8 -n 2 -w 1 -d float
grep -q "connected, 3 QP(s)" $log || { echo "COLL_IB_QPS_PER_CONNECTION=3 did not give 3 QPs"; exit 1; }
COLL_VERBS_EMU_LINK=eth run 4 2 all_reduce -b 8 -e 4M -f 8 -n 2 -w 1 -d float
grep -q "RoCE" $log || { echo "the RoCE link was not seen as RoCE"; exit 1; }
# The device path (emulated on host threads): the proxy thread drives the ib connections.
COLL_DEVICE_EMULATE=1 run 4 2 all_reduce -b 8 -e 4M -f 8 -n 2 -w 1 -d float
COLL_DEVICE_EMULATE=1 run 5 3 all_gather $small -d int32
COLL_DEVICE_EMULATE=1 run 8 2 alltoall $small -d float
# GPUDirect RDMA on the emulation (a memfd stands in for GPU memory and its dma-buf): every
# device connection registers its slots through ibv_reg_dmabuf_mr, and every receive is
# flushed by an RDMA READ over the receiver's loopback QP before the proxy publishes it.
COLL_NET_GDR_LEVEL=SYS COLL_DEVICE_EMULATE=1 run 4 2 all_reduce -b 8 -e 4M -f 8 -n 2 -w 1 -d float
grep -q "GPUDirect RDMA on: .*registered as dma-buf" $log || { echo "no connection used GPUDirect RDMA"; exit 1; }
if grep -q "GPUDirect RDMA off" $log; then echo "a device connection staged"; exit 1; fi
COLL_NET_GDR_LEVEL=SYS COLL_DEVICE_EMULATE=1 COLL_VERBS_EMU_LINK=eth run 5 3 reduce_scatter $small -d float
echo "ok"

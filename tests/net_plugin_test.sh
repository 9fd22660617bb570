#!/usr/bin/env bash
# The net plugin end to end: multi-process collectives across two simulated hosts
# (collrun --nodes 2) with the inter-host connections on the test plugin
# (tests/net_plugin/socket_plugin.cc), found by name through NCCL_NET_PLUGIN.
# Usage: net_plugin_test.sh BUILD_DIR PLUGIN_DIR
set -uo pipefail
B=$1; D=$2
P=$B/perf_tests; R=$B/tools/collrun
export COLL_SOCKET_IFNAME=lo LD_LIBRARY_PATH=$D${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=NET
log=$(mktemp); trap 'rm -f $log' EXIT

# Lines "TestSock: <dir> connection closed after N messages, B bytes": fail unless some
# connection of each direction carried messages.
carried() {
  for dir in send receive; do
    n=$(grep -o "TestSock: $dir connection closed after [0-9]* messages" $log | awk '{s += $6} END {print s + 0}')
    [ "$n" -gt 0 ] || { echo "no $dir connection of the plugin carried a message"; return 1; }
    echo "plugin $dir connections: $n messages"
  done
}

check() {  # what: the plugin loaded with ABI v$1, carried traffic, the socket backend never started
  grep -q "net plugin TestSock loaded ($2): ABI v$1, 1 device" $log || { echo "no INFO line of the plugin v$1 loading"; return 1; }
  carried || return 1
  if grep -q "socket backend:" $log; then echo "the socket backend was started"; return 1; fi
}

# COLL_NET names the plugin: 4 ranks on 2 hosts, sizes from 8 bytes to several FIFO slots.
COLL_NET=TestSock NCCL_NET_PLUGIN=testsock $R -np 4 --nodes 2 --timeout 240 -- \
  $P/all_reduce_perf -b 8 -e 4M -f 8 -n 2 -w 1 -d float -c 1 > $log 2>&1 || { cat $log; echo "allreduce over the plugin failed"; exit 1; }
check 12 testsock || { cat $log; exit 1; }
grep -E '^ +[0-9]+ ' $log | tail -3

# COLL_NET unset: a plugin that loads is the default (NCCL's rule); here the version-8
# table (int sizes), 3 ranks on 2 hosts, ring and tree.
for algo in allreduce:ring allreduce:tree; do
  COLL_ALGO=$algo NCCL_NET_PLUGIN=testsock8 $R -np 3 --nodes 2 --timeout 240 -- \
    $P/all_reduce_perf -b 1K -e 1M -f 32 -n 2 -w 1 -d int32 -c 1 > $log 2>&1 || { cat $log; echo "$algo over the v8 plugin failed"; exit 1; }
  check 8 testsock8 || { cat $log; exit 1; }
done
# GPUDirect RDMA on the device emulation (host threads stand in for kernels, a memfd for
# GPU memory and its dma-buf): the plugin takes GPU memory (TESTSOCK_GPU=1), the level
# allows any path, so device connectors put their slots there, register them through
# regMrDmaBuf and flush every receive before a kernel may read it.
TESTSOCK_GPU=1 COLL_NET_GDR_LEVEL=SYS COLL_DEVICE_EMULATE=1 COLL_NET=TestSock NCCL_NET_PLUGIN=testsock \
  $R -np 4 --nodes 2 --timeout 240 -- $P/all_reduce_perf -b 8 -e 4M -f 8 -n 2 -w 1 -d float -c 1 > $log 2>&1 ||
  { cat $log; echo "allreduce with GPUDirect RDMA over the plugin failed"; exit 1; }
check 12 testsock || { cat $log; exit 1; }
grep -q "GPUDirect RDMA on: PCI path SYS .*registered as dma-buf" $log || { cat $log; echo "no connection used GPUDirect RDMA"; exit 1; }
if grep -q "GPUDirect RDMA off" $log; then cat $log; echo "a device connection staged"; exit 1; fi
flushes=$(grep -o "receive connection closed after .* [0-9]* flushes" $log | awk '{s += $(NF-1)} END {print s + 0}')
[ "$flushes" -gt 0 ] || { cat $log; echo "no receive into GPU memory was flushed"; exit 1; }
echo "GPUDirect RDMA over the plugin: $flushes flushes"
echo "ok"

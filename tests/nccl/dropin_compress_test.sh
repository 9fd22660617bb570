#!/usr/bin/env bash
# COLL_COMPRESS reaches frameworks through the drop-in, set as NCCL_COMPRESS like any
# NCCL_ variable: 3 processes (FIFOs, so values cross encoded; no one-shots) run the
# smoke allreduces of comm_basics (small integers: exact in fp16), and every rank says at
# INFO that compression is on.   Usage: dropin_compress_test.sh NCCL_API_TEST_OURS
set -uo pipefail
export NCCL_COMPRESS=fp16 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NCCL_SOCKET_IFNAME=lo COLL_ONESHOT_BYTES=0
out=$(NCCL_API_TEST_MODE=procs NCCL_API_TEST_NRANKS=3 "$1" --warn NoTests comm_basics 2>&1) || { echo "$out"; exit 1; }
echo "$out" | tail -3
on=$(echo "$out" | grep -c 'compression on')
[ "$on" -eq 3 ] || { echo "FAIL: $on of 3 ranks said compression is on"; exit 1; }

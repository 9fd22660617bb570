#!/usr/bin/env bash
# The struct layouts, sizes and constants two programs print, one built against NVIDIA's
# nccl.h and one against ours, are the same lines.   Usage: layout_test.sh NVIDIA OURS
set -uo pipefail
diff -u --label nvidia <("$1") --label ours <("$2") || exit 1
echo "PASS: $("$1" | wc -l) lines identical"

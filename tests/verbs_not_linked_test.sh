#!/usr/bin/env bash
# The library loads libibverbs at run time only (COLL_IB_VERBS_LIB): it links other
# libraries, but not that one.   Usage: verbs_not_linked_test.sh LIBRARY
set -uo pipefail
needed=$(readelf -d "$1" | grep NEEDED) || { echo "FAIL: readelf found no NEEDED entries in $1"; exit 1; }
if echo "$needed" | grep -i ibverbs; then echo "FAIL: $1 links libibverbs"; exit 1; fi
exit 0

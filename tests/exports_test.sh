#!/usr/bin/env bash
# libcollectives.so exports the coll* C API alone (src/api/exports.map): every other
# defined dynamic symbol could bind to, or be bound by, a name of another library in the
# same process.   Usage: exports_test.sh LIBRARY
set -uo pipefail
syms=$(nm -D --defined-only "$1" | awk '{print $3}' | sed 's/@.*//' | sort -u) || { echo "FAIL: nm cannot read $1"; exit 1; }
api=$(grep -c '^coll' <<<"$syms")
[ "$api" -ge 60 ] || { echo "FAIL: $1 exports only $api coll* functions"; exit 1; }
other=$(grep -Ev '^(coll|_init$|_fini$|_edata$|_end$|__bss_start$)' <<<"$syms")
if [ -n "$other" ]; then
  echo "FAIL: $1 exports $(wc -l <<<"$other") symbols outside its API, e.g.:"
  head -5 <<<"$other" | sed 's/^/  /'
  exit 1
fi
echo "$1: $api coll* functions, nothing else"

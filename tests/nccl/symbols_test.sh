#!/usr/bin/env bash
# The drop-in's exported names against NVIDIA's nccl.h.
# Usage: symbols_test.sh BUILD_DIR [SOURCE_DIR]
#   - every function NVIDIA's nccl.h declares (ncclX and pncclX; NCCL_NVIDIA_HEADER, by
#     default the release scripts/deps.sh puts in .venv/nccl-reference)
#     is a defined dynamic symbol of BUILD_DIR/libnccl.so.2;
#   - its SONAME is libnccl.so.2 and BUILD_DIR/libnccl.so (the link-time name) exists;
#   - with SOURCE_DIR: our include/collectives/nccl/nccl.h declares the same functions,
#     each with a prototype compatible with NVIDIA's (a C file including NVIDIA's header
#     redeclares every function as ours declares it; the compiler refuses any mismatch).
# Exit 77 ("skipped", CTest SKIP_RETURN_CODE) when NVIDIA's header is absent.
set -uo pipefail
B=${1:?usage: symbols_test.sh BUILD_DIR [SOURCE_DIR]}
S=${2:-}
NV=${NCCL_NVIDIA_HEADER:-$(dirname "$0")/../../.venv/nccl-reference/nvidia/nccl/include/nccl.h}
LIB=$B/libnccl.so.2
if [ ! -f "$NV" ]; then echo "SKIP: $NV not found (NVIDIA's header is the reference)"; exit 77; fi
if [ ! -e "$LIB" ]; then echo "FAIL: $LIB not found"; exit 1; fi
fail=0

# Function names a header declares: comments and preprocessor lines removed, then every
# "<return type> [p]ncclName(" at the start of a declaration.
declared() {
  perl -0777 -ne '
    s{/\*.*?\*/}{}gs; s{//[^\n]*}{}g;            # comments
    s{^[ \t]*#(?:[^\n]*\\\n)*[^\n]*}{}gm;         # preprocessor lines, with continuations
    s{__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)}{}g;
    while (/(?:^|[;}])\s*(?:const\s+)?\w+\s*\**\s*\b(p?nccl\w+)\s*\(/gs) { print "$1\n" }' "$1" | sort -u
}

want=$(declared "$NV")
nwant=$(wc -l <<<"$want")
if [ "$nwant" -lt 60 ]; then echo "FAIL: found only $nwant functions in $NV; the extraction is broken"; exit 1; fi
for f in $(grep '^nccl' <<<"$want"); do
  grep -qx "p$f" <<<"$want" || echo "note: NVIDIA's header declares $f without p$f"
done

have=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TtWiV]$/ {print $3}' | sed 's/@.*//' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
if [ -n "$missing" ]; then
  echo "FAIL: functions of $NV not defined by $LIB:"
  sed 's/^/  /' <<<"$missing"
  fail=1
fi
extra=$(comm -13 <(echo "$want") <(grep -E '^p?nccl' <<<"$have"))
[ -n "$extra" ] && { echo "note: $LIB also exports (not in NVIDIA's header):"; sed 's/^/  /' <<<"$extra"; }
other=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sed 's/@.*//' | grep -Ev '^(p?nccl|_init$|_fini$|_edata$|_end$|__bss_start$)' | sort -u)
# Only NCCL's names: anything else could bind a program's or another library's symbol.
[ -n "$other" ] && { echo "FAIL: $LIB exports $(wc -l <<<"$other") symbols that are not NCCL's, e.g.:"; head -5 <<<"$other" | sed 's/^/  /'; fail=1; }

soname=$(readelf -d "$LIB" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libnccl.so.2" ]; then echo "FAIL: SONAME of $LIB is '$soname', want libnccl.so.2"; fail=1; fi
if [ ! -e "$B/libnccl.so" ]; then echo "FAIL: $B/libnccl.so (the name -lnccl links) does not exist"; fail=1; fi
if readelf -d "$LIB" | grep -q 'NEEDED.*libcuda'; then echo "FAIL: $LIB needs libcuda (it must load without a driver)"; fail=1; fi

if [ -n "$S" ]; then
  OURS=$S/include/collectives/nccl/nccl.h
  if [ ! -f "$OURS" ]; then echo "FAIL: $OURS not found"; exit 1; fi
  # Ours declares through a macro: read it preprocessed.
  pre=$(mktemp --suffix=.h); chk=$(mktemp --suffix=.c); trap 'rm -f "$pre" "$chk"' EXIT
  gcc -E -P -x c "$OURS" >"$pre" || { echo "FAIL: gcc -E $OURS"; exit 1; }
  ours=$(declared "$pre")
  d1=$(comm -23 <(echo "$want") <(echo "$ours")); d2=$(comm -13 <(echo "$want") <(echo "$ours"))
  [ -n "$d1" ] && { echo "FAIL: declared by NVIDIA's header, not by ours:"; sed 's/^/  /' <<<"$d1"; fail=1; }
  [ -n "$d2" ] && { echo "FAIL: declared by ours, not by NVIDIA's header:"; sed 's/^/  /' <<<"$d2"; fail=1; }
  { echo '#include <nccl.h>'
    perl -0777 -ne 'while (/((?:const\s+)?\w+\s*\**\s*\bp?nccl\w+\s*\([^;{}]*\)\s*;)/g) { print "$1\n" }' "$pre"
  } >"$chk"
  # NCCL_OS_LINUX: NVIDIA's header declares ncclResetDebugInit only for Linux builds.
  if ! out=$(gcc -std=c99 -DNCCL_OS_LINUX -fsyntax-only -I"$(dirname "$NV")" -I/usr/local/cuda/include "$chk" 2>&1); then
    echo "FAIL: prototypes of our header conflict with NVIDIA's:"
    grep -E 'error|note: previous' <<<"$out" | head -40 | sed 's/^/  /'
    fail=1
  fi
  nproto=$(grep -c 'nccl' "$chk")
  echo "prototypes compared: $((nproto - 1))"
fi

echo "functions in NVIDIA's header: $nwant; exported by $LIB: $(grep -cE '^p?nccl' <<<"$have"); missing: $(grep -c . <<<"$missing")"
[ $fail -eq 0 ] && echo "PASS"
exit $fail

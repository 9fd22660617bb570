#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang and runs each for SECONDS (default
# 10), starting from its seed corpus (tests/fuzz/corpus/<target>/; new inputs go to a
# scratch copy, never into the tree). Prints executions and crashes per target; exits 1 on
# any crash, leaving the crashing input under $FUZZ_WORK/crashes/ (re-run it with
# build-fuzz/tests/fuzz/fuzz_<target> <file>; keep it in the target's corpus once fixed).
#   scripts/fuzz.sh [SECONDS]      env: BUILD_DIR (build-fuzz), FUZZ_WORK (a temporary
#                                  folder), FUZZ_TARGETS (all), FUZZ_JOBS (build jobs, 2)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-10}
BUILD_DIR=${BUILD_DIR:-build-fuzz}
TARGETS=${FUZZ_TARGETS:-"bootstrap unique_id socket_net ib_net topology params"}
WORK=${FUZZ_WORK:-$(mktemp -d /tmp/coll-fuzz.XXXXXX)}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/deps.sh installs clang)" >&2; exit 1; }

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja} cmake -S . -B "$BUILD_DIR" -DCOLL_FUZZ=ON -DCOLL_BUILD_TESTS=OFF -DCOLL_BUILD_TOOLS=OFF \
    -DCOLL_BUILD_PYTORCH=OFF -DCOLL_ENABLE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
build_log=$(mktemp /tmp/coll-fuzz-build.XXXXXX)
if ! cmake --build "$BUILD_DIR" -j "${FUZZ_JOBS:-2}" --target fuzz_all >"$build_log" 2>&1; then
  echo "fuzz.sh: building the fuzz targets failed:" >&2
  grep -v '^\[' "$build_log" | tail -40 >&2
  exit 1
fi
rm -f "$build_log"

mkdir -p "$WORK/crashes"
failed=0 total=0
printf '%-12s %12s %8s %8s\n' target executions seconds crashes
for t in $TARGETS; do
  mkdir -p "$WORK/corpus/$t"
  log="$WORK/$t.log"
  rc=0
  # -timeout: an input taking 25 s is a hang, reported as a crash; -rss_limit_mb: so is
  # an allocation of what an input says.
  "$BUILD_DIR/tests/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=25 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$WORK/crashes/$t-" "$WORK/corpus/$t" "tests/fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
  crashes=$(find "$WORK/crashes" -name "$t-*" | wc -l)
  [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes=1  # died without an artifact
  printf '%-12s %12s %8s %8s\n' "$t" "${execs:-?}" "${secs:-?}" "$crashes"
  total=$((total + ${execs:-0}))
  if [ "$crashes" -ne 0 ]; then
    failed=1
    grep -E "ERROR|SUMMARY|violated|runtime error" "$log" | head -5 >&2 || true
  fi
done
echo "total executions: $total  (work: $WORK)"
exit $failed

#!/usr/bin/env bash
# perf_tests/plot draws a table right after the set-up (scripts/deps.sh installs
# matplotlib): a short all_reduce_perf table becomes a non-empty PNG.
# Usage: perf_plot_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
B=$1 S=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$B/perf_tests/all_reduce_perf" -t 2 -b 8 -e 64K -f 8 -n 2 -w 1 > "$d/t.txt"
"$S/perf_tests/plot" -o "$d/p.png" "$d/t.txt:ours"
test -s "$d/p.png"

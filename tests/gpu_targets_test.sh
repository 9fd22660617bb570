#!/usr/bin/env bash
# scripts/gpu/targets.py (the device path's targets table that scripts/gpu/check.sh
# prints) over fixture logs holding the H100 figures of 2026-11-25, over no logs at all,
# and over three 1-rank rounds where one sample of ours is 10x off (the medians decide)
# and one round stopped before 1 GiB (the others still cover it).
# Usage: gpu_targets_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
diff <(python3 scripts/gpu/targets.py tests/gpu_targets) tests/gpu_targets/expected.txt
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
test "$(python3 scripts/gpu/targets.py "$d" | grep -c 'not run')" -eq 11
python3 scripts/gpu/targets.py tests/gpu_targets/rounds > "$d/rounds.txt"
grep -q 'worst 1.04x at 8 B (5.2 vs 5.0 us, medians of 3 rounds) *yes' "$d/rounds.txt"

#!/usr/bin/env bash
# A commit against an older one, over 8 B-128 MiB: builds both (Release, host path only,
# from `git archive` into a scratch folder: the checkout is not touched), then runs
# scripts/compare/builds.sh twice, small sizes with many iterations and large ones with
# few, and prints both tables (new/old per size: <1 is faster).
#   scripts/compare/commits.sh OLD_COMMIT [NEW_COMMIT (default HEAD)] [ROUNDS (default 5)]
# WORK [/tmp/coll-commits] keeps the sources and builds by commit, so a second comparison
# against the same commit builds nothing again. COLL_SHM_DISABLE=1 compares over TCP.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OLD=${1:?usage: commits.sh OLD_COMMIT [NEW_COMMIT] [ROUNDS]}
NEW=${2:-HEAD}
ROUNDS=${3:-5}
WORK=${WORK:-/tmp/coll-commits}
mkdir -p "$WORK"

# The build folder of commit $1 (built when missing).
build() {
  local sha dir
  sha=$(git -C "$ROOT" rev-parse --short=12 "$1^{commit}")
  dir="$WORK/$sha"
  if [ ! -f "$dir/CMakeLists.txt" ]; then
    mkdir -p "$dir"
    git -C "$ROOT" archive "$sha" | tar -x -C "$dir"
  fi
  local launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$dir" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLL_ENABLE_CUDA=OFF \
    -DCOLL_BUILD_PYTORCH=OFF "${launcher[@]}" >"$dir/configure.log" 2>&1 ||
    { echo "commits.sh: configuring $sha failed (see $dir/configure.log)" >&2; return 1; }
  ninja -C "$dir/build" all_reduce_perf collrun >"$dir/build.log" 2>&1 ||
    { echo "commits.sh: building $sha failed (see $dir/build.log)" >&2; return 1; }
  echo "$dir/build"
}

OLD_BUILD=$(build "$OLD")
NEW_BUILD=$(build "$NEW")
echo "old: $(git -C "$ROOT" log -1 --format='%h %s' "$OLD")"
echo "new: $(git -C "$ROOT" log -1 --format='%h %s' "$NEW")"
echo "## 8 B - 128 KiB, 2000 iterations, $ROUNDS rounds"
PERF_ARGS="-b 8 -e 128K -f 4 -n 2000 -w 100" bash "$ROOT/scripts/compare/builds.sh" "$OLD_BUILD" "$NEW_BUILD" "$ROUNDS"
echo "## 2 MiB - 128 MiB, 10 iterations, $ROUNDS rounds"
PERF_ARGS="-b 2M -e 128M -f 4 -n 10 -w 2" bash "$ROOT/scripts/compare/builds.sh" "$OLD_BUILD" "$NEW_BUILD" "$ROUNDS"

#!/usr/bin/env bash
# Fails when a C++/CUDA source of the project differs from what .clang-format makes of it
# (clang-format 14, Debian 12's). Prints the files that differ; `clang-format -i` on them
# fixes it. Reports skipped (exit 77) where clang-format is not installed.
set -euo pipefail
cd "${1:?source dir}"
command -v clang-format >/dev/null || { echo "skipped: clang-format is not installed"; exit 77; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "skipped: not a git checkout"; exit 77; }
mapfile -t files < <(git ls-files 'src/*.h' 'src/*.cc' 'src/*.cu' 'tests/*.h' 'tests/*.cc' 'perf_tests/*.h' \
                       'perf_tests/*.cc' 'tools/*.cc' 'examples/*.cc' 'python/csrc/*.h' 'python/csrc/*.cc')
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f"
    bad=1
  fi
done
echo "format: ${#files[@]} files checked with $(clang-format --version | head -1)"
exit $bad

#!/usr/bin/env bash
# Fails when a Catch test case's name holds a ';': ctest splits its lists on it, so the
# discovered test never runs as itself and its two fragments fail (it happened twice).
# Prints each such name.
set -euo pipefail
cd "${1:?source dir}"
if grep -n -E 'TEST_CASE\("[^"]*;' tests/*.cc; then
  echo "the test names above hold ';': word them without"
  exit 1
fi
echo "test names: none holds ';'"

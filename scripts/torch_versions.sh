#!/usr/bin/env bash
# Builds the PyTorch backend against other torch releases and runs tests/torch with each:
# how docs/PYTORCH.md's table of verified versions is checked (CI tests the pinned one).
#
#   bash scripts/torch_versions.sh 2.4.1 2.11.0
#
# Each release gets a virtual environment with torch from PyPI (a CUDA build: a few GB
# the first time) and a build folder, under TORCH_VERSIONS_DIR (default
# /tmp/coll-torch-versions), kept for the next run. The library is built for CPU only.
# Prints one line per test file and release; exit 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { sed -n 2,10p "$0"; exit 2; }
DIR=${TORCH_VERSIONS_DIR:-/tmp/coll-torch-versions}
PY=${PYTHON:-python3}
# File and world size: every file of tests/torch once, the largest world it is run with in CI.
TESTS=("test_ops.py 4" "test_init.py 3" "test_ddp.py 4" "test_groups.py 4" "test_coalesce.py 3" "test_fsdp.py 4"
       "test_faults.py 3" "test_examples.py 2")
fail=0
for v in "$@"; do
  env="$DIR/venv-$v" build="$DIR/build-$v"
  if [ ! -x "$env/bin/python" ] || ! "$env/bin/python" -c "import torch" 2> /dev/null; then
    # torch before 2.5 was built against NumPy 1.
    numpy=numpy
    "$PY" -c "import sys; sys.exit(tuple(map(int, '$v'.split('.')[:2])) >= (2, 5))" && numpy="numpy<2"
    "$PY" -m venv "$env" && "$env/bin/pip" install -q "torch==$v" "$numpy" pytest expecttest ||
      { echo "torch $v: cannot install"; fail=1; continue; }
  fi
  if ! { cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLL_ENABLE_CUDA=OFF -DCOLL_BUILD_TESTS=OFF \
           -DCOLL_BUILD_TOOLS=OFF -DCOLL_BUILD_PYTORCH=ON -DCOLL_TORCH_PYTHON="$env/bin/python" > "$build.log" 2>&1 &&
         cmake --build "$build" --target torch_collectives >> "$build.log" 2>&1; }; then
    echo "torch $v: build failed ($build.log)"
    grep -m5 -E "error|Error" "$build.log"
    fail=1
    continue
  fi
  for spec in "${TESTS[@]}"; do
    read -r file n <<< "$spec"
    out=$(PYTHONPATH="$build/python" NCCL_SOCKET_IFNAME=lo timeout 900 "$env/bin/python" -m pytest "tests/torch/$file" \
      -p no:cacheprovider --backend collectives --nranks "$n" -q -rs 2>&1)
    rc=$?
    echo "torch $v $file n=$n: $(grep -E "passed|failed" <<< "$out" | tail -1)"
    grep -E "^SKIPPED|^FAIL" <<< "$out" | head -8 | sed 's/^/    /'
    [ "$rc" -eq 0 ] || fail=1
  done
done
exit $fail

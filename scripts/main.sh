#!/usr/bin/env bash
# The main job: build, install the package into .venv with pip, then a float32 allreduce
# across 4 local processes over shared memory and over TCP, printing results and bandwidth.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/install_python.sh
BUILD_DIR=${BUILD_DIR:-build}
echo
"$BUILD_DIR"/examples/allreduce_example -np 4 1M 64M
COLL_SHM_DISABLE=1 "$BUILD_DIR"/examples/allreduce_example -np 4 1M 64M

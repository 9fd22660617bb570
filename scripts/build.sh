#!/usr/bin/env bash
# Configures and builds into ./build (BUILD_DIR overrides). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build}
# Ninja for a fresh folder (CMake keeps a configured folder's generator): it compiles the
# test programs while nvcc compiles the kernels, where make waits for the library first
# (a clean build on 2 cores: 483 s against about 520).
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}
# COLL_CUDA_ARCHITECTURES (e.g. 90): the GPU architectures of the device code, where the
# default (80;90) is more than needed.
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  ${COLL_CUDA_ARCHITECTURES:+-DCMAKE_CUDA_ARCHITECTURES=$COLL_CUDA_ARCHITECTURES} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

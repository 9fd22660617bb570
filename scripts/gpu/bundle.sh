#!/usr/bin/env bash
# Builds here what scripts/gpu/check.sh needs on a GPU machine, into .gpu/ (ignored by
# git), to be copied there beside the sources: a GPU machine's image may have CUDA but
# not Debian's hwloc, Catch2 or CLI11, and may allow no installs. Release, sm_90 only
# (H100/H200), stripped;
# the shared libraries the binaries need beside them.
#
#   bash scripts/gpu/bundle.sh        # then, on the GPU machine with .gpu/ copied: bash scripts/gpu/check.sh
#   bash scripts/gpu/bundle.sh torch [PYTHON]  # .gpu/hwloc for `gpu/check.sh torch`, which builds
#                                     # there; with PYTHON, also .gpu/prebuilt against its torch
#
# NCCL_TESTS_BUILD=DIR: a folder of NVIDIA's nccl-tests binaries, built by hand against
# NVIDIA's nccl.h for sm_90 (docs/NCCL.md, "Checked", says how; nothing here
# builds them). Both forms take every *_perf of it into the bundle: check.sh times NCCL
# with them, and its torch form runs them over our libnccl.so.2.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
if [ "${1:-}" = torch ]; then
  # hwloc's header (the build needs it) and library (and libudev, which it loads), copies
  # rather than links. The library is dlopened where found; without it the probe reads sysfs.
  rm -rf .gpu/hwloc
  mkdir -p .gpu/hwloc/include .gpu/hwloc/lib
  cp -r /usr/include/hwloc.h /usr/include/hwloc .gpu/hwloc/include/
  cp -L /usr/lib/x86_64-linux-gnu/libhwloc.so.15 .gpu/hwloc/lib/
  cp -L /usr/lib/x86_64-linux-gnu/libhwloc.so.15 .gpu/hwloc/lib/libhwloc.so
  cp -L /lib/x86_64-linux-gnu/libudev.so.1 .gpu/hwloc/lib/
  # With a Python whose torch is the GPU machine's (PYTHON: the same torch and Python
  # minor version), the library, the backend and the two programs check.sh runs first
  # built here too: the machine then skips its own build (about 140 s of its time).
  if [ -n "${2:-}" ]; then
    PB=build-gpu-torch
    cmake -S . -B "$PB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCOLL_BUILD_TESTS=OFF \
      -DCOLL_BUILD_TOOLS=ON -DCOLL_BUILD_PYTORCH=ON -DCOLL_TORCH_PYTHON="$2" >/dev/null
    cmake --build "$PB" -j"$(nproc)" --target torch_collectives nccl_dropin all_reduce_perf collrun
    rm -rf .gpu/prebuilt
    mkdir -p .gpu/prebuilt/python/torch_collectives .gpu/prebuilt/perf_tests .gpu/prebuilt/tools
    cp -L "$PB/libcollectives.so.0" "$PB/libnccl.so.2" .gpu/prebuilt/
    cp "$PB"/python/torch_collectives/* .gpu/prebuilt/python/torch_collectives/
    cp "$PB/perf_tests/all_reduce_perf" .gpu/prebuilt/perf_tests/
    cp "$PB/tools/collrun" .gpu/prebuilt/tools/
    strip .gpu/prebuilt/*.so* .gpu/prebuilt/python/torch_collectives/*.so .gpu/prebuilt/perf_tests/* .gpu/prebuilt/tools/*
    "$2" -c 'import sys, torch; print("built beside the source: Python", sys.version.split()[0], "torch", torch.__version__)' \
      > .gpu/prebuilt/ORIGIN
  fi
  # nccl-tests' binaries are near copies of each other: 46 MB stripped, under 1 MB packed.
  rm -rf .gpu/nccl-tests .gpu/nccl-tests.tar.xz
  if [ -n "${NCCL_TESTS_BUILD:-}" ]; then
    mkdir -p .gpu/nccl-tests
    cp "$NCCL_TESTS_BUILD"/*_perf .gpu/nccl-tests/
    strip .gpu/nccl-tests/*
    (cd .gpu && tar cf - nccl-tests | xz -9 -T2 > nccl-tests.tar.xz && rm -rf nccl-tests)
  fi
  du -sh .gpu/hwloc .gpu/prebuilt .gpu/nccl-tests.tar.xz 2>/dev/null
  exit 0
fi
B=build-gpu
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DCOLL_ENABLE_CUDA=ON >/dev/null
TARGETS=(gpu_tests reduce_kernel_perf handshake_perf collrun colltopo all_reduce_perf all_gather_perf broadcast_perf reduce_perf
         reduce_scatter_perf sendrecv_perf alltoall_perf gather_perf scatter_perf)
cmake --build "$B" -j"$(nproc)" --target "${TARGETS[@]}"
rm -rf .gpu
mkdir -p .gpu/build/tests .gpu/build/perf_tests .gpu/build/tools .gpu/build/nccl-tests .gpu/lib
# NCCL's own benchmark, the peer check.sh times beside ours (NCCL_TESTS_BUILD, above).
if [ -n "${NCCL_TESTS_BUILD:-}" ]; then
  cp "$NCCL_TESTS_BUILD"/*_perf .gpu/build/nccl-tests/
else
  echo "no NCCL_TESTS_BUILD: no NCCL column on the GPU"
fi
cp "$B/tests/gpu_tests" .gpu/build/tests/
cp "$B/tools/collrun" "$B/tools/colltopo" .gpu/build/tools/
for t in "${TARGETS[@]}"; do
  [ -x "$B/perf_tests/$t" ] && cp "$B/perf_tests/$t" .gpu/build/perf_tests/
done
strip .gpu/build/*/*
# Libraries outside the C runtime, from this machine (Debian 12: glibc 2.36).
for lib in $(ldd .gpu/build/tests/gpu_tests .gpu/build/perf_tests/all_reduce_perf .gpu/build/tools/colltopo | awk '/=>/ {print $3}' | sort -u); do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
    *) cp -L "$lib" .gpu/lib/ ;;
  esac
done
# The bundle is kept under 64 MiB; the perf binaries are near copies of each other
# (each links the library), so one xz archive with a large window takes ~3 MB of ~60.
# scripts/gpu/check.sh unpacks it on the GPU machine.
(cd .gpu && tar cf - build lib | xz -9 -T2 > bundle.tar.xz && rm -rf build lib)
du -sh .gpu

#!/usr/bin/env bash
# Builds the project with a sanitizer into its own folder and runs the test suite there.
#
#   bash scripts/sanitize.sh asan [ctest args...]   AddressSanitizer + UndefinedBehaviorSanitizer
#   bash scripts/sanitize.sh tsan [ctest args...]   ThreadSanitizer
#
# Folders: build-asan, build-tsan (BUILD_DIR overrides). Extra arguments go to ctest
# (e.g. -R collective_ to run a part). The script fails if a test fails or if any process
# of any test (ranks started by collrun or forked by a test included, and those a test
# expects to fail) wrote a sanitizer report: reports go to files under $BUILD_DIR/reports
# (log_path), and they are printed at the end.
#
# Compilers: gcc/g++ (the normal build's), with the flags in CFLAGS/CXXFLAGS/LDFLAGS. The
# .cu files are compiled by nvcc, which gets none of them (CMake hands nvcc CMAKE_CUDA_FLAGS
# only): their host stubs are not instrumented, their device code cannot be. The programs
# that tests build themselves (tests/consumer) read the same exported variables.
#
# Left out, with the reason:
#  - the PyTorch backend (COLL_BUILD_PYTORCH=OFF, so the torch_* tests become the one
#    skipped torch_backend test): it is a module loaded into /usr/bin/python3, which is
#    not instrumented; a sanitizer runtime cannot be dlopened, only preloaded into the
#    interpreter, where it then reports on Python and libtorch themselves. The backend is
#    a thin layer over the C API, which the C and C++ tests run here.
#  - nothing else: [gpu] tests and gpu_launch_* skip without a GPU, as in the normal suite.
# Under tsan, scripts/tsan_suppressions.txt says why each race it hides is not one in the
# library.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
[ $# -gt 0 ] && shift
scale=1  # COLL_TEST_TIMEOUT_SCALE: the factor on the Catch2 programs' CTest timeouts
case "$kind" in
  asan) san="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;;
  tsan) san="-fsanitize=thread" scale=4 ;;
  *)
    echo "usage: $0 asan|tsan [ctest args...]" >&2
    exit 2
    ;;
esac
bash scripts/deps.sh
BUILD_DIR=${BUILD_DIR:-build-$kind}
src=$PWD
flags="$san -fno-omit-frame-pointer"
export CFLAGS="$flags" CXXFLAGS="$flags" LDFLAGS="$san"
# Device code for one architecture only: it is neither instrumented nor run here, and
# nvcc's second architecture cost CI minutes (CI at 764a140: 45.9 min in all).
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Ninja}  # as scripts/build.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCOLL_BUILD_PYTORCH=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCOLL_TEST_TIMEOUT_SCALE=$scale \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$san" \
  -DCMAKE_SHARED_LINKER_FLAGS="$san" -DCMAKE_MODULE_LINKER_FLAGS="$san" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"

reports="$src/$BUILD_DIR/reports"
rm -rf "$reports"
mkdir -p "$reports"
common="log_path=$reports/$kind:print_stacktrace=1"
# verify_asan_link_order=0: nccl_dropin_ld_preload preloads libnccl.so.2, which puts it
# ahead of libasan in the load order; the program itself links libasan, so it is there.
export ASAN_OPTIONS="$common:detect_leaks=1:verify_asan_link_order=0"
export UBSAN_OPTIONS="$common:halt_on_error=1"
# hwloc's pci plugin leaves libpciaccess's device list allocated and reachable only from
# libpciaccess's own globals, then dlcloses both: LeakSanitizer, scanning at exit, no longer
# sees those globals and reports every topology probe as a leak of about 1 KiB in an
# unnamed module. Not ours to free (the library calls hwloc_topology_destroy); kept loaded,
# the memory is seen as reachable. (An LSan suppression cannot name an unloaded module.)
pciaccess=$(ldconfig -p | awk '/libpciaccess\.so\.0 / && !f {print $NF; f = 1}')
if [ "$kind" = asan ] && [ -n "$pciaccess" ]; then export LD_PRELOAD="$pciaccess${LD_PRELOAD:+:$LD_PRELOAD}"; fi
# The suppressions file says why each entry is not a race in the library. history_size=4
# (512K accesses a thread) keeps the earlier access's stack, which a suppression must see.
export TSAN_OPTIONS="$common:second_deadlock_stack=1:history_size=4:suppressions=$src/scripts/tsan_suppressions.txt"

# The net plugin tests dlopen plugins by bare name, found through the test program's
# RUNPATH; the sanitizers intercept dlopen, so glibc sees their runtime as the caller and
# searches its (empty) run path instead. Name the plugin folder on the loader path.
export LD_LIBRARY_PATH="$src/$BUILD_DIR/tests/net_plugin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ThreadSanitizer without ctest arguments: every Catch2 case (label catch2: unit,
# threads-as-ranks, multi-process, net plugins, verbs and ib on the emulation, the NCCL
# API program in every mode) and the launcher's failure tests (launch_failure), the
# long sweeps taking one case in COLL_TEST_SHARE (tests/harness.h: each run of a sweep a
# different share, so together they still cross every collective, type, count and form),
# the NCCL API program's watchdogs NCCL_API_TEST_TIMEOUT_SCALE times longer.
if [ "$kind" = tsan ]; then
  export COLL_TEST_SHARE=${COLL_TEST_SHARE:-8} NCCL_API_TEST_TIMEOUT_SCALE=${NCCL_API_TEST_TIMEOUT_SCALE:-4}
  [ $# -eq 0 ] && set -- -L '^(catch2|launch_failure)$'
fi

status=0
start=$(date +%s)
ctest --test-dir "$BUILD_DIR" --output-on-failure --timeout 900 "$@" || status=$?
echo "$kind: ctest $* took $(($(date +%s) - start)) s"
if compgen -G "$reports/*" >/dev/null; then
  for f in "$reports"/*; do
    echo "==== $f"
    cat "$f"
  done
  echo "$kind: $(ls "$reports" | wc -l) sanitizer report(s) above" >&2
  status=1
fi
exit $status

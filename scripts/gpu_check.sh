#!/usr/bin/env bash
# On a lent GPU machine, from the repository root, with .gpu/ carried (scripts/gpu_bundle.sh):
# the [gpu] tests, the gpu_launch tests, compute-sanitizer (memcheck, racecheck) over the
# device path, and the benchmarks of docs/PERFORMANCE.md. Logs under $OUT; a summary last.
# Every step has its own time limit; together they fit one 10-minute call (590 s).
set -uo pipefail
# scripts/gpu_bundle.sh packs the binaries into one archive (the carry limit is 64 MiB).
if [ -f .gpu/bundle.tar.xz ] && [ ! -d .gpu/build ]; then
  (cd .gpu && { xz -dc bundle.tar.xz 2>/dev/null | tar xf - ; } ||
    python3 -c "import tarfile; tarfile.open('bundle.tar.xz').extractall('.')") || { echo "cannot unpack .gpu/bundle.tar.xz"; exit 1; }
fi
# A launch stuck for 10 s reports each lane's operation, step and peers into the step's
# log, so a hang the step's time limit cuts off still says where it stood.
export COLL_STALL_WARN_S="${COLL_STALL_WARN_S:-10}"
export LD_LIBRARY_PATH="$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
B=.gpu/build
CS="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
OUT="${OUT:-/tmp/gpu-out}"
mkdir -p "$OUT"
S="$OUT/summary.txt"
: > "$S"
step() {  # step NAME SECONDS command...
  local name="$1" secs="$2"
  shift 2
  local t0=$SECONDS
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" | tee -a "$S"
  return 0
}
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } >> "$S" 2>&1
# The probe (hwloc, NVML, the driver's bus ids) as device ranks now run it at init to
# order a host's GPUs: the machine's topology as NCCL XML, and its rings.
step colltopo 10 "$B/tools/colltopo" --xml
step gpu_tests 100 "$B/tests/gpu_tests"
for c in threads procs hosts; do step "launch_$c" 55 bash tests/gpu_launch_test.sh "$B" "$c"; done
step memcheck 75 "$CS" --tool memcheck --error-exitcode 9 "$B/perf_tests/all_reduce_perf" -t 2 --mem device -b 8 -e 1M -f 32 -c 1 -n 1 -w 0
step racecheck 50 "$CS" --tool racecheck --error-exitcode 9 "$B/perf_tests/all_reduce_perf" -t 2 --mem device -b 1K -e 64K -f 64 -c 1 -n 1 -w 0
step reduce_kernel 30 "$B/perf_tests/reduce_kernel_perf" -b 1M -e 256M
step allreduce_t2 50 "$B/perf_tests/all_reduce_perf" -t 2 --mem device -b 8 -e 256M -f 4 -c 1
for ch in 4 8 16 32; do
  step "allreduce_256M_ch$ch" 20 env COLL_DEVICE_NCHANNELS=$ch "$B/perf_tests/all_reduce_perf" -t 2 --mem device -b 256M -e 256M -n 20 -c 0
done
# 8 ranks on one GPU as threads: send/recv lanes share the GPU's resident blocks.
step alltoall_t8 30 "$B/perf_tests/alltoall_perf" -t 8 --mem device -b 8 -e 8M -f 8 -c 1
# The last lines of each benchmark and failures, for the reply's tail.
for f in reduce_kernel allreduce_t2 alltoall_t8 allreduce_256M_ch4 allreduce_256M_ch8 allreduce_256M_ch16 allreduce_256M_ch32; do
  echo "== $f" >> "$S"
  grep -E "^ +[0-9]+ |Out of bounds|fraction|copy|reduce" "$OUT/$f.log" | tail -12 >> "$S"
done
grep -h -E "FAILED|ERROR SUMMARY|error" "$OUT"/gpu_tests.log "$OUT"/memcheck.log "$OUT"/racecheck.log 2>/dev/null | head -20 >> "$S"
cat "$S"

#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, from the repository root, with .gpu/ present
# (built elsewhere by scripts/gpu/bundle.sh and copied beside the sources):
#   bash scripts/gpu/check.sh          the device path's targets: [gpu] tests, compute-sanitizer
#                                      (memcheck, racecheck), the benchmarks beside NCCL's,
#                                      the no-hang shapes; then each target and whether it
#                                      holds (scripts/gpu/targets.py)
#   bash scripts/gpu/check.sh more     the probe, the gpu_launch tests, the channel sweep
#   bash scripts/gpu/check.sh yield    small operations of 2 processes without MPS, timed
#   bash scripts/gpu/check.sh channels 2 ranks at 256 MiB and 8 B over 16-64 channels per rank
#                                      (COLL_DEVICE_NCHANNELS), twice over, for the default
#   bash scripts/gpu/check.sh first    what changed since the last GPU run, most important
#                                      first; GPU_CHECK_DEADLINE=S bounds the whole run
#   bash scripts/gpu/check.sh torch    PyTorch and CuPy through the project: the library and
#                                      torch_collectives built there against the machine's
#                                      torch, DDP on CUDA tensors on our backend, PyTorch's
#                                      ProcessGroupNCCL and CuPy on our libnccl.so.2
#                                      (needs .gpu/hwloc: scripts/gpu/bundle.sh torch)
# Results in $OUT (default /tmp/gpu-out): every log packed into logs.tar.gz, so the output
# stays a handful of files, with the summary and the targets beside it; a summary last.
# Every step has its own time limit; each form finishes within 10 minutes (590 s).
set -uo pipefail
# scripts/gpu/bundle.sh packs the binaries into one archive (kept under 64 MiB).
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
RESULTS="${OUT:-/tmp/gpu-out}"
OUT="$(mktemp -d /tmp/gpu-logs.XXXX)"
mkdir -p "$RESULTS"
S="$OUT/summary.txt"
# Every log, packed into one archive, whatever way the script ends.
pack() { tar czf "$RESULTS/logs.tar.gz" -C "$OUT" . && cp "$S" "$RESULTS/" && { [ ! -f "$OUT/targets.txt" ] || cp "$OUT/targets.txt" "$RESULTS/"; }; }
trap pack EXIT
: > "$S"
# GPU_CHECK_DEADLINE (seconds from the start): a step gets at most what is left of it, and
# none once under 5 s are left, so a run cut short by it still packs every log.
DEADLINE="${GPU_CHECK_DEADLINE:-0}"
step() {  # step NAME SECONDS command...
  local name="$1" secs="$2"
  shift 2
  if [ "$DEADLINE" -gt 0 ]; then
    local left=$((DEADLINE - SECONDS))
    if [ "$left" -lt 5 ]; then echo "$name: not run, deadline" | tee -a "$S"; return 0; fi
    [ "$secs" -le "$left" ] || secs=$left
  fi
  local t0=$SECONDS
  timeout "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc, $((SECONDS - t0)) s" | tee -a "$S"
  return 0
}
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } >> "$S" 2>&1
P="$B/perf_tests"
if [ "${1:-targets}" = torch ]; then
  # The library and the backend against the torch of the machine's python3: made beside
  # the source (below) or built here with the machine's cores (sm_90, no tests); hwloc
  # from .gpu/hwloc where the machine has none.
  TB=/tmp/coll-torch-build
  PY="$(command -v python3)"
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)' >> "$S" 2>&1
  "$PY" -c 'import cupy; print("cupy", cupy.__version__)' >> "$S" 2>&1
  # Made beside the source against this machine's torch and Python (scripts/gpu/bundle.sh
  # torch PYTHON; .gpu/prebuilt/ORIGIN names them), the build here is skipped: about 140 s
  # of the machine's time. GPU_TORCH_BUILD=1 builds here regardless.
  MINE="$("$PY" -c 'import sys, torch; print("Python %d.%d" % sys.version_info[:2], "torch", torch.__version__)' 2>/dev/null)"
  if [ "${GPU_TORCH_BUILD:-0}" != 1 ] && [ -f .gpu/prebuilt/ORIGIN ] &&
     grep -q -F "${MINE% torch*}" .gpu/prebuilt/ORIGIN && grep -q -F " torch ${MINE#* torch }" .gpu/prebuilt/ORIGIN; then
    echo "torch: not built here; .gpu/prebuilt matches ($(cat .gpu/prebuilt/ORIGIN))" >> "$S"
    TB="$PWD/.gpu/prebuilt"
  else
    step torch_configure 120 cmake -S . -B "$TB" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCOLL_BUILD_TESTS=OFF -DCOLL_BUILD_TOOLS=ON -DCOLL_BUILD_PYTORCH=ON -DCOLL_TORCH_PYTHON="$PY" \
      -DCMAKE_PREFIX_PATH="$PWD/.gpu/hwloc"
    step torch_build 360 cmake --build "$TB" -j"$(nproc)" --target torch_collectives nccl_dropin all_reduce_perf collrun
  fi
  # A crash's native stack in the step's log (the machine has no gdb): preloaded below.
  FS=/tmp/fault_stack.so
  cc -shared -fPIC -O1 -o "$FS" scripts/gpu/fault_stack.c >> "$OUT/fault_stack.log" 2>&1 || FS=
  # A build that failed here (a header missing on the machine) falls back to the one made
  # beside the source against the same torch (scripts/gpu/bundle.sh torch PYTHON).
  if ! ls "$TB"/python/torch_collectives/_C*.so "$TB/libnccl.so.2" > /dev/null 2>&1 && [ -d .gpu/prebuilt ]; then
    echo "torch: not built here; using .gpu/prebuilt ($(cat .gpu/prebuilt/ORIGIN 2>/dev/null))" >> "$S"
    TB="$PWD/.gpu/prebuilt"
  fi
  ldd "$TB"/python/torch_collectives/_C*.so > "$OUT/torch_ldd.log" 2>&1
  export LD_LIBRARY_PATH="$TB:$PWD/.gpu/hwloc/lib:$LD_LIBRARY_PATH"
  # The library's device path alone first, 1 rank and 2 processes on the one GPU (what
  # test_cuda.py runs through torch), checked: a failure here is the library's, not torch's.
  step lib_device_1rank 30 "$TB/perf_tests/all_reduce_perf" -t 1 --mem device -b 8 -e 16M -f 16 -c 1 -n 5 -w 1
  step lib_device_2proc 40 "$TB/tools/collrun" -np 2 -- "$TB/perf_tests/all_reduce_perf" --mem device \
    -b 8 -e 16M -f 16 -c 1 -n 5 -w 1
  # The library's device path as a shared object (the perf programs link its objects
  # statically), in a process without torch: CuPy's NCCL allreduce on the drop-in.
  step torch_cupy 60 env LD_PRELOAD="$TB/libnccl.so.2${FS:+:$FS}" PYTHONFAULTHANDLER=1 NCCL_DEBUG=VERSION "$PY" tests/torch/gpu_frameworks.py cupy
  # Through torch, one rank step by step first, with the library's INFO lines and the
  # native stack of a crash; after a crash, again under cuda-gdb (gdb where there is one).
  PRE=(env PYTHONFAULTHANDLER=1 ${FS:+LD_PRELOAD="$FS"})
  step torch_one_rank 60 env PYTHONPATH="$TB/python" COLL_DEBUG=INFO "${PRE[@]}" "$PY" tests/torch/gpu_frameworks.py one_rank
  # What the library would load besides itself (it reads NCCL_* where COLL_* is unset,
  # and loads libnccl-net.so, libnccl-tuner.so and hwloc where found); after a crash, the
  # one-rank step again without any of them.
  { env | grep -E "^(NCCL|COLL)_" | sed 's/^/env: /'; ldconfig -p | grep -i -E "nccl|hwloc" | sed 's/^/ldconfig: /'; } >> "$S"
  DBG="$(command -v gdb || command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)"
  if ! grep -q "^RESULT one_rank PASS" "$OUT/torch_one_rank.log"; then
    step torch_one_rank_bare 60 env PYTHONPATH="$TB/python" COLL_DEBUG=INFO COLL_NET_PLUGIN=none COLL_TUNER_PLUGIN=none \
      COLL_PROFILER_PLUGIN=none COLL_IB_DISABLE=1 COLL_HWLOC_LIB=none "${PRE[@]}" "$PY" tests/torch/gpu_frameworks.py one_rank
  fi
  if ! grep -q "^RESULT one_rank PASS" "$OUT/torch_one_rank.log" && [ -x "$DBG" ]; then
    step torch_one_rank_gdb 90 env PYTHONPATH="$TB/python" "$DBG" -q -batch -ex "set pagination off" -ex run -ex bt \
      -ex "info sharedlibrary" --args "$PY" tests/torch/gpu_frameworks.py one_rank
  fi
  step torch_ddp_ours 75 env PYTHONPATH="$TB/python" "${PRE[@]}" "$PY" tests/torch/gpu_frameworks.py ddp_ours
  step torch_test_cuda 75 env PYTHONPATH="$TB/python" "${PRE[@]}" "$PY" tests/torch/test_cuda.py
  step torch_ddp_nccl 60 env LD_PRELOAD="$TB/libnccl.so.2${FS:+:$FS}" PYTHONFAULTHANDLER=1 NCCL_DEBUG=VERSION "$PY" tests/torch/gpu_frameworks.py ddp_nccl
  # nccl-tests (built against NVIDIA's nccl.h; scripts/gpu/bundle.sh NCCL_TESTS_BUILD) over
  # our libnccl.so.2, every binary with its own checks. One rank: nccl-tests gives thread
  # t of -t 2 device t, and this machine has one.
  [ ! -f .gpu/nccl-tests.tar.xz ] || [ -d .gpu/nccl-tests ] || (cd .gpu && xz -dc nccl-tests.tar.xz | tar xf -)
  for t in .gpu/nccl-tests/*_perf; do
    [ -x "$t" ] || continue
    step "dropin_$(basename "$t")" 40 env LD_PRELOAD="$TB/libnccl.so.2" NCCL_DEBUG=VERSION \
      "$t" -g 1 -b 8 -e 64M -f 8 -c 1 -n 5 -w 1
  done
  step torch_per_device 60 env PYTHONPATH="$TB/python" "${PRE[@]}" "$PY" -m pytest tests/torch/test_groups.py -p no:cacheprovider \
    --backend collectives --nranks 2 -k per_device
  for f in torch_configure torch_build; do [ ! -f "$OUT/$f.log" ] || tail -3 "$OUT/$f.log" | sed "s/^/$f: /" >> "$S"; done
  for f in lib_device_1rank lib_device_2proc; do
    grep -h -E "Out of bounds|Avg bus bandwidth|rror|Segmentation" "$OUT/$f.log" | head -4 | sed "s/^/$f: /" >> "$S"
  done
  grep -h -E "^RESULT|^STEP|^#[0-9]|version|Version|FAIL|Error|passed" "$OUT"/torch_one_rank*.log "$OUT"/torch_ddp_*.log \
    "$OUT"/torch_cupy.log "$OUT"/torch_test_cuda.log "$OUT"/torch_per_device.log \
    | awk '!seen[$0]++' | head -60 >> "$S"
  # Each native stack, the project's frames named by addr2line where the machine has it.
  for f in "$OUT"/torch_*.log; do
    grep -q "native stack at fatal" "$f" || continue
    echo "== $(basename "$f" .log)" >> "$S"
    grep -m1 -A 24 "native stack at fatal" "$f" | while IFS= read -r line; do
      lib="${line%%(*}" off="$(sed -n 's/.*(+\(0x[0-9a-f]*\)).*/\1/p' <<< "$line")"
      case "$lib" in *collectives*|*libnccl*)
        [ -z "$off" ] || ! command -v addr2line > /dev/null || line="$line $(addr2line -f -C -e "$lib" "$off" | tr '\n' ' ')" ;;
      esac
      echo "$line"
    done >> "$S"
  done
  for f in "$OUT"/dropin_*.log; do
    [ -f "$f" ] || continue
    echo "$(basename "$f" .log): $(grep -h -E "Out of bounds|Avg bus bandwidth|NCCL version|Collectives" "$f" | tr '\n' ' ')" >> "$S"
  done
  cat "$S"
  exit 0
fi
one_rank_beside_nccl() {
  # NCCL beside us, 1 rank (it refuses two on one GPU): nccl-tests from the bundle over the
  # libnccl of the machine's Python (pip nvidia-nccl), else CUDA's own; never our drop-in.
  NCCL_LIB="${NCCL_LIB:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)}"
  # Three rounds, NCCL and ours in turn: a call of a few microseconds swings up to 2x
  # from one run to the next, so scripts/gpu/targets.py compares each size's medians.
  for r in 1 2 3; do
    if [ -x .gpu/build/nccl-tests/all_reduce_perf ]; then
      step "nccl_1rank_$r" 40 env LD_LIBRARY_PATH="${NCCL_LIB:+$NCCL_LIB:}/usr/local/cuda/lib64:/usr/local/cuda/lib:$LD_LIBRARY_PATH" \
        .gpu/build/nccl-tests/all_reduce_perf -b 8 -e 1G -f 4 -g 1 -c 0 -n 20 -w 5
    else
      echo "no NCCL to compare with: the bundle has no nccl-tests (scripts/gpu/bundle.sh builds them from ../shared/peers)" > "$OUT/nccl_1rank_$r.log"
    fi
    step "ours_1rank_$r" 40 "$P/all_reduce_perf" -t 1 --mem device -b 8 -e 1G -f 4 -c 0 -n 20 -w 5
  done
}
if [ "${1:-targets}" = more ]; then
  # The rest of the device path's checks, as a run of its own: the probe, the launch tests, the
  # channel sweep, alltoall with 8 ranks.
  step colltopo 10 "$B/tools/colltopo" --xml
  for c in threads procs hosts; do step "launch_$c" 55 bash tests/gpu_launch_test.sh "$B" "$c"; done
  # The issue's hang shapes: any channel count 4..16 over the sizes, all_reduce with 6 and
  # 8 ranks, alltoall with 8 (each checked, default environment).
  for ch in 4 8 16 32; do
    step "allreduce_256M_ch$ch" 30 env COLL_DEVICE_NCHANNELS=$ch "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 256M -f 16 -n 5 -c 1
  done
  step allreduce_t6 40 "$P/all_reduce_perf" -t 6 --mem device -b 8 -e 128M -f 16 -n 5 -c 1
  step allreduce_t8sweep 40 "$P/all_reduce_perf" -t 8 --mem device -b 8 -e 128M -f 16 -n 5 -c 1
  step alltoall_t8 30 "$P/alltoall_perf" -t 8 --mem device -b 8 -e 8M -f 8 -c 1
  for f in allreduce_t6 allreduce_t8sweep alltoall_t8 allreduce_256M_ch4 allreduce_256M_ch8 allreduce_256M_ch16 allreduce_256M_ch32; do
    echo "== $f" >> "$S"
    grep -E "^ +[0-9]+ |Out of bounds" "$OUT/$f.log" | tail -12 >> "$S"
  done
  cat "$S"
  exit 0
fi
if [ "${1:-targets}" = channels ]; then
  # Channels per rank, the default (0) among them, in two rounds so noise shows.
  for round in 1 2; do
    for ch in 0 16 32 48 64; do
      step "ch${ch}_256M_$round" 20 env COLL_DEVICE_NCHANNELS=$ch "$P/all_reduce_perf" -t 2 --mem device -b 256M -e 256M -n 10 -w 2 -c 0
      step "ch${ch}_8B_$round" 20 env COLL_DEVICE_NCHANNELS=$ch "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 8K -f 32 -n 200 -w 10 -c 0
    done
  done
  step ch64_check 30 env COLL_DEVICE_NCHANNELS=64 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 256M -f 8 -n 3 -w 1 -c 1
  step ch64_memcheck 40 env COLL_DEVICE_NCHANNELS=64 "$CS" --tool memcheck --error-exitcode 9 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 8M -f 64 -c 1 -n 1 -w 0
  for f in "$OUT"/ch*_[12].log; do
    echo "== $(basename "$f" .log): $(grep -E "^ +[0-9]+ " "$f" | awk '{printf "%s B %s us; ", $1, $6}')" >> "$S"
  done
  grep -h -E "^ +[0-9]+ |Out of bounds|ERROR SUMMARY" "$OUT/ch64_check.log" "$OUT/ch64_memcheck.log" >> "$S"
  cat "$S"
  exit 0
fi
if [ "${1:-targets}" = first ]; then
  # What changed since the last GPU run, most important first, for a run of a few
  # minutes (bounded by GPU_CHECK_DEADLINE): small operations (the ring beside the exchange, the
  # copy agent beside each process copying itself, where the time goes), memcheck and
  # racecheck, the target shapes (256 MiB for 2 and 8 ranks, 2 processes at 128 MiB, the
  # no-hang shapes), the full sweep with values checked; then plans by address, the direct
  # route beside the ring, the odd sizes, channels per rank, the rest of the tests, 1 rank
  # beside NCCL; then the targets.
  # A slice's end with one fence and relaxed counters beside the old three release stores.
  step handshake 20 "$P/handshake_perf" -n 20000
  step allreduce_t2_small 25 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 128K -f 16 -c 1
  step allreduce_t2_small_exchange 25 env COLL_DEVICE_EXCHANGE_BYTES=262144 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 128K -f 16 -c 0
  # 2 processes without MPS, small operations staged: rank 0 making rank 1's copies (the
  # copy agent, device/copy_agent.h; the 8 B target) beside each rank copying itself.
  step procs2_agent 30 "$B/tools/collrun" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128K -f 16 -n 20 -w 2 -c 1
  step procs2_noagent 30 env COLL_DEVICE_COPY_AGENT=0 "$B/tools/collrun" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128K -f 16 -n 20 -w 2 -c 0
  step procs2_agent_timing 25 env COLL_DEVICE_TIMING=1 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=COLL "$B/tools/collrun" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 8 -n 20 -w 2 -c 0
  step allreduce_t2_timing 25 env COLL_DEVICE_TIMING=1 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=COLL "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 8 -n 20 -w 2 -c 0
  step memcheck 70 "$CS" --tool memcheck --error-exitcode 9 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 1M -f 32 -c 1 -n 1 -w 0
  step racecheck 45 "$CS" --tool racecheck --error-exitcode 9 "$P/all_reduce_perf" -t 2 --mem device -b 1K -e 64K -f 64 -c 1 -n 1 -w 0
  step allreduce_256M_ch0 20 "$P/all_reduce_perf" -t 2 --mem device -b 256M -e 256M -n 5 -w 1 -c 0
  step allreduce_256M_ring 20 env COLL_DEVICE_DIRECT_MIN_BYTES=-1 "$P/all_reduce_perf" -t 2 --mem device -b 256M -e 256M -n 5 -w 1 -c 0
  step allreduce_t8 25 "$P/all_reduce_perf" -t 8 --mem device -b 256M -e 256M -n 10 -w 2 -c 0
  step allreduce_t8_ring 25 env COLL_DEVICE_DIRECT_MIN_BYTES=-1 "$P/all_reduce_perf" -t 8 --mem device -b 256M -e 256M -n 10 -w 2 -c 0
  step procs2 45 "$B/tools/collrun" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128M -f 16777216 -n 10 -w 2 -c 0
  for c in all_reduce all_gather reduce_scatter alltoall; do
    step "hang_t16_$c" 12 "$P/${c}_perf" -t 16 --mem device -b 8 -e 64K -f 64 -n 2 -w 1 -c 1
    step "hang_np4_$c" 12 "$B/tools/collrun" -np 4 -- "$P/${c}_perf" --mem device -b 8 -e 64K -f 64 -n 2 -w 1 -c 1
  done
  step allreduce_t2 45 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 256M -f 4 -c 1
  step memcheck_memory 40 env COLL_DEVICE_PLAN_PARAMS=0 "$CS" --tool memcheck --error-exitcode 9 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 64K -f 8 -c 1 -n 1 -w 0
  step allreduce_t2_small_noparams 25 env COLL_DEVICE_PLAN_PARAMS=0 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 128K -f 16 -c 0
  step allreduce_t2_small_nocache 25 env COLL_DEVICE_PLAN_CACHE=0 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 128K -f 16 -c 0
  step gpu_tests_direct 60 "$B/tests/gpu_tests" "[direct]"
  step allreduce_t2_ring 45 env COLL_DEVICE_DIRECT_MIN_BYTES=-1 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 256M -f 4 -c 0
  for b in 100000000 100000012; do
    step "allreduce_odd_ring_$b" 20 env COLL_DEVICE_DIRECT_MIN_BYTES=-1 "$P/all_reduce_perf" -t 2 --mem device -b $b -e $b -n 5 -w 1 -c 1
    step "allreduce_odd_direct_$b" 20 "$P/all_reduce_perf" -t 2 --mem device -b $b -e $b -n 5 -w 1 -c 1
  done
  # Reduce-scatter and all-gather of odd counts: every block but the first off 16 bytes
  # by its own amount, run in the widest unit the pointers share (slice.h; 4 bytes here)
  # since 70ad8b8 (2026-11-27), byte by byte before. Under memcheck first.
  step memcheck_unaligned_rs 40 "$CS" --tool memcheck --error-exitcode 9 "$P/reduce_scatter_perf" -t 2 --mem device -b 4104 -e 1M -f 64 -c 1 -n 1 -w 0
  step memcheck_unaligned_ag 40 "$CS" --tool memcheck --error-exitcode 9 "$P/all_gather_perf" -t 2 --mem device -b 4104 -e 1M -f 64 -c 1 -n 1 -w 0
  for c in reduce_scatter all_gather; do
    for b in 100000000 100000008; do
      step "${c}_odd_$b" 20 "$P/${c}_perf" -t 2 --mem device -b $b -e $b -n 5 -w 1 -c 1
    done
  done
  # Channels per rank at 256 MiB (the default: 32 for 2 ranks, 8 for 8), for the next default.
  step allreduce_256M_ch16 20 env COLL_DEVICE_NCHANNELS=16 "$P/all_reduce_perf" -t 2 --mem device -b 256M -e 256M -n 5 -w 1 -c 0
  for ch in 4 16; do
    step "allreduce_t8_ch$ch" 25 env COLL_DEVICE_NCHANNELS=$ch "$P/all_reduce_perf" -t 8 --mem device -b 256M -e 256M -n 10 -w 2 -c 0
  done
  step racecheck_direct 45 env COLL_DEVICE_DIRECT_MIN_BYTES=1 "$CS" --tool racecheck --error-exitcode 9 "$P/all_reduce_perf" -t 3 --mem device -b 1K -e 64K -f 64 -c 1 -n 1 -w 0
  for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    step "procs2_$c" 20 "$B/tools/collrun" -np 2 -- "$P/${c}_perf" --mem device -b 8 -e 1M -f 32 -n 3 -w 1 -c 1
  done
  # Where an 8-byte allreduce of 2 thread ranks spends its time: one channel beside the
  # default 32 (31 of them tokens), and the timing log.
  step allreduce_t2_ch1 25 env COLL_DEVICE_NCHANNELS=1 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 128K -f 16 -c 0
  step reduce_kernel 25 "$P/reduce_kernel_perf" -b 1M -e 256M
  step memcheck_direct 40 env COLL_DEVICE_DIRECT_MIN_BYTES=1 "$CS" --tool memcheck --error-exitcode 9 "$P/all_reduce_perf" -t 2 --mem device -b 1K -e 1M -f 32 -c 1 -n 1 -w 0
  step gpu_tests 100 "$B/tests/gpu_tests" "~[direct]"
  one_rank_beside_nccl
  for f in allreduce_t2_small allreduce_t2_small_exchange procs2_agent procs2_noagent allreduce_t2_small_noparams allreduce_t2_small_nocache allreduce_t2 allreduce_t2_ring allreduce_t2_ch1; do
    echo "== $f" >> "$S"
    grep -E "^ +[0-9]+ " "$OUT/$f.log" | tail -16 >> "$S"
  done
  for f in allreduce_odd_ring_100000000 allreduce_odd_ring_100000012 allreduce_odd_direct_100000000 allreduce_odd_direct_100000012 \
           reduce_scatter_odd_100000000 reduce_scatter_odd_100000008 all_gather_odd_100000000 all_gather_odd_100000008 allreduce_256M_ch0 allreduce_256M_ch16 allreduce_256M_ring \
           allreduce_t8 allreduce_t8_ch4 allreduce_t8_ch16 allreduce_t8_ring procs2; do
    echo "== $f: $(grep -E "^ +[0-9]+ " "$OUT/$f.log" | tail -3)" >> "$S"
  done
  grep "device timing" "$OUT/allreduce_t2_timing.log" | tail -4 >> "$S"
  grep "staged timing" "$OUT/procs2_agent_timing.log" | tail -4 >> "$S"
  grep -E "^ *[0-9]+ " "$OUT/reduce_kernel.log" | tail -3 >> "$S"
  grep -E "slice end|step, device|host:" "$OUT/handshake.log" >> "$S"
  grep -h -E "FAILED|ERROR SUMMARY|RACECHECK SUMMARY|Out of bounds" "$OUT"/gpu_tests*.log "$OUT"/*check*.log "$OUT"/procs2_*.log 2>/dev/null | head -20 >> "$S"
  cat "$S"
  echo
  python3 scripts/gpu/targets.py "$OUT" | tee "$OUT/targets.txt"
  exit 0
fi
if [ "${1:-targets}" = yield ]; then
  # 2 and 4 processes without MPS (lanes that yield; small collectives staged through host
  # memory, device/stage.h): staged up to the default limit, everything staged, nothing
  # staged; every collective checked; where a yielding launch's time goes.
  R="$B/tools/collrun"
  step procs2_stage 40 "$R" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128M -f 4 -n 10 -w 2 -c 1
  step procs2_stage_all 40 env COLL_DEVICE_STAGE_BYTES=1073741824 "$R" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128M -f 4 -n 10 -w 2 -c 1
  step procs2_stage_noagent 40 env COLL_DEVICE_COPY_AGENT=0 "$R" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 8M -f 4 -n 10 -w 2 -c 1
  step procs2_stage_none 40 env COLL_DEVICE_STAGE_BYTES=0 "$R" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128M -f 4 -n 10 -w 2 -c 1
  step procs4_stage 40 "$R" -np 4 -- "$P/all_reduce_perf" --mem device -b 8 -e 64M -f 8 -n 10 -w 2 -c 1
  for c in all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    step "procs2_$c" 30 "$R" -np 2 -- "$P/${c}_perf" --mem device -b 8 -e 4M -f 16 -n 5 -w 1 -c 1
  done
  step procs2_host 30 "$R" -np 2 -- "$P/all_reduce_perf" --mem host -b 8 -e 128K -f 4 -n 20 -w 2 -c 1
  for b in 8 32K; do
    step "procs2_staged_timing_$b" 30 env COLL_DEVICE_TIMING=1 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=COLL "$R" -np 2 -- "$P/all_reduce_perf" --mem device -b $b -e $b -n 20 -w 2 -c 0
  done
  step procs2_timing 30 env COLL_DEVICE_STAGE_BYTES=0 COLL_DEVICE_TIMING=1 COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=COLL,INIT "$R" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 8 -n 20 -w 2 -c 0
  for f in procs2_host procs2_stage procs2_stage_noagent procs2_stage_all procs2_stage_none procs4_stage procs2_all_gather procs2_reduce_scatter procs2_broadcast procs2_reduce procs2_alltoall procs2_sendrecv; do
    echo "== $f" >> "$S"
    grep -E "^ +[0-9]+ |Out of bounds" "$OUT/$f.log" | tail -16 >> "$S"
  done
  grep "device timing" "$OUT/procs2_timing.log" | tail -4 >> "$S"
  for b in 8 32K; do grep "staged timing" "$OUT/procs2_staged_timing_$b.log" | tail -4 >> "$S"; done
  cat "$S"
  exit 0
fi
# Default: what the device path's targets need, then the targets table (scripts/gpu/targets.py).
step gpu_tests 100 "$B/tests/gpu_tests" "~[direct]"
step gpu_tests_direct 60 "$B/tests/gpu_tests" "[direct]"
step memcheck 70 "$CS" --tool memcheck --error-exitcode 9 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 1M -f 32 -c 1 -n 1 -w 0
step racecheck 45 "$CS" --tool racecheck --error-exitcode 9 "$P/all_reduce_perf" -t 2 --mem device -b 1K -e 64K -f 64 -c 1 -n 1 -w 0
step racecheck_direct 45 env COLL_DEVICE_DIRECT_MIN_BYTES=1 "$CS" --tool racecheck --error-exitcode 9 "$P/all_reduce_perf" -t 3 --mem device -b 1K -e 64K -f 64 -c 1 -n 1 -w 0
step reduce_kernel 25 "$P/reduce_kernel_perf" -b 1M -e 256M
one_rank_beside_nccl
step allreduce_t2 45 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 256M -f 4 -c 1
step allreduce_t2_ring 45 env COLL_DEVICE_DIRECT_MIN_BYTES=-1 "$P/all_reduce_perf" -t 2 --mem device -b 8 -e 256M -f 4 -c 0
# 256 MiB, 2 ranks as threads: the default channels (0; the target), then the per-block
# rate at one channel and at a few.
for ch in 0 1 8; do
  step "allreduce_256M_ch$ch" 20 env COLL_DEVICE_NCHANNELS=$ch "$P/all_reduce_perf" -t 2 --mem device -b 256M -e 256M -n 5 -w 1 -c 0
done
step allreduce_t8 25 "$P/all_reduce_perf" -t 8 --mem device -b 256M -e 256M -n 10 -w 2 -c 0
# The same two shapes on the ring (no direct reads), beside them.
step allreduce_256M_ring 20 env COLL_DEVICE_DIRECT_MIN_BYTES=-1 "$P/all_reduce_perf" -t 2 --mem device -b 256M -e 256M -n 5 -w 1 -c 0
step allreduce_t8_ring 25 env COLL_DEVICE_DIRECT_MIN_BYTES=-1 "$P/all_reduce_perf" -t 8 --mem device -b 256M -e 256M -n 10 -w 2 -c 0
step procs2 45 "$B/tools/collrun" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128M -f 16777216 -n 10 -w 2 -c 0
# The same with lanes that never yield (the path before COLL_DEVICE_YIELD_US), beside it.
step procs2_y0 45 env COLL_DEVICE_YIELD_US=0 "$B/tools/collrun" -np 2 -- "$P/all_reduce_perf" --mem device -b 8 -e 128M -f 16777216 -n 10 -w 2 -c 0
# No hang in the default environment: every collective, 16 ranks as threads and 4
# processes on the one GPU, small sizes (a hang is the step's time limit: exit 124).
for c in all_reduce all_gather reduce_scatter alltoall; do
  step "hang_t16_$c" 12 "$P/${c}_perf" -t 16 --mem device -b 8 -e 64K -f 64 -n 2 -w 1 -c 1
  step "hang_np4_$c" 12 "$B/tools/collrun" -np 4 -- "$P/${c}_perf" --mem device -b 8 -e 64K -f 64 -n 2 -w 1 -c 1
done
for f in allreduce_256M_ch0 allreduce_256M_ch1 allreduce_256M_ch8 allreduce_256M_ring allreduce_t8 allreduce_t8_ring; do
  echo "== $f: $(grep -E "^ +[0-9]+ " "$OUT/$f.log" | tail -1)" >> "$S"
done
for f in procs2 procs2_y0; do
  echo "== $f" >> "$S"
  grep -E "^ +[0-9]+ " "$OUT/$f.log" | tail -3 >> "$S"
done
grep -h -E "FAILED|ERROR SUMMARY|RACECHECK SUMMARY" "$OUT"/gpu_tests.log "$OUT"/gpu_tests_direct.log "$OUT"/memcheck.log "$OUT"/racecheck.log "$OUT"/racecheck_direct.log 2>/dev/null | head -20 >> "$S"
cat "$S"
echo
python3 scripts/gpu/targets.py "$OUT" | tee "$OUT/targets.txt"

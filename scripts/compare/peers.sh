#!/usr/bin/env bash
# Ours beside the peers (Open MPI, MPICH, Gloo from ../shared/peers), back to back on this
# machine, repeated, then the ratios for each performance target (perf_tests/compare.py).
#
#   bash scripts/compare/peers.sh            # REPEAT=5 rounds, ~18 minutes on 2 cores
#
# Environment: REPEAT [5]; OUT [/tmp/coll-compare/<UTC stamp>] where every table goes;
# PEERS_DIR [../shared/peers]; PEERS_BUILD [/tmp/peers-build] (a writable folder for the
# peers' drivers); BUILD_DIR [build]. Each round runs, in this order: the peers
# (run.sh with PEERS_EXTRA=1: allreduce over sm and TCP, bcast and reduce_scatter over
# sm and TCP, Gloo), Open MPI allgather (perf_tests/peers/mpi_allgather_perf.c), ours
# over shared memory (allreduce, broadcast, allgather, reduce-scatter) and over TCP
# (two simulated hosts, loopback), then 8 ranks on the 2 cores (16 MiB allreduce) for
# Open MPI --oversubscribe and for us, with the CPU time the ranks used.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
REPEAT="${REPEAT:-5}"
PEERS_DIR="${PEERS_DIR:-$ROOT/../shared/peers}"
export PEERS_BUILD="${PEERS_BUILD:-/tmp/peers-build}"
BUILD_DIR="${BUILD_DIR:-build}"
OUT="${OUT:-/tmp/coll-compare/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT" "$PEERS_BUILD"

[ -x "$BUILD_DIR/perf_tests/all_reduce_perf" ] || bash scripts/build.sh
[ -d "$PEERS_DIR" ] || { echo "compare/peers.sh: no peers at $PEERS_DIR" >&2; exit 1; }
bash "$PEERS_DIR/setup.sh" >&2 || { echo "compare/peers.sh: peers setup failed" >&2; exit 1; }

AG="$PEERS_BUILD/mpi_allgather_perf_coll"
if command -v mpicc.openmpi >/dev/null; then
  if [ ! -x "$AG" ] || [ perf_tests/peers/mpi_allgather_perf.c -nt "$AG" ]; then
    mpicc.openmpi -O2 -o "$AG" perf_tests/peers/mpi_allgather_perf.c || rm -f "$AG"
  fi
fi
OMPI=(mpirun.openmpi --allow-run-as-root --mca pml ob1 --mca oob_tcp_if_include lo
      --mca btl vader,self)

P="$BUILD_DIR/perf_tests"
R="$BUILD_DIR/tools/collrun"
# ours NAME COLLRUN_ARGS... -- BINARY: small sizes with many calls, then large ones.
ours() {
  local name="$1"; shift
  local args=() bin
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  bin="$2"
  {
    echo "# ours: $name  collrun ${args[*]} -- $bin  ($(date -u +%FT%TZ))"
    timeout 600 "$R" "${args[@]}" -- "$P/$bin" -b 8 -e 32K -f 2 -n 2000 -w 100 -c 0
    timeout 600 "$R" "${args[@]}" -- "$P/$bin" -b 64K -e 128M -f 2 -n 20 -w 3 -c 0
  } > "$OUT/$name.$k.txt" 2>&1
  echo "compare/peers.sh: [$name] round $k done" >&2
}

for k in $(seq 1 "$REPEAT"); do
  PEERS_EXTRA=1 PEERS_RESULTS="$OUT/peers.$k" bash "$PEERS_DIR/run.sh" > "$OUT/peers_summary.$k.txt" 2>&1
  for f in "$OUT/peers.$k"/*.txt; do
    [ "$(basename "$f")" = summary.txt ] && continue
    cp "$f" "$OUT/$(basename "$f" .txt).$k.txt"
  done
  if [ -x "$AG" ]; then
    "${OMPI[@]}" -np 2 --bind-to core --map-by core "$AG" -b 8 -e 128M > "$OUT/ompi_sm_allgather.$k.txt" 2>&1
  fi
  ours ours_shm_allreduce -np 2 --bind core -- all_reduce_perf
  ours ours_tcp_allreduce -np 2 --nodes 2 --bind core -- all_reduce_perf
  ours ours_shm_broadcast -np 2 --bind core -- broadcast_perf
  ours ours_shm_allgather -np 2 --bind core -- all_gather_perf
  ours ours_shm_reduce_scatter -np 2 --bind core -- reduce_scatter_perf

  # Oversubscribed: 8 ranks on the 2 cores. CPU seconds (user+sys of all ranks) beside
  # the wall time show whether waiting ranks give their core away.
  TIMEFORMAT="# cpu: wall %R s, user %U s, sys %S s"
  { time "${OMPI[@]}" -np 8 --oversubscribe --bind-to none "$PEERS_BUILD/mpi_allreduce_perf" \
      -C allreduce -b 16M -e 16M -w 3 -n 20 -T 0 ; } > "$OUT/ompi_sm_allreduce_np8.$k.txt" 2>&1
  { time timeout 600 "$R" -np 8 -- "$P/all_reduce_perf" -b 16M -e 16M -w 3 -n 20 -c 0 ; } \
      > "$OUT/ours_shm_allreduce_np8.$k.txt" 2>&1
  echo "compare/peers.sh: round $k of $REPEAT done" >&2
done

python3 perf_tests/compare.py "$OUT" | tee "$OUT/ratios.txt"
echo "# tables and ratios in $OUT"
grep -h "# cpu" "$OUT"/*np8* | sed 's/^/# /'

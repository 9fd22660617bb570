# Sourced by compare/latency.sh and compare/tcp_bandwidth.sh with their arguments:
# moves to the repository root (ROOT), sets ROUNDS (first argument, default 8), builds
# ours and the peers' drivers if needed, and sets OMPI (the Open MPI TCP command line
# for 2 ranks on loopback) and RAW (a scratch file removed on exit).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
ROUNDS="${1:-8}"
export PEERS_BUILD="${PEERS_BUILD:-/tmp/peers-build}"
BUILD_DIR="${BUILD_DIR:-build}"
[ -x "$BUILD_DIR/perf_tests/all_reduce_perf" ] || bash scripts/build.sh
mkdir -p "$PEERS_BUILD"
bash "$ROOT/../shared/peers/setup.sh" >&2 || { echo "peers setup failed" >&2; exit 1; }
OMPI=(mpirun.openmpi --allow-run-as-root -np 2 --bind-to core --map-by core --mca pml ob1
      --mca oob_tcp_if_include lo --mca btl tcp,self --mca btl_tcp_if_include lo)
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT

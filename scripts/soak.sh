#!/usr/bin/env bash
# Soak: random collectives, sizes, types, ops, groups, splits and destroys for MINUTES in
# all, every result verified on every rank, and each process's RSS, heap, descriptors,
# threads and shm segments required flat (tests/soak/soak.cc). The time is split evenly
# over the configurations: 4 processes over shm, 4 over TCP (COLL_SHM_DISABLE=1), 4 as two
# simulated hosts (collrun --nodes 2: shm inside, TCP between), 4 threads of one process;
# optionally (SOAK_CONFIGS=ib) two simulated hosts joined by the ib backend over the verbs
# emulation. Exits 1 if any run fails or any resource grows; a failure prints the seed and
# the step to run again. Every process's samples go to $SOAK_WORK/<config>.rank<r>.csv,
# drawn at the end into $SOAK_WORK/soak.png.
#   scripts/soak.sh MINUTES      env: BUILD_DIR (build), SOAK_CONFIGS ("shm tcp hosts
#                                threads"; also ib), SOAK_SEED (each run draws one),
#                                SOAK_WORK (the logs; a temporary folder), SOAK_JOBS (2),
#                                SOAK_TCACHE (1: keep glibc's per-thread cache; below)
set -euo pipefail
cd "$(dirname "$0")/.."

# All in a function, read whole before it runs: editing this file during an hour's run
# cannot change what the run does.
main() {
MINUTES=${1:?usage: scripts/soak.sh MINUTES}
BUILD_DIR=${BUILD_DIR:-build}
CONFIGS=${SOAK_CONFIGS:-"shm tcp hosts threads"}
WORK=${SOAK_WORK:-$(mktemp -d /tmp/coll-soak.XXXXXX)}
mkdir -p "$WORK"

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  bash scripts/deps.sh
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
targets=(soak collrun)
if [[ " $CONFIGS " == *" ib "* ]]; then targets+=(coll_verbs_emu); fi
cmake --build "$BUILD_DIR" -j "${SOAK_JOBS:-2}" --target "${targets[@]}" >/dev/null
SOAK=$BUILD_DIR/tests/soak/soak
COLLRUN=$BUILD_DIR/tools/collrun

# glibc's per-thread cache (tcache) keeps up to 7 freed blocks of each small size per
# thread, and mallinfo2 counts them as in use: the heap figure crept up by 50-200 KiB as
# the caches filled, with nothing of the library's growing (docs/SECURITY.md "Soak").
# Without it the heap figure is what the program holds. SOAK_TCACHE=1 keeps it.
if [ "${SOAK_TCACHE:-0}" != 1 ]; then
  export GLIBC_TUNABLES="glibc.malloc.tcache_count=0${GLIBC_TUNABLES:+:$GLIBC_TUNABLES}"
fi

read -r -a configs <<<"$CONFIGS"
per=$(awk -v m="$MINUTES" -v n="${#configs[@]}" 'BEGIN { printf "%d", m * 60 / n }')
# Checkpoints (samples) every 100 steps, a few seconds apart; closer on short runs.
check=100
[ "$per" -lt 300 ] && check=15
args=(--seconds "$per" --check-steps "$check")
[ -n "${SOAK_SEED:-}" ] && args+=(--seed "$SOAK_SEED")

echo "soak: $MINUTES min over: ${configs[*]} ($per s each); $(nproc) CPUs, $(uname -r); logs in $WORK"
failed=0
for c in "${configs[@]}"; do
  # collrun's timeout: a run past its time by 10 minutes hangs (every call has 300 s).
  launch=("$COLLRUN" -np 4 --tag-output --timeout $((per + 600)) --)
  envs=()
  extra=()
  case "$c" in
    shm) ;;
    tcp) envs=(COLL_SHM_DISABLE=1) ;;
    hosts) launch=("$COLLRUN" -np 4 --nodes 2 --tag-output --timeout $((per + 600)) --) ;;
    threads) launch=(timeout $((per + 600))) extra=(--threads 4) ;;
    ib)
      envs=(COLL_NET=IB "COLL_IB_VERBS_LIB=$(cd "$BUILD_DIR" && pwd)/tests/libcoll_verbs_emu.so" COLL_VERBS_EMU_FABRIC=/coll_soak_$$)
      launch=("$COLLRUN" -np 4 --nodes 2 --tag-output --timeout $((per + 600)) --)
      ;;
    *) echo "soak: unknown configuration $c (shm tcp hosts threads ib)" >&2; exit 2 ;;
  esac
  extra+=(--csv "$WORK/$c")  # every process's samples: $WORK/<config>.rank<r>.csv
  echo "soak: $c: ${envs[*]} ${launch[*]} $SOAK ${args[*]} ${extra[*]}"
  rc=0
  env "${envs[@]}" "${launch[@]}" "$SOAK" "${args[@]}" "${extra[@]}" >"$WORK/$c.log" 2>&1 || rc=$?
  if [ "$c" = ib ]; then rm -f /dev/shm/coll_soak_$$; fi
  results=$(grep -c 'SOAK-RESULT' "$WORK/$c.log" || true)
  if [ "$rc" -ne 0 ] || [ "$results" -eq 0 ] || grep -q 'SOAK-RESULT.*flat=0' "$WORK/$c.log"; then
    failed=1
    echo "soak: $c FAILED (exit $rc); from $WORK/$c.log:" >&2
    grep -E 'FAILED|reproduce|GROWING|NOT FLAT|collrun:' "$WORK/$c.log" | head -20 >&2 || true
  fi
done

echo
echo "soak: summary (ops and bytes summed over ranks; resources: the largest first -> last sample over ranks)"
printf '%-8s %6s %5s %8s %10s %7s %16s %16s %8s %8s %8s %6s %s\n' config seconds procs steps ops GiB rss_MiB heap_MiB \
  fds threads shm_maps result seed
for c in "${configs[@]}"; do
  seed=$(sed -n 's/.*soak: seed \([0-9]*\).*/\1/p' "$WORK/$c.log" | head -1)
  grep -h 'SOAK-RESULT' "$WORK/$c.log" | sed 's/^\[[0-9]*\] //' | awk -v c="$c" -v seed="${seed:-?}" '
    function v(k,   i) { for (i = 2; i <= NF; ++i) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return 0 }
    function up(a, k) { return v(k) + 0 > a + 0 ? v(k) + 0 : a + 0 }
    { n++; ops += v("ops"); bytes += v("bytes"); secs = up(secs, "seconds"); steps = up(steps, "steps")
      rf = up(rf, "rss_kib_first"); rl = up(rl, "rss_kib_last"); ff = up(ff, "fds_first"); fl = up(fl, "fds_last")
      hf = up(hf, "heap_kib_first"); hl = up(hl, "heap_kib_last")
      tf = up(tf, "threads_first"); tl = up(tl, "threads_last"); sf = up(sf, "shm_maps_first"); sl = up(sl, "shm_maps_last")
      if (v("flat") != 1) bad = 1 }
    END { if (!n) { printf "%-8s no results\n", c; exit }
      printf "%-8s %6d %5d %8d %10d %7.1f %16s %16s %8s %8s %8s %6s %s\n", c, secs, n, steps, ops, bytes / 2^30,
        sprintf("%.1f -> %.1f", rf / 1024, rl / 1024), sprintf("%.1f -> %.1f", hf / 1024, hl / 1024), ff " -> " fl,
        tf " -> " tl, sf " -> " sl, bad ? "GROWS" : "flat", seed }'
done
# The samples over time, one panel per resource, a line per process (scripts/soak_plot.py).
scripts/soak_plot.py "$WORK/soak.png" "$WORK"/*.rank*.csv && echo "soak: plot in $WORK/soak.png" ||
  echo "soak: no plot (matplotlib needed: scripts/deps.sh installs it)"
[ "$failed" -eq 0 ] && echo "soak: PASSED" || echo "soak: FAILED"
return $failed
}

main "$@"; exit $?  # exit at once: bash would otherwise read on in a file edited meanwhile

#!/usr/bin/env bash
# Runs every test that kills, stalls, aborts or times out a rank, and every test whose
# outcome depends on which rank gets somewhere first, COUNT times in a loop while other
# processes keep both cores busy, and counts the failures of each. A flaky fault test
# costs a whole CI run; this is where such flakes show. Not in CI (hours on 2 cores).
#
#   bash scripts/repeat_faults.sh [COUNT]     (default 200)
#     env: BUILD_DIR (build), REPEAT_LOAD (busy processes beside the tests: the number of
#          CPUs), REPEAT_ONLY (a regex: only the selected tests it matches),
#          REPEAT_WORK (logs; a temporary folder), REPEAT_JOBS (rounds run side by side;
#          1)
#
# Each round runs the selected tests once, one at a time: CTest's (their own timeouts and
# environments), then the NCCL API program's fault cases in threads and in processes.
# With REPEAT_JOBS=J, J rounds run at once, each from its own place in the list, and no
# test ever runs beside itself; most of these tests wait on a timeout or a dead peer, so J
# rounds take far less than J times one. The log of every failed run is kept in
# REPEAT_WORK. Ends with a table: test, runs,
# failures, slowest run; exits 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

# All in a function, read whole before it runs: editing this file during a long run
# cannot change what the run does.
main() {
COUNT=${1:-200}
BUILD_DIR=${BUILD_DIR:-build}
LOAD=${REPEAT_LOAD:-$(nproc)}
JOBS=${REPEAT_JOBS:-1}
WORK=${REPEAT_WORK:-$(mktemp -d /tmp/coll-repeat.XXXXXX)}
mkdir -p "$WORK"
rm -f "$WORK"/runs.* "$WORK"/lock.*  # a run again in the same folder starts its count afresh

if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then bash scripts/build.sh; fi
cmake --build "$BUILD_DIR" -j"$(nproc)" >/dev/null

# The tests, by CTest name (anchored regexes), each group with why it is here.
tests=(
  # A rank killed, or gone, while the others wait on it.
  'a killed peer fails every survivor naming it over .*'
  'hang report over processes: the survivors of a killed rank name it and where they were'
  'hang report over processes: a survivor idle when a rank dies names it on its next call'
  'verbs: ?a killed peer process gives retry exceeded within seconds'
  'ib: ?a peer that went away is an error, not a hang'
  'ib: ?a lost credit fails both ends naming each other within seconds'
  'bootstrap: a root that closes without answering the join is named as gone'
  'launch_collrun_(failure|killed)'
  # A rank that never joins, joins late or fails during init.
  'a rank that cannot join fails every rank.s init at once, naming it'
  'a rank that never joins is named to every rank that did, though the root.s process exits at once'
  'a rank that fails after joining fails every rank.s init, naming it'
  'bootstrap: the root tells other processes. ranks of a failed init before its own'
  'ranks that disagree on settings fail init naming both'
  # A rank that stalls: timeouts, stall warnings, hang reports.
  'collCommSetTimeout: an operation a rank never joins fails with collTimeout, naming it'
  'hang report: a rank that stops calling fails every rank with collTimeout naming it'
  'hang report: a rank that calls broadcast where the others call allreduce is named on every rank'
  'hang report: asked on demand \(collstat\) while a rank is late, without disturbing the job'
  'hang report: a rank that times out while its peers read its buffers directly lets them finish first'
  'hang report over processes: printed once by the root past COLL_STALL_WARN_S, and by collstat on demand'
  'a rank waiting for a late peer reports where it stands \(COLL_STALL_WARN_S\)'
  'launch_collrun_timeout'
  # Abort and revoke from another thread, destroy with work pending.
  'collCommAbort from another thread unblocks a waiting call within 1 s'
  'registration handles are checked, revoke stops a communicator and shrink replaces it'
  'a rank initialized inside a group and destroyed before its end is reported, not used'
  # Ranks that disagree, where which rank notices first decides the path taken.
  'ranks calling different counts get an error, not a hang'
  'a one-shot in a mailbox fails when its peer gave up a direct one-shot first'
  'counts on either side of the staging limit fail both ranks, not a hang \(emulated\)'
  'a found plan meeting a peer.s other count fails both ranks by name \(emulated\)'
  # Processes sharing a copy agent that comes and goes.
  'staged operations outlive their copy agent.s communicator \(emulated\)'
  'processes whose device lanes yield: small collectives staged, large ones rerun \(emulated\)'
)
# Present only in a build with the PyTorch backend. PyTorch's fault cases (killed rank,
# DDP with a killed rank, a stalled rank and the group timeout, destroy with work
# pending, wait with a time limit): one run holds all six, about 30-50 s.
optional=(
  'torch_faults'
)
# The NCCL API program's fault cases, run directly (its CTest tests hold every case of a
# mode): "name|mode ranks|cases".
api=(
  'nccl_api faults, threads|threads 4|abort,abort_unblocks,revoke,revoke_inflight,peer_aborts,destroyed_comm'
  'nccl_api faults, procs|procs 3|abort,abort_unblocks,revoke_inflight,peer_aborts,kill_last,kill_root,kill_midop,init_missing_rank,abort_during_init'
)
wanted=("${tests[@]}" "${optional[@]}")
re="^($(IFS='|'; echo "${wanted[*]}"))\$"
if [ -n "${REPEAT_ONLY:-}" ]; then
  mapfile -t names < <(ctest --test-dir "$BUILD_DIR" -N -R "$re" | sed -n 's/^ *Test *#[0-9]*: //p' | grep -E "$REPEAT_ONLY" || true)
else
  mapfile -t names < <(ctest --test-dir "$BUILD_DIR" -N -R "$re" | sed -n 's/^ *Test *#[0-9]*: //p')
fi
declare -A apiRun
for a in "${api[@]}"; do
  IFS='|' read -r name how cases <<<"$a"
  if [ -z "${REPEAT_ONLY:-}" ] || grep -Eq "$REPEAT_ONLY" <<<"$name"; then
    names+=("$name")
    apiRun[$name]="$how|$cases"
  fi
done
[ ${#names[@]} -gt 0 ] || { echo "repeat_faults: no test selected" >&2; exit 2; }
# Every pattern must name a test: a renamed test would drop out silently otherwise.
for t in "${tests[@]}"; do
  printf '%s\n' "${names[@]}" | grep -Eq "^($t)\$" || [ -n "${REPEAT_ONLY:-}" ] ||
    { echo "repeat_faults: no test matches '$t'" >&2; exit 2; }
done
echo "repeat_faults: ${#names[@]} tests x $COUNT rounds, $LOAD busy processes beside them; logs in $WORK"
printf '  %s\n' "${names[@]}"

# The load: busy loops at the tests' own priority, stopped however the script ends.
loaders=()
for ((i = 0; i < LOAD; ++i)); do
  (while :; do :; done) &
  loaders+=($!)
  disown $!  # no "Terminated" line when they are stopped
done
trap 'kill "${loaders[@]}" 2>/dev/null || true' EXIT

# One run of one test; its output goes to $2. Prints nothing; returns the test's status.
runTest() {
  local name=$1 log=$2 rc=0
  if [ -n "${apiRun[$name]:-}" ]; then
    local how cases mode nranks
    IFS='|' read -r how cases <<<"${apiRun[$name]}"
    read -r mode nranks <<<"$how"
    # As CTest runs the program (tests/nccl/api.cmake), this mode's cases only.
    env NCCL_SOCKET_IFNAME=lo COLL_BOOTSTRAP_TIMEOUT_S=10 NCCL_API_TEST_MODE="$mode" NCCL_API_TEST_NRANKS="$nranks" \
      timeout 600 "$BUILD_DIR/tests/nccl/nccl_api_test_ours" --warn NoTests "$cases" >"$log" 2>&1 || rc=$?
    grep -q '^All tests passed' "$log" || [ "$rc" -ne 0 ] || rc=1
  else
    local exact
    exact="^$(printf '%s' "$name" | sed 's/[][\.*^$()+?{}|]/\\&/g')\$"
    ctest --test-dir "$BUILD_DIR" -R "$exact" --output-on-failure >"$log" 2>&1 || rc=$?
    grep -q '100% tests passed' "$log" || [ "$rc" -ne 0 ] || rc=1
  fi
  return "$rc"
}

# Worker k of JOBS runs the rounds k+1, k+1+JOBS, ... Each starts its round at its own
# place in the list, and a test's lock keeps it from running beside itself. A line per
# run goes to $WORK/runs.<k>: round, status, seconds, test.
worker() {
  local k=$1 n=${#names[@]} round i name t0 rc secs log
  for ((round = k + 1; round <= COUNT; round += JOBS)); do
    for ((i = 0; i < n; ++i)); do
      local idx=$(((i + k * n / JOBS) % n))
      name=${names[$idx]}
      rc=0
      {
        flock 9
        t0=$(date +%s.%N)
        runTest "$name" "$WORK/last.$k.log" || rc=$?
      } 9>"$WORK/lock.$idx"
      secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      printf '%s\t%s\t%s\t%s\n' "$round" "$rc" "$secs" "$name" >>"$WORK/runs.$k"
      if [ "$rc" -ne 0 ]; then
        log="$WORK/fail-round$round-$(printf '%s' "$name" | tr -c 'A-Za-z0-9' '_' | cut -c1-60).log"
        cp "$WORK/last.$k.log" "$log"
        echo "repeat_faults: round $round: FAILED $name ($log)"
      fi
    done
    echo "repeat_faults: round $round of $COUNT done, $(($(date +%s) - start)) s"
  done
}

commit=$(git describe --always --dirty 2>/dev/null || echo '?')  # what the run tests, as it starts
start=$(date +%s)
workers=()
for ((k = 0; k < JOBS; ++k)); do
  worker "$k" &
  workers+=($!)
done
trap 'kill "${loaders[@]}" "${workers[@]}" 2>/dev/null || true' EXIT
status=0
for w in "${workers[@]}"; do wait "$w" || status=1; done
[ "$status" -eq 0 ] || { echo "repeat_faults: a worker failed" >&2; exit 2; }

echo
printf '%-6s %-8s %-9s %s\n' runs failures slowest_s test
total=0
for name in "${names[@]}"; do
  read -r r f s < <(cat "$WORK"/runs.* | awk -F'\t' -v t="$name" \
    '$4 == t { ++r; if ($2 != 0) ++f; if ($3 > s) s = $3 } END { printf "%d %d %.1f\n", r, f, s }')
  total=$((total + f))
  printf '%-6s %-8s %-9s %s\n' "$r" "$f" "$s" "$name"
done
echo "repeat_faults: $total failed run(s) of $(cat "$WORK"/runs.* | wc -l) in $(($(date +%s) - start)) s, $JOBS worker(s), $(nproc) CPUs, commit $commit"
[ "$total" -eq 0 ]
}

main "$@"; exit $?  # exit at once: bash would otherwise read on in a file edited meanwhile

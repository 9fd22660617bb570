// How a wait learns that it must end in failure, for every executor (the host engine,
// comm/executor.h; the device proxy, device/proxy.h): verdicts over a communicator's
// AbortState and its operation timeout.
#pragma once

#include <atomic>
#include <chrono>

#include "base/status.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"

namespace coll {

// How long a lane may stay stuck after a peer went away (AbortState::peerGone: the root
// lost, a rank aborted) before that is its error: long enough for ranks that owe it
// nothing more to finish normally.
constexpr double kPeerGoneGraceS = 2.0;

// A connection closing under us is often the echo of another rank's failure: that rank's
// neighbours give up and close their sockets. The root names the rank that actually
// failed, so for a system or remote error this gives its notice (or the loss of the root
// itself) a second to arrive and returns that as the cause, with st as how it was seen
// here; st itself otherwise.
Status rootCause(AbortState& a, Status st);

// Makes st the communicator's fatal error (a no-op if one was raised already), after
// giving the root a moment to name the rank that really failed when st is a connection
// error (the echo of another rank's death); returns what was recorded.
Status recordFailure(AbortState& abort, Status st);

// The error of an operation that ran `ran` seconds against a timeout of `limit`.
Status opTimedOut(double ran, double limit);

// The error that ends the wait of `waiter` in an operation started at `started`: the
// abort state raised, a peer gone for longer than the grace period, or the operation past
// `timeoutS` (collCommSetTimeout; 0: none); ok otherwise. Reads no clock unless a peer is
// gone or a timeout is set (it runs on every idle pass of the smallest operations).
Status stalledVerdictSlow(AbortState& abort, const Waiter& waiter, double timeoutS,
                          std::chrono::steady_clock::time_point started);
inline Status stalledVerdict(AbortState& abort, const Waiter& waiter, double timeoutS,
                             std::chrono::steady_clock::time_point started) {
  if (!abort.raised() && !abort.peerGone.load(std::memory_order_relaxed) && timeoutS <= 0) return okStatus();
  return stalledVerdictSlow(abort, waiter, timeoutS, started);
}

}  // namespace coll

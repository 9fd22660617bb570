#include "bootstrap/failure.h"

#include <cstdio>
#include <thread>

namespace coll {

Status rootCause(AbortState& a, Status st) {
  if (st.code() != Code::kRemote && st.code() != Code::kSystem) return st;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
  while (!a.raised() && !a.peerGone.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (a.raised()) return Status(a.status().code(), a.status().message() + " (seen here as: " + st.message() + ")");
  if (a.peerGone.load()) return Status(Code::kRemote, a.peerGoneReason() + " (seen here as: " + st.message() + ")");
  return st;
}

Status recordFailure(AbortState& abort, Status st) {
  st = rootCause(abort, std::move(st));
  abort.set(st.code(), st.message());
  return st;
}

Status opTimedOut(double ran, double limit) {
  char text[160];
  std::snprintf(text, sizeof text,
                "timed out: not complete %.1f s after it started (timeout %g s: collCommSetTimeout or "
                "COLL_TIMEOUT_S)",
                ran, limit);
  return Status(Code::kTimeout, text);
}

Status stalledVerdictSlow(AbortState& a, const Waiter& waiter, double timeoutS,
                          std::chrono::steady_clock::time_point started) {
  if (a.raised()) return a.status();
  if (a.peerGone.load(std::memory_order_relaxed) && waiter.idleSeconds() > kPeerGoneGraceS)
    return remoteError(a.peerGoneReason());
  if (timeoutS > 0) {
    const double ran = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (ran > timeoutS) return opTimedOut(ran, timeoutS);
  }
  return okStatus();
}

}  // namespace coll

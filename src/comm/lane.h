// A lane of the host engine: work the progress loop (executor.h runLanes) advances
// without ever blocking on it, so one thread drives many lanes of many communicators.
// Two kinds implement it: a Program (a channel's or a send/recv peer's schedule of
// steps, algorithms/plan.h) and a one-shot operation (algorithms/oneshot.h: every rank
// hands its contribution to every peer at once; mailboxes in shared memory, or the ring's
// connectors across hosts). The loop asks every lane to move; when none could, it checks
// every lane's communicator and the lane's own reasons a stall is an error, then sleeps
// on what the first lane waits for.
#pragma once

#include <string>

#include "base/status.h"
#include "base/wait.h"

struct collComm;

namespace coll {

class Lane {
 public:
  virtual ~Lane() = default;
  virtual collComm* comm() const = 0;
  // Moves what can move: *moved when something did, *done once finished.
  virtual Status poll(bool* moved, bool* done) = 0;
  // While stalled: what to sleep on (an empty target polls).
  virtual WaitTarget waitTarget() const = 0;
  // The lane's own reasons its stall is an error, beyond its communicator's (ranks that
  // called different operations: a peer already in a later one). `failed`: asked right
  // after the lane failed, for the cause behind the failure, with no grace period.
  virtual Status diagnose(const Waiter& waiter, bool failed) const = 0;
  // Where the lane stands ("rank 0 channel 1, collAllReduce #3 ... step 2/6 at byte 0,
  // waiting for data from rank 1"): for stall reports.
  virtual std::string describe() const = 0;
  // The rank the lane waits for while stalled, or -1.
  virtual int blockedPeer() const = 0;
  // The lane's error as the caller sees it, made the communicator's fatal error.
  // `stalled`: found while nothing moved (diagnose, abort, timeout), not by poll.
  virtual Status fail(Status st, bool stalled) const = 0;
};

}  // namespace coll

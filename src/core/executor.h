// The host executor: advances Programs (one per channel or p2p lane, possibly of several
// communicators) without blocking on any one of them, so one thread can drive many
// channels and many ranks. When no lane can move it waits adaptively on what the first
// stalled lane needs, and checks every communicator's abort state.
#pragma once

#include <vector>

#include "algorithms/plan.h"
#include "core/status.h"

namespace coll {

// Runs every program to completion. On failure returns the first error, naming the
// rank, operation and peer; `failedComm` (if not null) receives the comm it belongs to.
Status runPrograms(std::vector<Program*>& programs, struct ::collComm** failedComm);

}  // namespace coll

// The core of a communicator: who this rank is, how it reaches the others and how its
// operations end in failure. Every part of a communicator (comm/comm.h) and every layer
// working for one (the device path, the copy agent) reads these through a reference,
// never through copies.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "base/status.h"
#include "base/wait.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/failure.h"

namespace coll {

class NetBackend;

struct CommCore {
  int rank = 0;
  int nranks = 0;
  std::unique_ptr<Bootstrap> bootstrap;
  std::shared_ptr<AbortState> abort;
  // The net backend every rank agreed on at init (null: the communicator spans no
  // network, one host with shared memory).
  NetBackend* net = nullptr;
  // collCommSetTimeout / config->timeoutMs / COLL_TIMEOUT_S: an operation still running
  // this long after it started fails with kTimeout and aborts the communicator. 0: no
  // limit. Read by the thread running the operation, written by any.
  std::atomic<double> opTimeoutS{0};
  double stallWarnS = 0;  // COLL_STALL_WARN_S; 0: no stall reports
  int64_t spinNs = 0;     // COLL_SPIN_US, for waiters
  // The same on every rank and (but for a one-in-2^64 chance) no other communicator: the
  // first bytes of the unique id's SHA-256 (NCCL's commHash, given to plugins).
  uint64_t commHash = 0;
};

// The error that ends a wait of an operation of c started at `started`: its abort state
// raised, its bootstrap root lost for longer than a grace period while stuck, or the
// operation past c's timeout (kTimeout); ok otherwise.
inline Status fatalWhileStalled(const CommCore& c, const Waiter& waiter,
                                std::chrono::steady_clock::time_point started) {
  return stalledVerdict(*c.abort, waiter, c.opTimeoutS.load(std::memory_order_relaxed), started);
}

}  // namespace coll

// The host executor: advances Programs (one per channel or p2p lane, possibly of several
// communicators) without blocking on any one of them, so one thread can drive many
// channels and many ranks. When no lane can move it waits adaptively on what the first
// stalled lane needs, and checks every communicator's abort state.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/oneshot.h"
#include "algorithms/plan.h"
#include "base/status.h"
#include "base/wait.h"
#include "comm/lane.h"

namespace coll {

// One slice of a step's data movement (flags as Step::flags): the result of combining
// `in` (a received slot) and `src` (local input) with the kernels, written to dst and/or
// out (a send slot). Null pointers are absent operands. Shared with the device
// executor's host emulation (device/device_exec.cc).
void hostSlice(uint8_t flags, const ReduceKernels* kernels, size_t elemSize, const char* in, const char* src, char* dst,
               char* out, size_t len, int nranks);

// The progress loop: runs every lane (lane.h) to completion. On failure returns the first
// error, naming the rank, operation and peer; `failedComm` (if not null) receives the comm
// it belongs to.
// `lanes` is the loop's scratch: reordered as lanes finish.
Status runLanes(std::span<Lane*> lanes, struct ::collComm** failedComm);
// The lanes of a launch: a program; a one-shot operation (started by the lane); lanes run
// one after another, in order.
std::unique_ptr<Lane> programLane(Program& p);
std::unique_ptr<Lane> oneShotLane(struct ::collComm* c, std::shared_ptr<class OneShot> os);
std::unique_ptr<Lane> sequenceLane(std::vector<std::unique_ptr<Lane>> lanes);
// runLanes over one one-shot operation (algorithms/oneshot.h), from start to finish.
Status runOneShot(struct ::collComm* c, const OneShotContext& ctx, const OpDesc& od, struct ::collComm** failedComm);

// Two ranks over net keep LL (one-shot) messages and ring slices on separate connections
// (algorithms/oneshot.h OneShotState::pair). A rank stalled for 2 s on one of them (waitingOnOneShot: the one-shot one) while the
// other holds data from the peer: the ranks called different operations or counts. (Data
// on the other connection can also be the peer's next operation, legitimately ahead of
// ours: two TCP connections keep no order between them, hence the grace period.)
// With `now`, no grace period: used when the awaited connection failed (the peer gave up
// first on the same mismatch and closed it), so the cause is named rather than the echo.
Status oneShotIntrusion(struct ::collComm* c, bool waitingOnOneShot, const Waiter& waiter, bool now = false);
// Makes st c's fatal error (after giving the root a moment to name the rank that really
// failed) and returns it prefixed with rank, lane, operation and the awaited peer.
Status failLane(struct ::collComm* c, const char* lane, const OpDesc& od, int peer, Status st);

}  // namespace coll

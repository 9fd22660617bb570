// One-sided puts and signals on windows (NCCL's ncclPutSignal, ncclSignal,
// ncclWaitSignal) for host-memory ranks.
//
// A window is known to every rank by its ordinal: windows are registered collectively, so
// the k-th window a rank made is the k-th of every rank. A put travels as bootstrap
// messages (tagged, ordered per peer, filed by the receiving rank's service thread
// whether or not it is waiting): the data in frames of at most kMaxFrameBytes, each naming the
// window, offset and length, the last one carrying the signal. The target writes them
// into its window when it waits for that peer's signals: data is the target's to read
// only once its wait has seen the signal, so nothing observable comes later than with a
// direct write, and a put never blocks on its target. What it costs: the data goes
// through TCP on loopback or the network (about the speed of the bootstrap's sockets),
// and puts pile up in the target's memory until it waits.
//
// As in NCCL 2.32, one context (0) and one signal index (0) exist, and flags must be 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/status.h"

struct collComm;

namespace coll {

struct SignalWait {
  int opCnt;  // signals to wait for (they are then taken)
  int peer;
  int sigIdx;
  int ctx;
};

// Sends `bytes` from `local` to offset `offset` of window `window` (an ordinal) of
// `peer`, then one signal; bytes 0 and local null: the signal alone. Returns once the
// data has left `local`.
Status putSignal(collComm* c, const void* local, size_t bytes, int peer, uint64_t window, size_t offset, int sigIdx);

// Waits until every wait's peer has sent opCnt more signals than this rank took before,
// writing their puts' data into this rank's windows, and takes them. A put that does not
// fit its window, or names one this rank does not have, fails the wait naming both.
Status waitSignals(collComm* c, std::span<const SignalWait> waits);

}  // namespace coll

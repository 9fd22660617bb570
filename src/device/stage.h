// Small operations on device buffers of ranks whose GPU is time-sliced between processes
// (no MPS), staged through host memory.
//
// On such a GPU only one process's kernels run at a time, so the device executor's lanes
// yield and are run again (device_exec.h deviceYieldNs): each turn costs a kernel end, an
// event, a relaunch and a switch of contexts (an 8-byte allreduce of 2 processes on an
// H100: 695-740 us over 2 runs). A small operation is better moved by copies: its inputs
// are copied to pinned host memory on the caller's stream, the host path runs it
// (one-shot, ring, ... over the host set), and its outputs are copied back, the call
// returning once they have landed (the same H100: 155-200 us at 8 B, 36-67 us at 32-128
// KiB, 503 us at 2 MiB against 730 on the lanes; 8 MiB is faster on the lanes).
//
// Every rank of the communicator stages the same operations: staging is on when any
// rank's lanes yield (agreed at init), for each operation of at most
// COLL_DEVICE_STAGE_BYTES by a measure every rank computes alike (its count, times the
// ranks for gathers and scatters; a send's is its receive's). A group's other operations
// stay on the lanes, as a launch of their own. Where ranks of other processes share the
// GPU, the lowest rank makes their copies (device/copy_agent.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "device/copy_agent.h"

namespace coll {

struct DeviceComm;

// What a staged launch copies back when its host run is done.
struct Staging {
  std::vector<StageCopy> outs;         // the caller's output buffers and their staged copies
  std::vector<void*> outStreams;       // each one's stream
  std::shared_ptr<void> memory;        // the staged buffers
  bool emulated = false;               // COLL_DEVICE_EMULATE: "device" buffers are host memory
  CopyAgent* agent = nullptr;          // staged in this client's area of the agent's segment
  bool agentCopiedIn = false;          // and the agent copied the inputs
  uint64_t startNs = 0, stagedNs = 0;  // stageIn's start and end (COLL_DEVICE_TIMING)
};

// Whether d stages od (an operation on device buffers).
bool stagedOp(const DeviceComm& d, const OpDesc& od);

// Waits for the work queued on the operations' streams, copies their inputs to host
// memory and points `ops` at the staged buffers (no longer device operations); where an
// operation's input and output overlap (in place), they are staged as one range. Refuses
// streams being captured into a CUDA graph.
Status stageIn(DeviceComm& d, std::vector<OpDesc>& ops, Staging* s);

// Copies the outputs back to the caller's buffers, on each operation's stream, and waits
// for them; with COLL_DEVICE_TIMING logs where d's staged launch spent its time.
Status stageOut(const DeviceComm& d, const Staging& s);

}  // namespace coll

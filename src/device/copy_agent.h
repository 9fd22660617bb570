// The copy agent: one process does the staging copies of every rank on its GPU.
//
// Staged launches (device/stage.h) copy a small operation's inputs to host memory and its
// outputs back. Where ranks of several processes share a GPU without MPS, the GPU runs
// one process's context at a time, and a context whose work comes right after another
// context's waits for the switch: on an H100, ~135 us, where a copy takes ~8. Both
// processes copying at the same moment (as a collective makes them) paid it once or
// twice per call: 155-240 us per 8-byte allreduce of 2 processes against ~30 of copies
// and host run (docs/PERFORMANCE.md, "Time-sliced GPUs").
//
// So the lowest rank of the communicator on each such GPU (the agent) copies for the
// ranks of the other processes on it (its clients), all in its own context: no switch.
// A client's device buffers reach the agent as CUDA IPC handles of their allocations,
// which the agent opens once and keeps (up to 64 per client); the client checks two of
// them per request for having been freed, and the agent then closes its mapping. Until
// then a freed allocation stays mapped by the agent, and CUDA leaves freeing an exported
// allocation that an importer still maps undefined: where a program frees and reallocates
// device memory under memory pressure, COLL_DEVICE_COPY_AGENT=0. Allocations without an IPC handle (cudaMallocAsync pools, VMM) the
// client copies itself. Under COLL_DEVICE_EMULATE, where "device" buffers are host memory,
// the agent reads and writes the client's memory with process_vm_readv/writev. The staged
// memory is the client's area of a segment the agent creates and every client maps,
// registered with CUDA by both.
//
// A request (one per direction of a staged launch) lives in the client's record of that
// segment: the list of copies, then `state` set to posted. The agent's server thread,
// woken by a doorbell, takes it (posted -> taken) with every other client's posted one,
// queues their copies, waits for them once (also after one failed: nothing lands after a
// request is done) and marks each done with a
// status: a copy the agent cannot make (an IPC handle it cannot open, a kernel refusing
// process_vm_*) comes back refused and the client makes every copy itself, as without an
// agent; a refusal that would recur (the agent's segment not registered, process_vm_*
// forbidden) ends the client's use of the agent. So does the agent closing (its
// communicator destroyed: the client withdraws its untaken request and copies itself).
// When the client's call fails (aborted, timed out) with the request taken, it waits a
// second for the agent; an agent that has not finished by then (its process stopped) may
// still write that call's outputs, and the client stops using it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"

namespace coll {

struct DeviceComm;

// One copy of a staged launch: between a caller's device buffer and the staged memory.
struct StageCopy {
  void* device;  // the caller's buffer (a client's, on its GPU)
  char* host;    // inside the client's staged area (CopyAgent::area)
  size_t bytes;
  bool toDevice;  // host -> device (outputs), else device -> host (inputs)
};

class CopyAgent {
 public:
  // Collective over d's bootstrap (every rank calls it, once staging is on): returns the
  // agent of d's GPU on the agent rank and its clients, nullptr on every other rank and
  // where the agent could not set up (each client then copies itself).
  static Result<std::unique_ptr<CopyAgent>> create(DeviceComm& d);
  ~CopyAgent();
  CopyAgent(const CopyAgent&) = delete;
  CopyAgent& operator=(const CopyAgent&) = delete;

  // On a client: its staged area in the shared segment (nullptr on the agent) and size.
  char* area() const { return area_; }
  size_t areaBytes() const { return areaBytes_; }
  int agentRank() const { return agentRank_; }
  // A client that has not given the agent up (it closed, refused for good, or left a
  // request unfinished).
  bool isClient() const { return area_ != nullptr && usable_; }

  // On a client: has the agent make copies (their `host` inside area()). True when done;
  // false when the agent refused or has closed (nothing written where it refused before
  // copying; the caller then makes every copy itself); an error when d's communicator was aborted
  // while waiting.
  Result<bool> copy(std::span<const StageCopy> copies);

  static constexpr size_t kBuffers = 64;  // a client's allocations in its table
  struct Shared;                          // the segment's layout (copy_agent.cc)
  struct ClientRequest;                   // a client's request in it
  struct Server;                          // the agent's side

 private:
  CopyAgent() = default;
  struct SetupEntry;
  void createSegment(size_t nclients, SetupEntry* entry);
  void mapSegment(const SetupEntry& theirs, int clientIndex, int32_t agentPid);
  void startServer(std::vector<int32_t> pids);
  Result<bool> request(std::span<const StageCopy> copies);
  void sweep(ClientRequest& b);
  size_t entryFor(ClientRequest& b, const StageCopy& cp, const std::array<bool, kBuffers>& used);
  Result<bool> await(ClientRequest& b);
  bool outcome(const ClientRequest& b);
  Status abandon(ClientRequest& b, Status st);

  DeviceComm* d_ = nullptr;
  int agentRank_ = -1;
  Shared* seg_ = nullptr;  // the mapped segment
  size_t segBytes_ = 0;
  int clientIndex_ = -1;  // a client's index among the agent's clients
  char* area_ = nullptr;
  size_t areaBytes_ = 0;
  uint32_t seq_ = 0;
  std::unique_ptr<Server> server_;      // on the agent
  struct Exported;                      // a client's allocations already handed over
  std::vector<Exported> exported_;      // by entry of the client's buffer table
  size_t nextExport_ = 0;               // the entry a new allocation takes next
  size_t sweepAt_ = 0;                  // the next entry sweep() checks
  std::vector<uint64_t> unexportable_;  // ids of allocations without an IPC handle
  bool usable_ = true;
  bool areaRegistered_ = false;  // the area, with CUDA in this process too
  bool refusedLogged_ = false;
};

}  // namespace coll

// The proxy thread of a communicator on the device path.
//
// A kernel (or its host emulation) fills and drains FIFOs by itself, but a net
// connector's FIFO must be moved through the net backend by someone calling progress():
// that is this thread. It also watches each launch to its end: it raises the kernels'
// abort word when the communicator is aborted or fails (so no kernel spins forever on a
// peer that is gone), reads the lanes' results when the launch completes, and turns a
// lane that ended early into the communicator's error (collCommGetAsyncError), naming the
// rank, lane, operation and peer.
//
// The thread starts with the first device launch and stops when the communicator is
// freed (after its launches are done). It sleeps on a condition variable while nothing is
// pending. While launches run it polls busily only when it must: they have net
// connectors to move, or a thread waits for one of them (wait, quiesce). Otherwise
// (kernels over p2p or shm FIFOs, the caller gone on to queue more work) it checks them
// every kLazyPollUs, so back-to-back kernels do not keep a host core spinning.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "device/device_lane.h"

namespace coll {

struct DeviceComm;

// Nanoseconds of the host's real-time clock: the clock a GPU's global timer follows, so
// COLL_DEVICE_TIMING can set a kernel's start beside the call that launched it.
inline uint64_t wallNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now()
                                                                                        .time_since_epoch())
                                   .count());
}

// When a launch's lanes are done (a CUDA event, or the emulation's lane threads).
class Completion {
 public:
  virtual ~Completion() = default;
  // Whether the lanes finished; a device fault ends them too, returned in *err.
  virtual bool done(Status* err) = 0;
  std::atomic<uint32_t> runs{1};  // times the lanes were started (more when they yield)
};

// One communicator's share of a launch, as the proxy follows it.
struct PendingLaunch {
  std::shared_ptr<Completion> completion;
  std::vector<SendConnector*> sends;  // connectors the proxy progresses (net)
  std::vector<RecvConnector*> recvs;
  const DeviceLaneResult* results = nullptr;  // host view, one per lane
  std::shared_ptr<void> resultsOwner;
  // For messages only, formatted when one is needed (a launch may hold thousands of steps).
  struct StepInfo {
    uint16_t op;   // index into ops
    int32_t from;  // rank it receives from, -1: none
    int32_t to;    // rank it sends to, -1: none
  };
  struct LaneInfo {
    std::string name;  // "channel 0"
    std::vector<StepInfo> steps;
  };
  using LaneInfos = std::vector<LaneInfo>;
  // Shared with the plan the launch was lowered from (device/plan_cache.h): a plan run
  // again is described again without a copy.
  std::shared_ptr<const LaneInfos> laneInfo;
  const LaneInfos& lanes() const {
    static const LaneInfos none;
    return laneInfo ? *laneInfo : none;
  }
  std::shared_ptr<const std::vector<OpDesc>> ops;  // the launch's operations
  // "collAllReduce #3 (count 1024, float32, sum)" for step `step` of lane l, or "".
  std::string stepOp(const LaneInfo& l, uint32_t step) const;
  // "receiving from rank 1, sending to rank 2" for that step.
  std::string stepPeers(const LaneInfo& l, uint32_t step) const;
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
  uint64_t calledNs = 0;     // COLL_DEVICE_TIMING: when the launching call began (wallNs)
  uint64_t builtNs = 0;      // its programs built (algorithms/plan.h), or its plan found
  bool planReused = false;   // lowered by an earlier launch (device/plan_cache.h)
  uint64_t assembledNs = 0;  // its lanes lowered and assembled
  uint64_t submittedNs = 0;  // and the kernel queued
  bool stallReported = false;
  uint32_t mailSeq = 0;  // the comm's last mailbox round when the launch was lowered
  // A lane seen waiting for data from a peer that went on to a later operation
  // (DeviceProxy::checkPeerAhead): lane index (-1: none), its step, and since when.
  int aheadLane = -1;
  uint32_t aheadStep = 0;
  std::chrono::steady_clock::time_point aheadSince{};
  // Set by the proxy when the launch is over; status its first error.
  bool finished = false;
  Status status;
};

class DeviceProxy {
 public:
  static constexpr int kLazyPollUs = 200;
  static constexpr double kPeerAheadS = 1.0;  // checkPeerAhead's patience
  explicit DeviceProxy(DeviceComm* c) : c_(c) {}
  ~DeviceProxy();
  // The word kernels poll (host view and the address kernels use).
  Status init();
  uint32_t* abortWordHost() const { return abortHost_; }
  const uint32_t* abortWordDevice() const { return abortDevice_; }

  // Follows a launch; the thread starts on the first one.
  void submit(std::shared_ptr<PendingLaunch> p);
  // Waits until p is finished and returns its status.
  Status wait(const std::shared_ptr<PendingLaunch>& p);
  // Waits until nothing is pending; with abort, first raises the abort word.
  void quiesce(bool abort);

 private:
  void loop();
  // One pass over every pending launch; returns whether anything moved.
  bool pass(std::vector<std::shared_ptr<PendingLaunch>>& live);
  // COLL_STALL_WARN_S: where each lane of a launch pending that long stands.
  void reportStall(PendingLaunch& p, double seconds);
  // The first lane of p waiting for data from a peer whose mailbox shows a round beyond
  // p's, and its step; -1 when none.
  int laneWaitingOnPeerAhead(const PendingLaunch& p, uint32_t* step) const;
  void checkPeerAhead(PendingLaunch& p);
  // COLL_DEVICE_TIMING: where a finished launch's time went.
  void logTiming(const PendingLaunch& p) const;
  void finish(PendingLaunch& p, Status st);

  DeviceComm* c_;
  uint32_t* abortHost_ = nullptr;
  const uint32_t* abortDevice_ = nullptr;
  std::shared_ptr<void> abortMemory_;  // owns the word: pinned mapped memory, or a host word
  std::mutex mu_;
  std::condition_variable cv_;      // work arrived / stop
  std::condition_variable doneCv_;  // a launch finished
  std::vector<std::shared_ptr<PendingLaunch>> pending_;
  uint64_t submitted_ = 0;  // launches ever submitted (wakes a lazy wait)
  int waiters_ = 0;         // threads in wait() or quiesce()
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace coll

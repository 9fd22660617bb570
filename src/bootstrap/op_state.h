// Where a rank stands in its operations, for the job-wide hang report (hang_report.h):
// written by the thread running the communicator's operations, read by the bootstrap
// service thread when the root asks.
//
// Recording a launch is on the path of the smallest operations (0.2 us over shared
// memory), so it takes no lock and reads no clock: started() and finished() are relaxed
// stores under a sequence counter (a seqlock: the reader retries a torn read). The
// service thread stamps the time of every change it sees (tick(), on each of its passes,
// at least every 100 ms), which dates the phase closely enough for a report. What is
// rare (a stall's description, a failure) is kept under a lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "bootstrap/wire.h"

namespace coll {

// What starts the text of a finding, in the errors that carry one.
constexpr const char* kFindingPrefix = "job-wide report: ";

// An operation call's signature, which every rank must call alike.
struct OpSignature {
  uint64_t seq = 0;
  int32_t kind = -1, dtype = 0, op = 0, root = 0;
  uint64_t count = 0;
  // 1: a send/receive launch, whose peers and counts differ between ranks by design (a
  // report compares only that it is one).
  int32_t p2p = 0;
};

class OpStateBox {
 public:
  // The words for a call ("collAllReduce #3 (count 1024, float32, sum)"), from the layer
  // that knows the collectives; made only when a state is sent.
  using Describe = std::string (*)(const OpSignature&);
  void setDescribe(Describe d);

  // The thread running operations. A launch of nOps operations begins, `first` first:
  void started(const OpSignature& first, uint32_t nOps);
  // it completed; the next operation will be `nextSeq`:
  void finished(uint64_t nextSeq);
  // a stalled lane of it waits for `peer` (-1: none known), `where` saying how:
  void waiting(int peer, const std::string& where);
  // it failed with `error` (timedOut: by the operation timeout). False when no launch was
  // running (the failure came before it started, or was recorded already).
  bool failed(bool timedOut, const std::string& error);

  // The service thread: notes when the state last changed.
  void tick();
  OpStateMsg snapshot(ReportWhy why) const;

  // The service thread files the root's finding here.
  void setFinding(const std::string& text);
  uint64_t findings() const;
  // Waits up to `seconds` for a finding after the first `after` ones; empty if none came.
  std::string awaitFinding(uint64_t after, double seconds) const;
  // The last finding if it came while the current launch ran (a report another rank asked
  // for), else empty: what a rank failing after the root has gone can still say.
  std::string findingOfLaunch() const;
  // The last finding if it names `cause` (a rank's death, in the words the communicator's
  // error has), else empty: what a rank can still say once the root has gone.
  std::string findingNaming(const std::string& cause) const;
  // The finding for the errors of a communicator that failed between launches: the first
  // caller gets it by `ask` (asking the root and waiting), later callers the same text.
  std::string failureFinding(const std::function<std::string()>& ask);

 private:
  struct Fields {
    OpSignature call;  // the launch's first operation (idle: the last launch's)
    uint64_t at;       // running: call.seq; idle: the next operation
    uint32_t nOps;
    OpPhase phase;
    uint64_t launches;  // launches started so far: tags what the lock below holds
  };
  void store(const OpSignature& call, uint64_t at, uint32_t nOps, OpPhase phase, uint64_t launches);
  Fields load() const;
  void stampLocked() const;

  // Seqlocked (odd while the writer is inside).
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> seq_{0}, at_{0}, count_{0}, launches_{0};
  std::atomic<int32_t> kind_{-1}, dtype_{0}, op_{0}, root_{0}, p2p_{0};
  std::atomic<uint32_t> nOps_{0}, phase_{0};

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  Describe describe_ = nullptr;
  mutable uint64_t seenVersion_ = 0;
  mutable double seenAt_ = 0;  // when tick() first saw seenVersion_ (monotonic seconds)
  uint64_t detailLaunch_ = 0;  // the launch waitPeer_ and where_ are about
  int waitPeer_ = -1;
  std::string where_;
  uint64_t findings_ = 0;
  std::string finding_;
  uint64_t findingLaunch_ = 0;  // the launch running when finding_ came; 0: none was

  std::mutex failureMu_;  // held while the first caller asks; not mu_, which the answer needs
  bool failureAsked_ = false;
  std::string failureFinding_;
};

}  // namespace coll

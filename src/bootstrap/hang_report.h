// The job-wide hang report. Every rank keeps where it stands in its operations in an
// OpStateBox (written by the thread running them, read by the bootstrap service thread).
// When an operation stalls past COLL_STALL_WARN_S, times out or fails, its rank sends its
// state to the root, which asks every other rank for theirs, prints one report and sends
// each rank the cause it found (RootMsg::kReport); tools/collstat asks for the same
// report on demand.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/wire.h"

namespace coll {

// What a rank's report says about one operation call: its signature, which every rank
// must call alike.
struct OpCall {
  uint64_t seq = 0;
  int32_t kind = -1, dtype = 0, op = 0, root = 0;
  uint64_t count = 0;
};

class OpStateBox {
 public:
  // The words for a call ("collAllReduce #3 (count 1024, float32, sum)"), from the layer
  // that knows the collectives; made only when a state is sent, so that recording a call
  // costs no formatting.
  using Describe = std::string (*)(const OpCall&);
  void setDescribe(Describe d);
  // The rank runs the launch whose first operation is `first`, of nOps operations.
  void started(const OpCall& first, uint32_t nOps);
  // That launch completed; the next operation will be `nextSeq`.
  void finished(uint64_t nextSeq);
  // A stalled lane of the launch waits for `peer` (-1: none known); `where` says how.
  void waiting(int peer, const std::string& where);
  // The launch failed with `error` (timedOut: by the operation timeout); false when no
  // launch was running (its failure came before it started, or was recorded already).
  bool failed(bool timedOut, const std::string& error);
  OpStateMsg snapshot(ReportWhy why) const;

  // The bootstrap service thread files the root's finding here.
  void setFinding(const std::string& text);
  uint64_t findings() const;
  // Waits up to `seconds` for a finding after the first `after` ones; empty if none came.
  std::string awaitFinding(uint64_t after, double seconds) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  OpStateMsg s_{};
  OpCall call_{};  // the launch's first operation, or the last one completed
  Describe describe_ = nullptr;
  bool init_ = false;
  std::chrono::steady_clock::time_point since_{};
  uint64_t findings_ = 0;
  std::string finding_;
};

// What the root knows of one rank when it writes the report.
struct RankView {
  enum class Kind { kAnswered, kNoAnswer, kGone, kLeft };
  Kind kind = Kind::kNoAnswer;
  bool known = false;  // `state` holds the last state it sent (a gone rank's, before it went)
  OpStateMsg state{};
  std::string who;   // "rank 2 (pid 123 on node1)"
  std::string gone;  // kGone / kLeft: how it went
};

struct HangReport {
  std::string text;   // the report, several lines
  std::string cause;  // one line: what every rank's error should carry
};

// The report over every rank's view; `header` is its first line.
HangReport analyzeHang(const std::vector<RankView>& ranks, const std::string& header);

// "0-2,5": a set of ranks in ascending order, runs collapsed.
std::string rankList(const std::vector<int>& ranks);

}  // namespace coll

// The job-wide hang report. Every rank keeps where it stands in its operations in an
// OpStateBox (op_state.h).
// When an operation stalls past COLL_STALL_WARN_S, times out or fails, its rank sends its
// state to the root, which asks every other rank for theirs, prints one report and sends
// each rank the cause it found (RootMsg::kReport); tools/collstat asks for the same
// report on demand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/op_state.h"
#include "bootstrap/wire.h"

namespace coll {

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

#include "bootstrap/hang_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

namespace coll {

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? "," : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

namespace {

std::string ranksWord(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankList(ranks);
}

bool inOp(const OpStateMsg& s) { return s.phase != OpPhase::kIdle; }

std::string phaseLine(const OpStateMsg& s) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", s.seconds);
  std::string where = s.where[0] ? std::string(": ") + s.where : "";
  switch (s.phase) {
    case OpPhase::kIdle:
      if (s.kind < 0) return std::string("has called no operation yet (") + secs + ")";
      return std::string("idle for ") + secs + " since " + s.what + " completed; next: operation #" +
             std::to_string(s.seq);
    case OpPhase::kRunning: return std::string("in ") + s.what + " for " + secs + where;
    case OpPhase::kFailed: return std::string("failed in ") + s.what + where;
    case OpPhase::kTimedOut: return std::string("timed out in ") + s.what + where;
  }
  return "";
}

std::string rankLine(const RankView& v) {
  switch (v.kind) {
    case RankView::Kind::kAnswered: return v.who + ": " + phaseLine(v.state);
    case RankView::Kind::kNoAnswer:
      return v.who + ": did not answer (a stopped or frozen process, or one that does not progress)";
    case RankView::Kind::kGone:
    case RankView::Kind::kLeft: return v.who + ": " + v.gone + (v.known ? "; last seen " + phaseLine(v.state) : "");
  }
  return v.who;
}

using Sig = std::tuple<int32_t, int32_t, int32_t, int32_t, uint64_t>;
Sig sigOf(const OpStateMsg& s) {
  if (s.p2p) return {-2, 0, 0, 0, 0};  // sends and receives: peers and counts differ by design
  return {s.kind, s.dtype, s.op, s.root, s.count};
}

// The lowest operation any rank that answered is in, or will call next.
uint64_t frontier(const std::vector<RankView>& ranks) {
  uint64_t n = UINT64_MAX;
  for (const RankView& v : ranks)
    if (v.kind == RankView::Kind::kAnswered) n = std::min(n, v.state.seq);
  if (n != UINT64_MAX) return n;
  for (const RankView& v : ranks)
    if (v.known) n = std::min(n, v.state.seq);
  return n;
}

// Ranks in operation #n by what they called, largest group first (ties: lowest rank).
std::vector<std::vector<int>> callersAt(const std::vector<RankView>& ranks, uint64_t n) {
  std::map<Sig, std::vector<int>> by;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankView& v = ranks[r];
    const bool stateHere = v.kind == RankView::Kind::kAnswered || v.known;
    if (stateHere && inOp(v.state) && v.state.seq == n) by[sigOf(v.state)].push_back(static_cast<int>(r));
  }
  std::vector<std::vector<int>> groups;
  for (auto& [sig, rs] : by) groups.push_back(rs);
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
    return a.size() != b.size() ? a.size() > b.size() : a.front() < b.front();
  });
  return groups;
}

std::string mismatchCause(const std::vector<RankView>& ranks, const std::vector<std::vector<int>>& groups) {
  std::string cause;
  const std::string ref = ranks[groups[0].front()].state.what;
  for (size_t g = 1; g < groups.size(); ++g) {
    if (!cause.empty()) cause += "; ";
    cause += ranksWord(groups[g]) + " called " + ranks[groups[g].front()].state.what + " where " +
             ranksWord(groups[0]) + " called " + ref;
  }
  return cause + ": the ranks called different operations or counts";
}

std::vector<int> ranksWhere(const std::vector<RankView>& ranks, bool (*pred)(const RankView&)) {
  std::vector<int> out;
  for (size_t r = 0; r < ranks.size(); ++r)
    if (pred(ranks[r])) out.push_back(static_cast<int>(r));
  return out;
}

std::string goneCause(const std::vector<RankView>& ranks, const std::vector<int>& gone, const std::string& inN) {
  std::string cause;
  for (int r : gone) cause += (cause.empty() ? "" : "; ") + ranks[r].who + " " + ranks[r].gone;
  return cause + inN;
}

// The one-line cause: a mismatch first (it explains the rest), then ranks gone, ranks
// that never called the operation, ranks that did not answer, else every rank waits.
std::string findCause(const std::vector<RankView>& ranks, uint64_t n) {
  const auto groups = callersAt(ranks, n);
  if (groups.size() > 1) return mismatchCause(ranks, groups);
  const std::string op = groups.empty() ? "operation #" + std::to_string(n) : ranks[groups[0].front()].state.what;
  const std::string inN = groups.empty() ? ""
                                         : " while " + ranksWord(groups[0]) +
                                               (groups[0].size() == 1 ? " was in " : " were in ") + op;
  auto killed = ranksWhere(ranks, [](const RankView& v) { return v.kind == RankView::Kind::kGone; });
  if (!killed.empty()) return goneCause(ranks, killed, inN);
  auto absent = ranksWhere(ranks, [](const RankView& v) {
    return v.kind == RankView::Kind::kAnswered && v.state.phase == OpPhase::kIdle;
  });
  std::erase_if(absent, [&](int r) { return ranks[r].state.seq != n; });
  if (!absent.empty() && !groups.empty())
    return ranksWord(absent) + " never called " + op + (absent.size() == 1 ? ": it is idle; " : ": they are idle; ") +
           ranksWord(groups[0]) + " wait in it";
  // A rank that left after failing in an operation is an echo of the cause, not the cause.
  auto left = ranksWhere(ranks, [](const RankView& v) {
    return v.kind == RankView::Kind::kLeft && !(v.known && inOp(v.state));
  });
  if (!left.empty() && !groups.empty()) return goneCause(ranks, left, inN);
  auto silent = ranksWhere(ranks, [](const RankView& v) { return v.kind == RankView::Kind::kNoAnswer; });
  if (!silent.empty()) return ranksWord(silent) + " did not answer the root (stopped, frozen or not progressing)";
  if (groups.empty()) return "no operation is in progress";
  return "every rank that answered is in " + op + ", waiting on another (a transport or library fault)";
}

}  // namespace

HangReport analyzeHang(const std::vector<RankView>& ranks, const std::string& header) {
  HangReport rep;
  rep.text = header + "\n";
  for (const RankView& v : ranks) rep.text += "  " + rankLine(v) + "\n";
  const uint64_t n = frontier(ranks);
  rep.cause = n == UINT64_MAX ? "no rank answered" : findCause(ranks, n);
  rep.text += "  cause: " + rep.cause;
  return rep;
}

}  // namespace coll

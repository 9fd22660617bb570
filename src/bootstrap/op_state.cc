#include "bootstrap/op_state.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace coll {

namespace {

template <size_t N>
void copyText(char (&field)[N], const std::string& text) {
  std::snprintf(field, N, "%s", text.c_str());
}

double monotonicNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr auto kRelaxed = std::memory_order_relaxed;

}  // namespace

void OpStateBox::setDescribe(Describe d) {
  std::lock_guard<std::mutex> lock(mu_);
  describe_ = d;
}

// One writer (the thread running operations), so the version needs no read-modify-write.
// The call is read field by field (never copied whole): the caller has just written it
// that way, and a wide load of narrow stores waits for them to reach the cache.
void OpStateBox::store(const OpSignature& call, uint64_t at, uint32_t nOps, OpPhase phase, uint64_t launches) {
  const uint64_t v = version_.load(kRelaxed);
  version_.store(v + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  seq_.store(call.seq, kRelaxed);
  kind_.store(call.kind, kRelaxed);
  dtype_.store(call.dtype, kRelaxed);
  op_.store(call.op, kRelaxed);
  root_.store(call.root, kRelaxed);
  count_.store(call.count, kRelaxed);
  p2p_.store(call.p2p, kRelaxed);
  at_.store(at, kRelaxed);
  nOps_.store(nOps, kRelaxed);
  phase_.store(static_cast<uint32_t>(phase), kRelaxed);
  launches_.store(launches, kRelaxed);
  version_.store(v + 2, std::memory_order_release);
}

OpStateBox::Fields OpStateBox::load() const {
  for (;;) {
    const uint64_t v = version_.load(std::memory_order_acquire);
    Fields f{{seq_.load(kRelaxed), kind_.load(kRelaxed), dtype_.load(kRelaxed), op_.load(kRelaxed),
              root_.load(kRelaxed), count_.load(kRelaxed), p2p_.load(kRelaxed)},
             at_.load(kRelaxed),
             nOps_.load(kRelaxed),
             static_cast<OpPhase>(phase_.load(kRelaxed)),
             launches_.load(kRelaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (!(v & 1) && version_.load(kRelaxed) == v) return f;
  }
}

void OpStateBox::started(const OpSignature& first, uint32_t nOps) {
  store(first, first.seq, nOps, OpPhase::kRunning, launches_.load(kRelaxed) + 1);
}

void OpStateBox::finished(uint64_t nextSeq) {
  const uint64_t v = version_.load(kRelaxed);
  version_.store(v + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  at_.store(nextSeq, kRelaxed);
  phase_.store(static_cast<uint32_t>(OpPhase::kIdle), kRelaxed);
  version_.store(v + 2, std::memory_order_release);
}

void OpStateBox::waiting(int peer, const std::string& where) {
  const Fields f = load();
  if (f.phase != OpPhase::kRunning) return;
  std::lock_guard<std::mutex> lock(mu_);
  detailLaunch_ = f.launches;
  waitPeer_ = peer;
  where_ = where;
}

bool OpStateBox::failed(bool timedOut, const std::string& error) {
  Fields f = load();
  if (f.phase != OpPhase::kRunning) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    detailLaunch_ = f.launches;
    where_ = error;
  }
  f.phase = timedOut ? OpPhase::kTimedOut : OpPhase::kFailed;
  store(f.call, f.at, f.nOps, f.phase, f.launches);
  return true;
}

void OpStateBox::stampLocked() const {
  const uint64_t v = version_.load(kRelaxed);
  if (v == seenVersion_ && seenAt_ > 0) return;
  seenVersion_ = v;
  seenAt_ = monotonicNow();
}

void OpStateBox::tick() {
  std::lock_guard<std::mutex> lock(mu_);
  stampLocked();
}

OpStateMsg OpStateBox::snapshot(ReportWhy why) const {
  const Fields f = load();
  OpStateMsg m{};
  m.seq = f.at;
  m.nOps = f.nOps;
  m.phase = f.phase;
  m.why = why;
  m.kind = f.call.kind;
  m.dtype = f.call.dtype;
  m.op = f.call.op;
  m.root = f.call.root;
  m.count = f.call.count;
  m.p2p = f.call.p2p;
  std::lock_guard<std::mutex> lock(mu_);
  stampLocked();
  const bool detail = f.launches == detailLaunch_ && f.phase != OpPhase::kIdle;
  m.waitPeer = detail ? waitPeer_ : -1;
  if (detail) copyText(m.where, where_);
  if (f.call.kind >= 0 && describe_) copyText(m.what, describe_(f.call));
  m.seconds = std::max(0.0, monotonicNow() - seenAt_);
  return m;
}

void OpStateBox::setFinding(const std::string& text) {
  const Fields f = load();
  {
    std::lock_guard<std::mutex> lock(mu_);
    finding_ = text;
    ++findings_;
    findingLaunch_ = f.phase == OpPhase::kIdle ? 0 : f.launches;
  }
  cv_.notify_all();
}

uint64_t OpStateBox::findings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return findings_;
}

std::string OpStateBox::awaitFinding(uint64_t after, double seconds) const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return findings_ > after; });
  return findings_ > after ? finding_ : std::string();
}

std::string OpStateBox::findingOfLaunch() const {
  const Fields f = load();
  if (f.phase == OpPhase::kIdle) return {};
  std::lock_guard<std::mutex> lock(mu_);
  return findingLaunch_ != 0 && findingLaunch_ == f.launches ? finding_ : std::string();
}

std::string OpStateBox::findingNaming(const std::string& cause) const {
  std::lock_guard<std::mutex> lock(mu_);
  return !cause.empty() && finding_.find(cause) != std::string::npos ? finding_ : std::string();
}

std::string OpStateBox::failureFinding(const std::function<std::string()>& ask) {
  std::lock_guard<std::mutex> lock(failureMu_);
  if (!failureAsked_) failureFinding_ = ask();
  failureAsked_ = true;
  return failureFinding_;
}

}  // namespace coll

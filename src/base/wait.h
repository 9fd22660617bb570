// Adaptive waiting: spin (with a pause instruction), then yield, then sleep on a futex
// (or poll a socket) with a short timeout, so that 8 ranks on 2 cores still progress
// and 2 ranks on 2 cores still hand off in well under a microsecond. Every sleep is
// bounded so that callers re-check abort flags and deadlines.
//
// The spin is adaptive per thread: a wait that ended only after this thread yielded its
// CPU to another task (the peer it waits for shares the CPU, e.g. two rank threads the
// scheduler stacked on one core, or more ranks than cores) halves the thread's spin
// budget, and a wait that ended without that doubles it back toward COLL_SPIN_US. Spinning
// on a CPU the peer needs only delays the peer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace coll {

// What an idle executor may block on: a counter (futex) or a socket.
struct WaitTarget {
  std::atomic<uint32_t>* word = nullptr;
  std::atomic<uint32_t>* waiters = nullptr;
  uint32_t seen = 0;  // sleep while *word == seen
  int fd = -1;
  short events = 0;
  bool shared = false;  // word lives in memory shared between processes
  // Longest futex sleep. Shorter where the writer wakes without a full fence, so a
  // wake lost to that race costs at most this much.
  int maxSleepUs = 10000;
};

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Wakes every sleeper on word.
void futexWake(std::atomic<uint32_t>* word, bool shared);
// Wakes sleepers on word if any are registered. Call after publishing a new value.
void futexWakeIfWaiting(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiters, bool shared);

// Whether the calling thread's recent waits ended only after it yielded its CPU to
// another task (its spin budget is below spinNs): the peers it waits for likely share its
// CPU (more ranks than cores), so polling them before a wait only holds them up.
bool spinBudgetReduced(int64_t spinNs);

class Waiter {
 public:
  Waiter();
  explicit Waiter(int64_t spinNs) : spinNs_(spinNs) {}
  ~Waiter() { reset(); }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  // Called when a pass made progress, and by the destructor: ends the current wait.
  void reset() {
    if (idle_ > 1) adapt();
    idle_ = 0;
    inSpin_ = true;
    yieldedToOther_ = false;
    spinStart_ = {};
  }
  // Called when a pass made none: spins, yields, or sleeps on target (at most ~10 ms).
  void idle(const WaitTarget& target);
  // How long the caller has been idle without interruption.
  double idleSeconds() const;
  // Idle passes since the last reset (cheap: reads no clock).
  uint64_t idlePasses() const { return idle_; }
  // The calling thread's current spin budget in nanoseconds (at most the configured spin).
  int64_t spinBudgetNs() const;

 private:
  void adapt();
  void yieldCpu();

  uint64_t idle_ = 0;
  bool inSpin_ = true;
  bool yieldedToOther_ = false;
  std::chrono::steady_clock::time_point spinStart_{};
  int64_t spinNs_;
};

}  // namespace coll

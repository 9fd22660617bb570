// Adaptive waiting: spin (with a pause instruction), then yield, then sleep on a futex
// (or poll a socket) with a short timeout, so that 8 ranks on 2 cores still progress
// and 2 ranks on 2 cores still hand off in well under a microsecond. Every sleep is
// bounded so that callers re-check abort flags and deadlines.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "transport/connector.h"

namespace coll {

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
void futexWakeIfWaiting(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiters,
                        bool shared);

class Waiter {
 public:
  Waiter();
  explicit Waiter(int64_t spinNs) : spinNs_(spinNs) {}
  // Called when a pass made progress.
  void reset() { idle_ = 0; inSpin_ = true; spinStart_ = {}; }
  // Called when a pass made none: spins, yields, or sleeps on target (at most ~10 ms).
  void idle(const WaitTarget& target);
  // How long the caller has been idle without interruption.
  double idleSeconds() const;

 private:
  uint64_t idle_ = 0;
  bool inSpin_ = true;
  std::chrono::steady_clock::time_point spinStart_{};
  int64_t spinNs_;
};

}  // namespace coll

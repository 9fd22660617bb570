#include "core/wait.h"

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>

#include "core/param.h"

namespace coll {

static long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

void futexWake(std::atomic<uint32_t>* word, bool shared) {
  futex(word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr);
}

void futexWakeIfWaiting(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiters,
                        bool shared) {
  // Pairs with the fence in idle(): either the sleeper sees the new value, or we see it
  // registered as a waiter.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waiters->load(std::memory_order_relaxed) != 0) futexWake(word, shared);
}

Waiter::Waiter() : spinNs_(paramInt("SPIN_US") * 1000) {}

double Waiter::idleSeconds() const {
  if (idle_ == 0) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - spinStart_).count();
}

void Waiter::idle(const WaitTarget& t) {
  if (idle_++ == 0) {
    spinStart_ = std::chrono::steady_clock::now();
    return;
  }
  // Spin with one pause per call (a pause is up to ~60 cycles on recent x86; a burst of
  // them would delay noticing the flag), reading the clock only every 64 calls.
  if (inSpin_ && (idle_ & 63) != 0) {
    cpuRelax();
    return;
  }
  auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now() - spinStart_).count();
  inSpin_ = elapsed < spinNs_;
  if (inSpin_) {
    cpuRelax();
    return;
  }
  if (elapsed < 4 * spinNs_ + 200000) {
    sched_yield();
    return;
  }
  if (t.fd >= 0) {
    pollfd p{t.fd, t.events, 0};
    ::poll(&p, 1, 10);
    return;
  }
  if (t.word) {
    timespec ts{0, static_cast<long>(t.maxSleepUs) * 1000};
    t.waiters->fetch_add(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (t.word->load(std::memory_order_relaxed) == t.seen)
      futex(t.word, t.shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, t.seen, &ts);
    t.waiters->fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  sched_yield();
}

}  // namespace coll

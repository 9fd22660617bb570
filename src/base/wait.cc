#include "base/wait.h"

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "base/param.h"

namespace coll {

static long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

void futexWake(std::atomic<uint32_t>* word, bool shared) {
  futex(word, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr);
}

void futexWakeIfWaiting(std::atomic<uint32_t>* word, std::atomic<uint32_t>* waiters, bool shared) {
  // Pairs with the fence in idle(): either the sleeper sees the new value, or we see it
  // registered as a waiter.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (waiters->load(std::memory_order_relaxed) != 0) futexWake(word, shared);
}

Waiter::Waiter() : spinNs_(param(IntParam::SPIN_US) * 1000) {}

// The calling thread's spin budget; INT64_MAX (read as the waiter's configured spin)
// until the thread's first wait ends.
static thread_local int64_t tlSpinBudgetNs = INT64_MAX;

int64_t Waiter::spinBudgetNs() const { return std::min(spinNs_, tlSpinBudgetNs); }

bool spinBudgetReduced(int64_t spinNs) { return tlSpinBudgetNs < spinNs; }

void Waiter::adapt() {
  // The floor keeps a short spin: on separate CPUs most handoffs land within it, and on a
  // shared CPU it costs about as much as the switch it precedes.
  const int64_t floor = std::min<int64_t>(spinNs_, 1000);
  int64_t budget = spinBudgetNs();
  tlSpinBudgetNs = yieldedToOther_ ? std::max(floor, budget / 2) : std::min(spinNs_, budget * 2);
}

void Waiter::yieldCpu() {
  if (yieldedToOther_) {
    sched_yield();
    return;
  }
  // A yield that found nothing else to run returns in well under a microsecond; one that
  // ran another task for a slice (or lost the CPU to the hypervisor) takes longer.
  // Timing it costs two vDSO clock reads, where counting context switches cost syscalls.
  auto before = std::chrono::steady_clock::now();
  sched_yield();
  yieldedToOther_ = std::chrono::steady_clock::now() - before > std::chrono::microseconds(3);
}

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
  auto elapsed =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - spinStart_).count();
  inSpin_ = elapsed < spinBudgetNs();
  if (inSpin_) {
    cpuRelax();
    return;
  }
  if (elapsed < 4 * spinNs_ + 200000) {
    yieldCpu();
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
  yieldCpu();
}

}  // namespace coll

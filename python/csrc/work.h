// The asynchronous side of torch_collectives: a Work that completes with a future (what
// DDP's reducer and comm hooks wait on), and the Worker thread that runs a group's
// operations one after another in call order.
//
// Concurrency: a Work is created on the caller's thread and completed once, on the
// thread that ran its operation (the worker, or a thread waiting for it); c10d::Work's
// own mutex and condition variable guard its state. Its future is completed after it:
// on that thread when nobody has asked for the future yet, else on a completer thread
// (work.cc), where the callbacks attached with then() run, so that a callback waiting
// for a later operation of the group does not hold up the worker that must run it. The
// start and end times are written by the thread running the operation before the Work
// completes and read only after it has. A Worker's queue is guarded by its mutex; its
// tasks run one at a time, in order, on its thread or on a waiting thread that took the
// next one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace torch_collectives {

// Hooks registered by id (torch's completion and abort hooks). A hook runs outside the
// table's lock, so it may register or unregister hooks, and a thread that unregisters one
// (holding its own lock) never waits for a hook that waits for that lock.
template <typename Hook>
class KeyedHooks {
 public:
  // what: the registering call, for the error on an id already taken.
  void add(int64_t id, Hook hook, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(hooks_.emplace(id, std::move(hook)).second, "torch_collectives: ", what, ": hook id ", id,
                " is already registered (unregister it first)");
  }
  bool empty() {
    std::lock_guard<std::mutex> lock(mu_);
    return hooks_.empty();
  }
  // An id not registered is no error: the hook is gone either way.
  void remove(int64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    hooks_.erase(id);
  }
  // Runs every hook with args; a hook that throws is a warning naming what, not an error
  // of the operation that fired it.
  template <typename... Args>
  void fire(const char* what, const Args&... args) {
    std::vector<Hook> hooks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (hooks_.empty()) return;
      for (const auto& [id, hook] : hooks_) hooks.push_back(hook);
    }
    for (const auto& hook : hooks) {
      try {
        hook(args...);
      } catch (const std::exception& e) {
        TORCH_WARN("torch_collectives: ", what, " hook failed: ", e.what());
      }
    }
  }

 private:
  std::mutex mu_;
  std::map<int64_t, Hook> hooks_;
};

// One thread running posted tasks in order; a task that is next in line may instead run
// on a thread that asks (Ticket::runIfNext), never beside another task of the same
// worker. The destructor runs what is queued, then joins.
class Worker {
  struct Queue;  // shared with the Tickets handed out

 public:
  // What the thread does between tasks.
  enum class Idle {
    // Spins (yielding) a little before it sleeps, so calls made back to back (a Python
    // loop of small sends) do not each pay a wake-up. Every post wakes it.
    kSpin,
    // Sleeps. With a leaveFor above 0, a task posted with `leave` is left for up to
    // leaveFor to a thread that waits for it, which then runs it with no hop and no second
    // thread spinning beside it. Meanwhile the worker sleeps: for kWatchFor after its last
    // task or post it looks every leaveFor, unwoken (a wake-up per call would cost more
    // than a small call), then until a post wakes it. What says nobody is about to run a
    // task here makes it due at once and wakes the worker (Ticket::hurry, a post behind
    // it, waitIdle), so only a task nobody touches starts leaveFor late. A leaveFor of 0
    // leaves nothing: every post wakes the worker.
    kSleep,
  };
  static constexpr auto kWatchFor = std::chrono::milliseconds(20);

  // One posted task, as its Work sees it. May outlive the worker (then it does nothing:
  // every task ran before the worker's end).
  class Ticket {
   public:
    // Runs the task on the calling thread if it is the next to run and no task is
    // running; says whether it did.
    bool runIfNext() const;
    // Makes the task, and those before it, due now: the worker runs them as soon as it
    // is free.
    void hurry() const;

   private:
    friend class Worker;
    Ticket(std::shared_ptr<Queue> q, uint64_t number) : q_(std::move(q)), number_(number) {}
    std::shared_ptr<Queue> q_;
    uint64_t number_;
  };

  Worker(std::string name, Idle idle, std::chrono::microseconds leaveFor = {});
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues task. leave: it may wait for a thread that waits for it (a leaveFor above 0);
  // otherwise it is due at once.
  Ticket post(std::function<void()> task, bool leave = false);
  // Waits until nothing is queued or running, at most `limit`; true if it got there.
  // What is queued is due at once.
  bool waitIdle(std::chrono::milliseconds limit);
  // Whether a task posted with `leave` is left to its waiter (a leaveFor above 0).
  bool leaves() const { return leaveFor_.count() > 0; }

 private:
  void run();
  bool awaitTask(std::unique_lock<std::mutex>& lock);

  std::string name_;
  const Idle idle_;
  const std::chrono::microseconds leaveFor_;
  std::shared_ptr<Queue> q_;
  std::thread thread_;
};

class CollWork : public c10d::Work {
 public:
  using Clock = std::chrono::steady_clock;

  // profilingTitle: what the profiler records the operation as (from creation to
  // complete(), with the shapes of inputs). outputs: what result() and the future hold
  // once the operation is done.
  // seq: the group's sequence number of the operation. sourceRank: the peer of a receive
  // (-1 otherwise), what Work._source_rank() answers. timed: whether getDuration() may be
  // asked (the group's enableCollectivesTiming()).
  CollWork(int rank, c10d::OpType type, const char* profilingTitle, const std::vector<at::Tensor>& inputs, uint64_t seq,
           std::vector<at::Tensor> outputs, bool timed, int sourceRank = -1);

  // A receive from any source learns its peer when it picks one (before it completes).
  void setSourceRank(int peer) { sourceRank_ = peer; }

  // Called by the worker when the operation starts running (for getDuration()).
  void markStarted() { started_ = Clock::now(); }
  // Called once, by the worker: marks the Work done (or failed with error) and completes
  // the future.
  void complete(std::exception_ptr error);

  // The operation was left on its worker for the thread that waits for it: set once, by
  // the thread that posted it (for the member of a coalesced block, at endCoalescing:
  // the block's ticket).
  void setTicket(Worker::Ticket ticket) { ticket_.emplace(std::move(ticket)); }
  // Queued in a coalesced block that is still open (true), until endCoalescing (false):
  // a wait() meanwhile returns at once, since the operation runs only with the block, as
  // NCCL's operations in a block complete only with it. Its results are there once the
  // block's Work has completed.
  void setInOpenBlock(bool open) { inOpenBlock_.store(open, std::memory_order_release); }

  // Without a time limit, runs the operation here if it was left to its waiter and is
  // next in line (setTicket): no hop to the worker thread, and no second thread spinning
  // beside this one; otherwise hurries the worker. Then spins briefly (yielding) before
  // sleeping: a short operation ends within the spin, and waking a sleeping thread costs
  // more than the operation itself.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  // Hurries the worker too: whoever holds the future may wait on it, not on the Work.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  // Milliseconds from the start of the operation on the worker to its completion;
  // needs timing enabled on the group and a completed Work.
  float getDuration() const override;
  // getDuration() where the group times its operations and this one is done; else none.
  std::optional<float> timedDuration() const;
  uint64_t getSequencenumber() const override { return seq_; }
#if COLL_TORCH_COMPLETION_HOOKS
  // What completion hooks name this Work by: unique in the process, never reused.
  uint64_t getCompletionKey() const override { return key_; }
#endif

  c10d::OpType opType() const { return opType_; }
  Clock::time_point startedAt() const { return started_; }
  Clock::time_point finishedAt() const { return finished_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const uint64_t seq_;
  const uint64_t key_;  // getCompletionKey()
  const bool timed_;
  std::atomic<int> sourceRank_;
  Clock::time_point started_{}, finished_{};
  std::atomic<bool> done_{false};
  std::atomic<bool> futureTaken_{false};  // getFuture() was called: callbacks may be attached
  std::atomic<bool> inOpenBlock_{false};  // setInOpenBlock
  std::optional<Worker::Ticket> ticket_;
};

}  // namespace torch_collectives

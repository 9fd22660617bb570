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
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace torch_collectives {

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

  // The operation may run on the thread that waits for it (Worker::runIfNext): set once,
  // by the thread that posted it, before the Work is handed out.
  void setRunHere(std::function<bool()> runHere) { runHere_ = std::move(runHere); }

  // Without a time limit, runs the operation here if it is next in line on its worker
  // (setRunHere): no hop to the worker thread, and no second thread spinning beside this
  // one. Then spins briefly (yielding) before sleeping: a short operation ends within the
  // spin, and waking a sleeping thread costs more than the operation itself.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  int sourceRank() const override;
  // Milliseconds from the start of the operation on the worker to its completion;
  // needs timing enabled on the group and a completed Work.
  float getDuration() const override;
  uint64_t getSequencenumber() const override { return seq_; }

  c10d::OpType opType() const { return opType_; }
  Clock::time_point startedAt() const { return started_; }
  Clock::time_point finishedAt() const { return finished_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  const uint64_t seq_;
  const bool timed_;
  std::atomic<int> sourceRank_;
  Clock::time_point started_{}, finished_{};
  std::atomic<bool> done_{false};
  std::atomic<bool> futureTaken_{false};  // getFuture() was called: callbacks may be attached
  std::function<bool()> runHere_;
};

// One thread running posted tasks in order; a task that is next in line may instead run
// on a thread that asks (runIfNext), never beside another task of the same worker. The
// destructor runs what is queued, then joins.
class Worker {
 public:
  enum class Handoff {
    // Between tasks the thread spins (yielding) a little before it sleeps, so calls made
    // back to back (a Python loop of small sends) do not each pay a wake-up.
    kSpin,
    // A task just posted is left for kLeaveFor to a thread that waits for it, which then
    // runs it with no hop and no second thread spinning beside it. Meanwhile the worker
    // sleeps: for kWatchFor after its last task or post it looks every kLeaveFor, unwoken
    // (a wake-up per call would cost more than a small call), then until a post wakes
    // it. So a task nobody waits for starts at most kLeaveFor to twice that late.
    kLeaveToWaiter,
  };
  static constexpr auto kLeaveFor = std::chrono::microseconds(100);
  static constexpr auto kWatchFor = std::chrono::milliseconds(20);

  Worker(std::string name, Handoff handoff);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues task; returns its ticket (for runIfNext).
  uint64_t post(std::function<void()> task);
  // A function that runs the task of `ticket` on the calling thread if it is the next to
  // run and no task is running, and says whether it did. It may outlive the worker (then
  // it does nothing: every task ran before the worker's end).
  std::function<bool()> runIfNext(uint64_t ticket) const;
  // Waits until nothing is queued or running, at most `limit`; true if it got there.
  bool waitIdle(std::chrono::milliseconds limit);

 private:
  struct Queue;  // shared with the functions runIfNext hands out
  void run();
  bool awaitTask(std::unique_lock<std::mutex>& lock);

  std::string name_;
  const Handoff handoff_;
  std::shared_ptr<Queue> q_;
  std::thread thread_;
};

}  // namespace torch_collectives

// The asynchronous side of torch_collectives: a Work that completes with a future (what
// DDP's reducer and comm hooks wait on), and the Worker thread that runs a group's
// operations one after another in call order.
//
// Concurrency: a Work is created on the caller's thread and completed once, on the
// worker thread that ran its operation; c10d::Work's own mutex and condition variable
// guard its state. Its future is completed after it: on the worker when nobody has
// asked for the future yet, else on a completer thread (work.cc), where the callbacks
// attached with then() run, so that a callback waiting for a later operation of the
// group does not hold up the worker that must run it. The start and end times are written by the worker
// before the Work completes and read only after it has. A Worker's queue is guarded by
// its mutex; tasks run only on its thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
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

  // Spins briefly (yielding) before sleeping: a short operation ends within the spin, and
  // waking a sleeping thread costs more than the operation itself.
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
};

// One thread running posted tasks in order. The destructor runs what is queued, then
// joins. Between tasks the thread spins (yielding) a little before it sleeps, so calls
// made back to back (a Python loop of small collectives) do not each pay a wake-up.
class Worker {
 public:
  explicit Worker(std::string name);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void post(std::function<void()> task);
  // Waits until nothing is queued or running, at most `limit`; true if it got there.
  bool waitIdle(std::chrono::milliseconds limit);

 private:
  void run();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::atomic<size_t> queued_{0};
  bool busy_ = false;  // a task is running (guarded by mu_)
  std::condition_variable idleCv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace torch_collectives

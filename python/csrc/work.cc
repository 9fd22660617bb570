#include "work.h"

#include <Python.h>
#include <pthread.h>

#include <ATen/core/jit_type.h>

namespace torch_collectives {

CollWork::CollWork(int rank, c10d::OpType type, const char* profilingTitle, const std::vector<at::Tensor>& inputs,
                   uint64_t seq, std::vector<at::Tensor> outputs, bool timed, int sourceRank)
    : c10d::Work(rank, type, profilingTitle, inputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      seq_(seq),
      timed_(timed),
      sourceRank_(sourceRank) {}

int CollWork::sourceRank() const {
  TORCH_CHECK(sourceRank_ >= 0, "torch_collectives: _source_rank() answers only for a receive, not for ",
              c10d::opTypeToString(opType_));
  return sourceRank_;
}

float CollWork::getDuration() const {
  TORCH_CHECK(timed_, "torch_collectives: get_duration() needs timing enabled on the group first "
                      "(its backend's enable_collectives_timing())");
  TORCH_CHECK(done_.load(std::memory_order_acquire), "torch_collectives: get_duration() of ",
              c10d::opTypeToString(opType_), " #", seq_, " before it completed (wait() first)");
  return std::chrono::duration<float, std::milli>(finished_ - started_).count();
}

namespace {
// How long a waiter spins before sleeping: a few wake-up latencies of this kind of VM.
constexpr auto kSpin = std::chrono::microseconds(200);

template <typename Ready>
void spinUntil(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (!ready() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

bool pythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// Runs a task on a thread of ours and then frees what it captured (tensors, Works), here,
// before the caller reports the task done. Freeing a tensor Python still knows takes the
// GIL, and a thread that asks for the GIL while the interpreter exits is ended by Python
// (pthread_exit), whose unwinding through a destructor aborts the process ("terminate
// called without an active exception"). So once Python is exiting, what a task captured
// is left for the process's end instead.
void runAndRelease(std::function<void()>& task) {
  task();                                                              // tasks catch their own errors
  if (pythonFinalizing()) new std::function<void()>(std::move(task));  // NOLINT: left on purpose
  task = nullptr;
}
}  // namespace

// Completes futures, and so runs their callbacks, off the workers: a callback may wait
// for a later operation of the same group (PowerSGD's hook does), which the group's
// worker must be free to run. A thread is added whenever every thread is busy (a
// callback waiting holds one), up to kMaxThreads; idle threads sleep. Never destroyed:
// at exit a thread may still be inside a Python callback.
class Completer {
 public:
  static Completer& instance() {
    static Completer* completer = new Completer();
    return *completer;
  }

  void post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    if (idle_ == 0 && threads_ < kMaxThreads) {
      ++threads_;
      std::thread([this] { run(); }).detach();
    }
    cv_.notify_one();
  }

 private:
  static constexpr int kMaxThreads = 32;

  void run() {
    pthread_setname_np(pthread_self(), "coll-futures");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [this] { return !queue_.empty(); });
      --idle_;
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      runAndRelease(task);  // completes a future: its callbacks catch their own errors
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int threads_ = 0, idle_ = 0;
};

c10::intrusive_ptr<c10::ivalue::Future> CollWork::getFuture() {
  futureTaken_.store(true, std::memory_order_release);
  return future_;
}

bool CollWork::wait(std::chrono::milliseconds timeout) {
  spinUntil([this] { return done_.load(std::memory_order_acquire); });
  return c10d::Work::wait(timeout);
}

void CollWork::complete(std::exception_ptr error) {
  finished_ = Clock::now();
  if (started_ == Clock::time_point{}) started_ = finished_;
  // The future first, then the Work: whoever sees the Work done may read the future's
  // value at once (and a future's callbacks run before the Work is done, as Gloo's).
  auto finishBoth = [self = c10::intrusive_ptr<CollWork>::reclaim_copy(this), error] {
    if (error) self->future_->setError(error);
    else self->future_->markCompleted(c10::IValue(self->outputs_));
    self->finish(error);
    self->done_.store(true, std::memory_order_release);
  };
  // Nobody holds the future yet (no callback can be attached): complete both here; a
  // then() attached later runs at once. Otherwise on the completer, with the callbacks.
  if (futureTaken_.load(std::memory_order_acquire)) Completer::instance().post(std::move(finishBoth));
  else finishBoth();
}

Worker::Worker(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Worker::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    queued_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_one();
}

bool Worker::waitIdle(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  return idleCv_.wait_for(lock, limit, [this] { return queue_.empty() && !busy_; });
}

void Worker::run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  for (;;) {
    std::function<void()> task;
    spinUntil([this] { return queued_.load(std::memory_order_acquire) > 0; });
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
      busy_ = true;
    }
    runAndRelease(task);  // before idle: waitIdle() means nothing a task held is left
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    idleCv_.notify_all();
  }
}

}  // namespace torch_collectives

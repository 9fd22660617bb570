#include "work.h"

#include <Python.h>
#include <pthread.h>

#include <optional>

#include <ATen/ThreadLocalState.h>
#include <ATen/core/jit_type.h>

namespace torch_collectives {

namespace {
uint64_t nextCompletionKey() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

CollWork::CollWork(int rank, c10d::OpType type, const char* profilingTitle, const std::vector<at::Tensor>& inputs,
                   uint64_t seq, std::vector<at::Tensor> outputs, bool timed, int sourceRank)
    : c10d::Work(rank, type, profilingTitle, inputs),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      seq_(seq),
      key_(nextCompletionKey()),
      timed_(timed),
      sourceRank_(sourceRank) {}

std::optional<float> CollWork::timedDuration() const {
  if (!timed_ || !done_.load(std::memory_order_acquire)) return std::nullopt;
  return getDuration();
}

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
  if (ticket_ && !done_.load(std::memory_order_acquire)) ticket_->hurry();
  return future_;
}

bool CollWork::wait(std::chrono::milliseconds timeout) {
  if (inOpenBlock_.load(std::memory_order_acquire)) return true;  // it runs at endCoalescing
  // Zero is no limit (kNoTimeout). With a limit, the worker runs the operation: only then
  // can this thread stop waiting in time.
  if (ticket_ && !done_.load(std::memory_order_acquire)) {
    const bool ranHere = timeout == std::chrono::milliseconds::zero() && ticket_->runIfNext();
    if (!ranHere) ticket_->hurry();
  }
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

struct Worker::Queue {
  std::mutex mu;
  std::condition_variable cv;      // a task posted, hurried or ended, stop, or the thread's start
  std::condition_variable idleCv;  // nothing queued or running
  struct Task {
    uint64_t ticket;
    std::chrono::steady_clock::time_point posted;
    std::function<void()> run;
  };
  std::deque<Task> tasks;
  std::atomic<size_t> queued{0};  // tasks.size(), read while spinning
  uint64_t nextTicket = 0;
  uint64_t dueThrough = 0;  // tasks with ticket < dueThrough are not left to a waiter
  bool busy = false;        // a task is running, here or on a waiting thread
  bool stop = false;
  bool sleeping = false;                         // the worker sleeps until a post, a hurry or a task's end wakes it
  std::chrono::steady_clock::time_point active;  // the last post, or the end of a task
  // The worker thread's thread-local state (grad mode, dispatch modes, autocast: none),
  // under which a waiting thread runs the task it takes; set as the thread starts.
  std::optional<at::ThreadLocalState> tls;

  // Under mu: the next task is to run now, not wait for a thread waiting for it.
  bool frontDue(std::chrono::steady_clock::time_point now, std::chrono::microseconds leaveFor) const {
    return stop || tasks.front().ticket < dueThrough || now >= tasks.front().posted + leaveFor;
  }
  // Takes the next task if nothing runs (and, with ticket, if it is that one).
  std::function<void()> take(const uint64_t* ticket) {
    if (busy || tasks.empty() || (ticket && tasks.front().ticket != *ticket)) return nullptr;
    std::function<void()> task = std::move(tasks.front().run);
    tasks.pop_front();
    queued.fetch_sub(1, std::memory_order_relaxed);
    busy = true;
    return task;
  }
  // Runs a task taken, then frees what it captured (before anyone hears it ended).
  void runTaken(std::function<void()>& task) {
    runAndRelease(task);
    bool more;
    {
      std::lock_guard<std::mutex> lock(mu);
      busy = false;
      active = std::chrono::steady_clock::now();
      more = stop || !tasks.empty();
    }
    if (more) cv.notify_all();  // the worker may wait for the end of a task taken here
    idleCv.notify_all();
  }
};

Worker::Worker(std::string name, Idle idle, std::chrono::microseconds leaveFor)
    : name_(std::move(name)), idle_(idle), leaveFor_(leaveFor), q_(std::make_shared<Queue>()) {
  thread_ = std::thread([this] { run(); });
  // Until the thread has its state, no waiter could run a task (Ticket::runIfNext).
  std::unique_lock<std::mutex> lock(q_->mu);
  q_->cv.wait(lock, [this] { return q_->tls.has_value(); });
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    q_->stop = true;
  }
  q_->cv.notify_all();
  thread_.join();
}

Worker::Ticket Worker::post(std::function<void()> task, bool leave) {
  uint64_t ticket;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    ticket = q_->nextTicket++;
    q_->active = std::chrono::steady_clock::now();
    // A task still queued ahead of this one was not waited for: its caller went on.
    leave = leave && leaves();
    const uint64_t due = !leave ? ticket + 1 : !q_->tasks.empty() ? ticket : 0;
    const bool hurry = due > q_->dueThrough;
    if (hurry) q_->dueThrough = due;
    q_->tasks.push_back({ticket, q_->active, std::move(task)});
    q_->queued.fetch_add(1, std::memory_order_release);
    wake = idle_ == Idle::kSpin || q_->sleeping || hurry;
  }
  // A worker that leaves tasks to their waiters and has not gone to sleep finds one left
  // on its own: a wake-up for every call would cost more than the call.
  if (wake) q_->cv.notify_all();
  return Ticket(q_, ticket);
}

bool Worker::Ticket::runIfNext() const {
  std::function<void()> task;
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    if (q_->tls) task = q_->take(&number_);
  }
  if (!task) return false;
  at::ThreadLocalStateGuard asOnWorker(*q_->tls);  // not the waiter's modes
  q_->runTaken(task);
  return true;
}

void Worker::Ticket::hurry() const {
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    if (q_->dueThrough > number_) return;
    q_->dueThrough = number_ + 1;
  }
  q_->cv.notify_all();
}

bool Worker::waitIdle(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(q_->mu);
  q_->dueThrough = q_->nextTicket;
  q_->cv.notify_all();
  return q_->idleCv.wait_for(lock, limit, [this] { return q_->tasks.empty() && !q_->busy; });
}

// Under q_->mu: waits until the next task may be taken (true), or until the worker is to
// stop (false: nothing queued or running, and stop asked).
bool Worker::awaitTask(std::unique_lock<std::mutex>& lock) {
  Queue& q = *q_;
  using Clock = std::chrono::steady_clock;
  for (;;) {
    const bool runnable = !q.busy && !q.tasks.empty();
    if (!q.busy && q.tasks.empty() && q.stop) return false;
    if (leaveFor_.count() == 0) {  // nothing left to waiters: every post wakes
      if (runnable) return true;
      q.cv.wait(lock);
      continue;
    }
    // Left to its waiter for leaveFor_, unless hurried. While a waiter runs one, this
    // thread sleeps: the task's end (with more queued, or stop), a post or a hurry wakes it.
    if (runnable && q.frontDue(Clock::now(), leaveFor_)) return true;
    if (runnable) {
      q.cv.wait_until(lock, q.tasks.front().posted + leaveFor_);
    } else if (!q.busy && Clock::now() - q.active < kWatchFor) {
      q.cv.wait_for(lock, leaveFor_);  // a post that leaves its task does not wake it
    } else {
      q.sleeping = true;
      q.cv.wait(lock);
      q.sleeping = false;
    }
  }
}

void Worker::run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  Queue& q = *q_;
  {
    std::lock_guard<std::mutex> lock(q.mu);
    q.tls.emplace();
  }
  q.cv.notify_all();
  for (;;) {
    if (idle_ == Idle::kSpin) spinUntil([&q] { return q.queued.load(std::memory_order_acquire) > 0; });
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(q.mu);
      if (!awaitTask(lock)) return;
      task = q.take(nullptr);
    }
    q.runTaken(task);  // before idle: waitIdle() means nothing a task held is left
  }
}

}  // namespace torch_collectives

#include "work.h"

#include <pthread.h>

#include <ATen/core/jit_type.h>

namespace torch_collectives {

CollWork::CollWork(int rank, c10d::OpType type, const char* profilingTitle, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type, profilingTitle),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void CollWork::complete(std::exception_ptr error) {
  finish(error);
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
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
  }
  cv_.notify_one();
}

void Worker::run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // tasks catch their own errors (they complete a Work with them)
  }
}

}  // namespace torch_collectives

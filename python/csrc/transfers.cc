// Send, receive and receive from any source of ProcessGroupCollectives (process_group.h):
// a two-rank communicator and a thread per (peer, direction).
#include <Python.h>

#include "process_group.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace torch_collectives {

// ---- send / recv ----

ProcessGroupCollectives::PeerWorker& ProcessGroupCollectives::peerWorker(int peer, bool sending) {
  std::lock_guard<std::mutex> lock(peerWorkersMu_);
  PeerWorker& l = peerWorkers_[{peer, sending}];
  if (!l.worker)
    l.worker = std::make_unique<Worker>((sending ? "coll-send" : "coll-recv") + std::to_string(peer),
                                        Worker::Idle::kSpin);
  return l;
}

std::string ProcessGroupCollectives::sentKey(int src, int dst) const {
  return keyPrefix_ + "p2p/sent/" + std::to_string(src) + "->" + std::to_string(dst);
}

// One transfer on the (peer, direction) worker, on the worker's thread; the worker's
// communicator has the sender as rank 0 and is made by its first transfer.
void ProcessGroupCollectives::runTransfer(PeerWorker& l, at::Tensor t, int peer, bool sending, const OpInfo& op) {
  const int src = sending ? rank_ : peer, dst = sending ? peer : rank_;
  // Counted before the worker's first transfer makes its communicator, which waits for the
  // receiver: a receiver from any source learns from the count which worker to join.
  if (sending && options_->anySource) store_->add(sentKey(src, dst), 1);
  const bool cuda = t.device().is_cuda();  // on the worker, with t's device current (runOn)
  TORCH_CHECK(!cuda || l.cudaDevice < 0 || l.cudaDevice == t.device().index(), "torch_collectives: ", op.name,
              " on rank ", rank_, ": a tensor on ", t.device().str(), ", but this rank's CUDA transfers with rank ",
              peer, " are on cuda:", l.cudaDevice, " (one CUDA device per process in a group)");
  std::atomic<collComm_t>& slot = cuda ? l.cudaComm : l.comm;
  if (!slot.load()) {
    const std::string key = keyPrefix_ + "p2p/" + (cuda ? "cuda/" : "") + std::to_string(src) + "->" +
                            std::to_string(dst);
    auto [made, why] = cuda ? makeCudaComm(key, 2, sending ? 0 : 1, false, t.device())
                            : std::pair{makeComm(key, 2, sending ? 0 : 1, false), std::string()};
    TORCH_CHECK(made, "torch_collectives: ", op.name, " on rank ", rank_, ": the communicator made for ",
                t.device().str(), " with rank ", peer, " ", why);
    if (cuda) l.cudaDevice = t.device().index();
    slot = made;
  }
  collComm_t comm = slot.load();
  at::Tensor buf = dense(t);
  check(sending ? collSend(buf.data_ptr(), buf.nbytes(), collUint8, 1, comm, nullptr)
                : collRecv(buf.data_ptr(), buf.nbytes(), collUint8, 0, comm, nullptr),
        op, comm);
  if (!sending) writeBack(buf, t);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::transfer(std::vector<at::Tensor>& tensors, int peer,
                                                                 bool sending) {
  const char* name = sending ? "send" : "recv";
  at::Tensor t = single(name, tensors);
  checkRoot(name, peer, size_);
  TORCH_CHECK(peer != rank_, "torch_collectives: ", name, ": ", sending ? "dst " : "src ", peer, " is this rank");
  PeerWorker& l = peerWorker(peer, sending);
  if (!sending && options_->anySource) {
    std::lock_guard<std::mutex> lock(claimsMu_);
    ++claimed_[peer];
  }
  OpInfo op{name, -1, shapeOf(t) + (sending ? " to rank " : " from rank ") + std::to_string(peer)};
  return post(
      sending ? c10d::OpType::SEND : c10d::OpType::RECV, op, {t}, t.device(),
      [this, &l, t, peer, sending, op]() -> Finish {
        runTransfer(l, t, peer, sending, op);
        return nullptr;
      },
      l.worker.get(), sending ? -1 : peer);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::send(std::vector<at::Tensor>& tensors, int dstRank, int) {
  return transfer(tensors, dstRank, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::recv(std::vector<at::Tensor>& tensors, int srcRank, int) {
  return transfer(tensors, srcRank, false);
}

// Waits until some peer has sent more than this rank's receives have claimed from it,
// and claims that send (the lowest such rank first).
int ProcessGroupCollectives::claimAnySource(const OpInfo& op) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const int64_t sent = store_->add(sentKey(p, rank_), 0);
      std::lock_guard<std::mutex> lock(claimsMu_);
      if (sent > claimed_[p]) {
        ++claimed_[p];
        return p;
      }
    }
    TORCH_CHECK(!closing_, "torch_collectives: ", op.name, " (", op.what, ") on rank ", rank_,
                ": the group was destroyed while waiting for a sender");
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    TORCH_CHECK(timeoutS_ <= 0 || waited < timeoutS_, "torch_collectives: ", op.name, " (", op.what, ") on rank ",
                rank_, ": no rank sent within the group's timeout (", timeoutS_, " s)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

// A receive from whichever rank sends first: the any-source thread picks the peer, then
// the receive runs on that peer's worker after the receives already queued there.
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::recvAnysource(std::vector<at::Tensor>& tensors, int) {
  at::Tensor t = single("recv", tensors);
  TORCH_CHECK(options_->anySource, "torch_collectives: recv from any source (no src) on rank ", rank_,
              ": the group was made without any_source=True (torch_collectives.Options(any_source=True), or "
              "COLL_TORCH_ANY_SOURCE=1); with it every send also counts itself in the store");
  checkOpen("recv");
  OpInfo op{"recv", -1, shapeOf(t) + " from any rank"};
  auto work = newWork(c10d::OpType::RECVANYSOURCE, op, {t});
  {
    std::lock_guard<std::mutex> lock(peerWorkersMu_);
    if (!anySourceWorker_) anySourceWorker_ = std::make_unique<Worker>("coll-anysrc", Worker::Idle::kSpin);
  }
  auto inputsReady = inputsReadyEvent(t.device());
  anySourceWorker_->post([this, work, t, op, inputsReady] {
    int peer = -1;
    try {
      peer = claimAnySource(op);
    } catch (...) {
      completed(work, std::current_exception());
      return;
    }
    work->setSourceRank(peer);
    PeerWorker& l = peerWorker(peer, false);
    l.worker->post([this, &l, work, t, peer, op, inputsReady] {
      std::exception_ptr error;
      work->markStarted();
      try {
        runOn(t.device(), inputsReady, [&] { runTransfer(l, t, peer, false, op); });
      } catch (...) {
        error = std::current_exception();
      }
      completed(work, error);
    });
  });
  return work;
}

}  // namespace torch_collectives

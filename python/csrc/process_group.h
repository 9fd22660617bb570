// ProcessGroupCollectives: torch.distributed's c10d ProcessGroup (torch 1.13) over the
// Collectives C API, registered as the backend "collectives".
//
// Each group owns one communicator, made at construction: rank 0 makes the unique id
// and publishes it through the group's c10d store, the others read it (as
// ProcessGroupNCCL does). Every call checks its arguments on the caller's thread (a bad
// dtype or shape raises there), then queues the operation on the group's worker thread
// and returns its Work: operations run in call order, and groups progress independently
// of each other (round-robin groups overlap). send/recv run on their own lanes: one
// two-rank communicator and thread per (peer, direction), made at the first transfer, so
// isend/irecv pairs in any order never wait on each other.
//
// Failures: the group's timeout becomes the communicator's operation timeout
// (collCommSetTimeout); an operation that fails or times out fails its Work with the
// operation's name and sequence number, the library's error, and the ranks that never
// reached the operation (found through the store). The communicator is then aborted
// and every later operation fails.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "collectives/collectives.h"
#include "lowering.h"
#include "work.h"

namespace torch_collectives {

class ProcessGroupCollectives : public c10d::ProcessGroup {
 public:
  ProcessGroupCollectives(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                          std::chrono::milliseconds timeout);
  ~ProcessGroupCollectives() override;

  const std::string getBackendName() const override { return "collectives"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // batch_isend_irecv: each transfer already runs on its own lane, so a batch needs no
  // grouping; the Works it returns complete as their transfers do.
  void startCoalescing() override {}
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) override {}

  collComm_t comm() const { return comm_; }

 private:
  // What an operation's errors name.
  struct OpInfo {
    const char* name;
    int64_t seq;       // this group's operation number, from 0 (-1 for send/recv)
    std::string what;  // e.g. "float32[1024]"
  };
  // A (peer, direction) send/recv lane: its own thread and two-rank communicator.
  struct Lane {
    std::unique_ptr<Worker> worker;
    std::atomic<collComm_t> comm{nullptr};  // made by the lane's first transfer, on its thread
  };

  // Queues body on worker (the group's own unless given) and returns its Work.
  // CUDA tensors (device): after the caller's current stream, completing when the GPU is.
  c10::intrusive_ptr<c10d::Work> post(c10d::OpType type, OpInfo info, std::vector<at::Tensor> outputs,
                                      c10::Device device, std::function<void()> body, Worker* worker = nullptr);
  static void runOnDevice(c10::Device device, c10::Event& inputsReady, const std::function<void()>& body);
  // Throws the error of a failed library call on comm, naming the operation; on the
  // group's communicator, also the ranks that never reached it.
  void check(collResult_t r, const OpInfo& op, collComm_t comm);
  std::string ranksThatNeverArrived(const OpInfo& op);
  std::vector<uint8_t> awaitKey(const std::string& key);
  void release(collComm_t comm, bool revoked);
  // A communicator of nranks made through the store under key (rank 0 publishes the id).
  collComm_t makeComm(const std::string& key, int nranks, int rank);
  Lane& lane(int peer, bool sending);
  c10::intrusive_ptr<c10d::Work> transfer(std::vector<at::Tensor>& tensors, int peer, bool sending);
  OpInfo info(const char* name, const at::Tensor& t);

  // The operations' bodies, run on the worker.
  void runReduction(const Reduction& r, const OpInfo& op, const std::function<collResult_t(collRedOp_t)>& call);
  void reduceTensor(at::Tensor& t, const Reduction& r, int root, const OpInfo& op);
  void reduceScatterFlat(const at::Tensor& in, at::Tensor& out, const Reduction& r, const OpInfo& op);
  void allgatherBytes(const void* in, void* out, size_t bytes, const OpInfo& op);
  void exchange(const std::vector<const char*>& sendPtr, const std::vector<size_t>& sendBytes,
                const std::vector<char*>& recvPtr, const std::vector<size_t>& recvBytes, c10::Device device,
                const OpInfo& op);

  c10::intrusive_ptr<c10d::Store> store_;
  std::string keyPrefix_;  // of this group's keys in the store
  const double timeoutS_;
  collComm_t comm_ = nullptr;
  std::atomic<uint64_t> seq_{0};
  std::atomic<bool> closing_{false};  // the destructor has started
  std::mutex lanesMu_;
  std::map<std::pair<int, bool>, Lane> lanes_;
  std::unique_ptr<Worker> worker_;  // last member: stopped first
};

// What Backend.register_backend calls: (store, rank, size, timeout).
c10::intrusive_ptr<c10d::ProcessGroup> createProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, const std::chrono::duration<float>& timeout);

}  // namespace torch_collectives

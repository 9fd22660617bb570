// ProcessGroupCollectives: a c10d::Backend (torch 2.x) over the Collectives C API,
// registered as the backend "collectives" for CPU and CUDA tensors.
//
// Each group owns one communicator, made at construction: rank 0 makes the unique id
// and publishes it through the group's c10d store, the others read it (as
// ProcessGroupNCCL does). CUDA tensors go over a second one, bound to their device and
// made by the group's first CUDA collective (bindCuda). Every call checks its arguments on the caller's thread (a bad
// dtype or shape raises there), then queues the operation on the group's worker thread
// and returns its Work: operations run in call order, and groups progress independently
// of each other (round-robin groups overlap). send/recv run on their own peer workers: one
// two-rank communicator and thread per (peer, direction), made at the first transfer, so
// isend/irecv pairs in any order never wait on each other.
//
// Coalescing (startCoalescing/endCoalescing, and the *_coalesced calls): the collectives
// of a block run as one library group (collGroupStart/End), one launch for all of them.
// An operation's body therefore issues its library calls and returns what must run once
// they are complete (copies out, narrowing), which in a block is after collGroupEnd.
// Transfers inside a block still run on their peer workers; the block's Work completes when
// they and the group have.
//
// Failures: the group's timeout becomes the communicator's operation timeout
// (collCommSetTimeout); an operation that fails or times out fails its Work with the
// operation's name and sequence number, the library's error, and the ranks that never
// reached the operation (found through the store). That communicator (the group's, or
// its CUDA one) is then aborted and every later operation on it fails.
//
// Threads: the c10d contract holds (one thread at a time calls a group), so the block
// being built is touched by the caller's thread only; the hooks are registered there and
// fired by the worker (KeyedHooks locks them).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "collectives/collectives.h"
#include "lowering.h"
#include "tensor_args.h"
#include "work.h"

namespace torch_collectives {

// The group's options: c10d's (timeout, group name, global ranks) and the library's
// communicator settings, each unset (-1 / empty) unless given.
struct CollOptions : c10d::Backend::Options {
  CollOptions() : c10d::Backend::Options("collectives") {}
  // torch's clone() (newer releases; see NEWER below).
  virtual c10::intrusive_ptr<c10d::Backend::Options> clone() const { return c10::make_intrusive<CollOptions>(*this); }

  std::string compress;  // "", "none", "fp16" or "bf16": the wire type of fp32 sums
  int deterministic = -1;
  std::string netName;  // "Socket", "IB" or a net plugin's name
  int minChannels = -1, maxChannels = -1;
  std::string groupName;              // torch's name of the group (the communicator's name)
  std::vector<uint64_t> globalRanks;  // the default group's ranks of this group's ranks
  // Receives from any source (recv without src) are allowed: each send then also counts
  // itself in the store (one store round trip per send), which is how a receiver learns
  // which peer has sent.
  bool anySource = false;
  // How long a CPU operation waits on the group's queue for the thread that waits for it
  // before the group's worker takes it (microseconds; 0: the worker runs every operation).
  int handoffUs = 1000;
};

// NEWER: virtuals that torch releases after 2.4 added to c10d::Backend (options,
// coalescing support, split, timeout, abort, shutdown) are declared without `override`,
// so the same code builds against 2.4, where they are this class's own methods, and
// overrides them where torch has them.
class ProcessGroupCollectives : public c10d::Backend {
 public:
  ProcessGroupCollectives(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                          c10::intrusive_ptr<CollOptions> options);
  ~ProcessGroupCollectives() override;

  const std::string getBackendName() const override { return "collectives"; }
  virtual c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() { return options_; }

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
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
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
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Every rank reports to rank 0 through the store; rank 0 names the ranks that did not
  // arrive within the timeout (all of them with waitAllRanks, else the first).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  virtual bool supportsCoalescing() const { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  virtual bool supportsSplitting() const { return true; }
  // A group of `ranks` (ranks of this group) made through `store`; null where this rank
  // is not one of them.
  virtual c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                                  const std::vector<int>& ranks,
                                                  const c10::intrusive_ptr<c10d::Backend::Options>& opts);

  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }
  void setSequenceNumberForGroup() override {}  // every group starts at 0 on every rank
  virtual void setTimeout(std::chrono::milliseconds timeout);
  void enableCollectivesTiming() override { timing_ = true; }
  void registerOnCompletionHook(std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) override;
#if COLL_TORCH_COMPLETION_HOOKS
  // Keyed completion hooks (torch's flight recorder retires an operation's entry by
  // them): fired once per Work that completed successfully, after it completed.
  bool supportsCompletionHooks() const override { return true; }
  void registerCompletionHook(int64_t hookId, c10d::CompletionHook hook) override;
  void unregisterCompletionHook(int64_t hookId) override;
#endif
#if COLL_TORCH_ABORT_HOOKS
  // Abort hooks: fired before a failed operation's error reaches its Work (a timeout, a
  // peer gone, a revoked communicator) and before abort() revokes the communicators.
  bool supportsAbortHooks() const override { return true; }
  void registerAbortHook(int64_t hookId, c10d::AbortHook hook) override;
  void unregisterAbortHook(int64_t hookId) override;
#endif
  void waitForPendingWorks() override;
  // Revokes the communicators: pending and later operations fail at once.
  virtual void abort();
  // Lets queued operations finish (a grace period), then refuses new ones.
  virtual void shutdown();

 private:
  // What an operation's errors name.
  struct OpInfo {
    const char* name;
    int64_t seq;                          // this group's operation number, from 0 (-1 for send/recv)
    std::string what;                     // e.g. "float32[1024]"
    std::vector<at::Tensor> inputs = {};  // what the profiler records (empty: the outputs)
  };
  // What runs after an operation's library calls are complete (nullptr: nothing).
  using Finish = std::function<void()>;
  // An operation on the worker: issues its library calls, returns its Finish.
  using Body = std::function<Finish()>;
  // A (peer, direction) send/recv worker: its own thread and two-rank communicator.
  struct PeerWorker {
    std::unique_ptr<Worker> worker;
    std::atomic<collComm_t> comm{nullptr};      // made by the worker's first transfer, on its thread
    std::atomic<collComm_t> cudaComm{nullptr};  // the same for CUDA tensors, bound to their device
    int cudaDevice = -1;                        // that device (the worker's thread only)
  };
  // The coalesced batch being built (startCoalescing .. endCoalescing).
  struct CoalescedBatch {
    bool open = false;
    std::vector<std::pair<c10::intrusive_ptr<CollWork>, Body>> ops;  // collectives: one library group
    std::vector<c10::intrusive_ptr<CollWork>> transfers;             // on their peer workers
    std::vector<at::Tensor> outputs;
    std::optional<c10::Device> device;
    std::string what;         // "allreduce #3, allreduce #4, ..."
    std::vector<Span> spans;  // of the collectives' tensors, part = index in ops
    bool inOrder = false;     // a coalesced list in it runs one by one
  };

  // Queues body on worker (the group's own unless given), or into the open block, and
  // returns its Work. CUDA tensors (device): after the caller's current stream,
  // completing when the GPU is.
  c10::intrusive_ptr<c10d::Work> post(c10d::OpType type, OpInfo info, std::vector<at::Tensor> outputs,
                                      c10::Device device, Body body, Worker* worker = nullptr, int sourceRank = -1);
  // Makes the group's CUDA communicator, bound to device, at its first CUDA collective;
  // refuses a CUDA device other than that one's.
  void bindCuda(const char* op, c10::Device device);
  // The communicator of an operation on device's tensors.
  collComm_t commOf(c10::Device device) const { return device.is_cuda() ? cudaComm_.load() : comm_; }
  c10::intrusive_ptr<CollWork> newWork(c10d::OpType type, const OpInfo& info, std::vector<at::Tensor> outputs,
                                       int sourceRank = -1);
  std::shared_ptr<c10::Event> inputsReadyEvent(c10::Device device);
  static void runOn(c10::Device device, const std::shared_ptr<c10::Event>& inputsReady, const std::function<void()>& f);
  // Queues bodies as one library group on device's communicator; the Finish returned
  // runs theirs, once the outermost group (a coalesced block's, where one is open) ended.
  // inOrder (their tensors share bytes), outside any group: each body, then its Finish,
  // in turn, so each reads what the one before wrote through its copies.
  Finish runGroup(const std::vector<Body>& bodies, const OpInfo& block, c10::Device device, bool inOrder = false);
  bool listInOrder(const std::vector<Span>& spans);
  void completed(const c10::intrusive_ptr<CollWork>& work, std::exception_ptr error);
  void checkOpen(const char* op) const;
  // Throws the error of a failed library call on comm, naming the operation; on a
  // communicator of the whole group, also the ranks that never reached it.
  void check(collResult_t r, const OpInfo& op, collComm_t comm);
  std::string ranksThatNeverArrived(const OpInfo& op);
  std::vector<uint8_t> awaitKey(const std::string& key, double timeoutS);
  void release(collComm_t comm, bool revoked);
  void drain(bool revoke);
  // A communicator of nranks made through the store under key (rank 0 publishes the id).
  collComm_t makeComm(const std::string& key, int nranks, int rank, bool withConfig);
  std::pair<collComm_t, std::string> makeCudaComm(const std::string& key, int nranks, int rank, bool withConfig,
                                                  c10::Device device);
  PeerWorker& peerWorker(int peer, bool sending);
  c10::intrusive_ptr<c10d::Work> transfer(std::vector<at::Tensor>& tensors, int peer, bool sending);
  // The body of one transfer on the (peer, direction) worker, completing work.
  void runTransfer(PeerWorker& l, at::Tensor t, int peer, bool sending, const OpInfo& op);
  std::string sentKey(int src, int dst) const;
  int claimAnySource(const OpInfo& op);
  OpInfo info(const char* name, const at::Tensor& t);
  OpInfo info(const char* name, std::string what);

  // The operations' bodies, run on the worker.
  Finish runReduction(const Reduction& r, const OpInfo& op, collComm_t comm,
                      const std::function<collResult_t(collRedOp_t)>& call);
  Finish reduceTensor(at::Tensor t, const Reduction& r, int root, const OpInfo& op);
  Finish reduceScatterFlat(const at::Tensor& in, at::Tensor out, const Reduction& r, const OpInfo& op);
  void allgatherBytes(const void* in, void* out, size_t bytes, c10::Device device, const OpInfo& op);
  void exchange(const std::vector<const char*>& sendPtr, const std::vector<size_t>& sendBytes,
                const std::vector<char*>& recvPtr, const std::vector<size_t>& recvBytes, c10::Device device,
                const OpInfo& op);

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<CollOptions> options_;
  std::string keyPrefix_;  // of this group's keys in the store
  std::atomic<double> timeoutS_;
  collComm_t comm_ = nullptr;
  std::mutex cudaMu_;                          // making cudaComm_
  std::atomic<collComm_t> cudaComm_{nullptr};  // for CUDA tensors (bindCuda)
  int cudaDevice_ = -1;                        // the device it is bound to
  std::string cudaFailure_;                    // why it could not be made: every later CUDA call fails
  std::atomic<uint64_t> seq_{0};
  uint64_t monitoredBarriers_ = 0;
  std::atomic<bool> closing_{false};  // shut down, aborted or being destroyed
  std::atomic<bool> timing_{false};
  CoalescedBatch coalesced_;
  // registerOnCompletionHook's, numbered in the order they came.
  KeyedHooks<std::function<void(std::shared_ptr<c10d::WorkInfo>)>> workInfoHooks_;
  int64_t workInfoHookIds_ = 0;
#if COLL_TORCH_COMPLETION_HOOKS
  KeyedHooks<c10d::CompletionHook> completionHooks_;
#endif
#if COLL_TORCH_ABORT_HOOKS
  KeyedHooks<c10d::AbortHook> abortHooks_;
#endif
  std::mutex peerWorkersMu_;
  std::map<std::pair<int, bool>, PeerWorker> peerWorkers_;
  // Receives from any source: how many sends of each peer this rank's receives have
  // claimed (specific receives claim at their call), and the thread that waits for a
  // peer's count to pass its claims.
  std::mutex claimsMu_;
  std::map<int, int64_t> claimed_;
  std::unique_ptr<Worker> anySourceWorker_;
  std::unique_ptr<Worker> worker_;  // last member: stopped first
};

}  // namespace torch_collectives

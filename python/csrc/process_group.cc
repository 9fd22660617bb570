#include <Python.h>

#include "process_group.h"

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace torch_collectives {

namespace {

std::string shapeOf(const at::Tensor& t) {
  std::ostringstream s;
  s << dtypeName(t.scalar_type()) << t.sizes();
  return s.str();
}

// A dense tensor on the CPU, or on a CUDA device when the library has CUDA.
void checkTensor(const char* op, const at::Tensor& t) {
  TORCH_CHECK(t.layout() == at::kStrided, "torch_collectives: ", op, ": only dense (strided) tensors, got layout ",
              t.layout());
  if (t.device().is_cpu()) return;
  TORCH_CHECK(t.device().is_cuda(), "torch_collectives: ", op, ": tensor on ", t.device().str(),
              "; CPU and CUDA tensors only");
  int gpus = 0;
  TORCH_CHECK(collCudaDeviceCount(&gpus) == collSuccess && gpus > 0, "torch_collectives: ", op, ": tensor on ",
              t.device().str(), " but the Collectives library was built without CUDA or sees no GPU (",
              collGetLastError(nullptr), ")");
}

c10::Device deviceOf(const std::vector<at::Tensor>& ts) { return ts.empty() ? c10::Device(c10::kCPU) : ts[0].device(); }

const at::Tensor& single(const char* op, const std::vector<at::Tensor>& ts) {
  TORCH_CHECK(ts.size() == 1, "torch_collectives: ", op, " takes one tensor per process, got ", ts.size());
  checkTensor(op, ts[0]);
  return ts[0];
}

void checkSameAs(const char* op, const char* what, const at::Tensor& t, const at::Tensor& like) {
  checkTensor(op, t);
  TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel() && t.device() == like.device(),
              "torch_collectives: ", op, ": ", "an ", what, " is ", shapeOf(t), " on ", t.device().str(), ", expected ",
              like.numel(), " elements of ", dtypeName(like.scalar_type()), " on ", like.device().str());
}

void checkRoot(const char* op, int64_t root, int size) {
  TORCH_CHECK(root >= 0 && root < size, "torch_collectives: ", op, ": root ", root, " is not a rank of this group (0..",
              size - 1, ")");
}

// A contiguous tensor of t's values (t itself when it already is), and the write back.
at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
void writeBack(const at::Tensor& buf, at::Tensor& t) {
  if (!buf.is_same(t)) t.copy_(buf);
}

// The one list of `size` tensors shaped like `like` that op takes (what: "output").
std::vector<at::Tensor> rankList(const char* op, const char* what, const std::vector<std::vector<at::Tensor>>& lists,
                                 const at::Tensor& like, int size) {
  TORCH_CHECK(lists.size() == 1 && lists[0].size() == static_cast<size_t>(size), "torch_collectives: ", op,
              " takes one ", "list of ", size, " ", what, " tensors");
  for (const at::Tensor& t : lists[0]) checkSameAs(op, what, t, like);
  return lists[0];
}

// rankList on the root of gather or scatter; elsewhere nothing, and a list is an error.
std::vector<at::Tensor> rootList(const char* op, const char* what, const std::vector<std::vector<at::Tensor>>& lists,
                                 const at::Tensor& like, int size, int rank, int root) {
  if (rank == root) return rankList(op, what, lists, like, size);
  TORCH_CHECK(lists.empty() || lists[0].empty(), "torch_collectives: ", op, ": only the root (rank ", root, ") passes ",
              what, " tensors");
  return {};
}

// The tensor pair of the *_tensor ops: `whole` holds size x part.numel() elements of
// part's dtype, on part's device (wholeName: "input" or "output").
void checkWhole(const char* op, const char* wholeName, const at::Tensor& whole, const at::Tensor& part, int size) {
  checkTensor(op, whole);
  checkTensor(op, part);
  TORCH_CHECK(whole.device() == part.device(), "torch_collectives: ", op, ": input and output are on ",
              whole.device().str(), " and ", part.device().str());
  TORCH_CHECK(whole.scalar_type() == part.scalar_type() && whole.numel() == part.numel() * size,
              "torch_collectives: ", op, ": ", wholeName, " is ", shapeOf(whole), ", expected ", size, " x ",
              part.numel(), " elements of ", dtypeName(part.scalar_type()));
}

std::vector<int64_t> evenSplits(int64_t rows, int size) {
  return std::vector<int64_t>(static_cast<size_t>(size), rows / size);
}

}  // namespace

ProcessGroupCollectives::ProcessGroupCollectives(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                 std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), store_(store), timeoutS_(static_cast<double>(timeout.count()) / 1000.0) {
  // Keys of this group's incarnation: a group made again on the same store (destroyed,
  // then initialized again) must not read the last one's ids. Every rank adds 1 before
  // its init, and no rank starts the next incarnation before every rank's init of this
  // one, so (count - 1) / size is the same on every rank of one incarnation.
  const int64_t count = store_->add("torch_collectives/instances", 1);
  keyPrefix_ = "torch_collectives/" + std::to_string((count - 1) / size) + "/";
  comm_ = makeComm(keyPrefix_ + "unique_id", size, rank);
  worker_ = std::make_unique<Worker>("coll-pg" + std::to_string(rank));
}

// Operations still queued get a grace period to finish (their peers may be about to
// call); after it, the communicators are revoked so what is left fails at once instead of
// holding the destructor (and the interpreter's exit) up to the group's timeout.
ProcessGroupCollectives::~ProcessGroupCollectives() {
  closing_ = true;
  // Python drops the last reference with the GIL held; the worker may need it to run a
  // future's Python callback before it can stop.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  constexpr auto kGrace = std::chrono::seconds(5);
  std::lock_guard<std::mutex> lock(lanesMu_);
  bool idle = worker_->waitIdle(kGrace);
  for (auto& [key, lane] : lanes_) idle = lane.worker->waitIdle(idle ? kGrace : std::chrono::seconds(0)) && idle;
  if (!idle) {
    collCommRevoke(comm_, 0);
    for (auto& [key, lane] : lanes_)
      if (collComm_t c = lane.comm.load()) collCommRevoke(c, 0);
  }
  worker_.reset();
  for (auto& [key, lane] : lanes_) lane.worker.reset();
  for (auto& [key, lane] : lanes_) release(lane.comm.load(), !idle);
  release(comm_, !idle);
  if (saved) PyEval_RestoreThread(saved);
}

// Destroys a healthy communicator, aborts one that failed or was revoked.
void ProcessGroupCollectives::release(collComm_t comm, bool revoked) {
  if (!comm) return;
  collResult_t async = collSuccess;
  if (revoked || (collCommGetAsyncError(comm, &async) == collSuccess && async != collSuccess)) collCommAbort(comm);
  else collCommDestroy(comm);
}

// Polls rather than store->get(): a TCPStore holds its one lock through a blocking get, so
// a lane thread waiting there for its peer's id would keep this process's other lanes
// from publishing theirs, and two ranks could wait on each other for the whole timeout.
std::vector<uint8_t> ProcessGroupCollectives::awaitKey(const std::string& key) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(100);
  while (!store_->check({key})) {
    TORCH_CHECK(!closing_, "torch_collectives: rank ", rank_, ": the group was destroyed while waiting for ", key);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    TORCH_CHECK(timeoutS_ <= 0 || waited < timeoutS_, "torch_collectives: rank ", rank_, ": no peer published ", key,
                " in the store within the group's timeout (", timeoutS_, " s)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  return store_->get(key);
}

collComm_t ProcessGroupCollectives::makeComm(const std::string& key, int nranks, int rank) {
  collUniqueId id;
  if (rank == 0) {
    collResult_t r = collGetUniqueId(&id);
    TORCH_CHECK(r == collSuccess, "torch_collectives: collGetUniqueId: ", collGetErrorString(r), ": ",
                collGetLastError(nullptr));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store_->set(key, std::vector<uint8_t>(p, p + sizeof id));
  } else {
    std::vector<uint8_t> bytes = awaitKey(key);
    TORCH_CHECK(bytes.size() == sizeof id, "torch_collectives: store key ", key, " holds ", bytes.size(),
                " bytes, not a unique id of ", sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  collComm_t comm = nullptr;
  collResult_t r = collCommInitRank(&comm, nranks, id, rank);
  TORCH_CHECK(r == collSuccess, "torch_collectives: rank ", rank, " of ", nranks,
              ": collCommInitRank: ", collGetErrorString(r), ": ", collGetLastError(nullptr));
  r = collCommSetTimeout(comm, timeoutS_ > 0 ? timeoutS_ : 0);
  TORCH_CHECK(r == collSuccess, "torch_collectives: collCommSetTimeout: ", collGetLastError(comm));
  return comm;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::post(c10d::OpType type, OpInfo info,
                                                             std::vector<at::Tensor> outputs, c10::Device device,
                                                             std::function<void()> body, Worker* worker) {
  auto work = c10::make_intrusive<CollWork>(rank_, type, nullptr, std::move(outputs));
  std::shared_ptr<c10::Event> inputsReady;
  if (device.is_cuda()) {  // the caller's current stream writes the inputs: wait for it there
    c10::impl::VirtualGuardImpl impl(device.type());
    inputsReady = std::make_shared<c10::Event>(device.type());
    inputsReady->record(impl.getStream(device));
  }
  (worker ? worker : worker_.get())->post([work, device, inputsReady, body = std::move(body)] {
    std::exception_ptr error;
    try {
      at::NoGradGuard noGrad;
      if (inputsReady) runOnDevice(device, *inputsReady, body);
      else body();
    } catch (...) {
      error = std::current_exception();
    }
    work->complete(error);
  });
  return work;
}

// An operation on CUDA tensors, on the worker: on the tensors' device, after the event
// recorded on the caller's stream, on the legacy default stream (the library is called
// with no stream, torch's copies here use the same), and complete only once the GPU is:
// a Work that says it is done means its outputs are.
void ProcessGroupCollectives::runOnDevice(c10::Device device, c10::Event& inputsReady,
                                          const std::function<void()>& body) {
  c10::DeviceGuard deviceGuard(device);
  c10::impl::VirtualGuardImpl impl(device.type());
  const c10::Stream stream = impl.getDefaultStream(device);
  c10::StreamGuard streamGuard(stream);
  inputsReady.block(stream);
  body();
  stream.synchronize();
}

ProcessGroupCollectives::OpInfo ProcessGroupCollectives::info(const char* name, const at::Tensor& t) {
  return OpInfo{name, static_cast<int64_t>(seq_.fetch_add(1)), shapeOf(t)};
}

void ProcessGroupCollectives::check(collResult_t r, const OpInfo& op, collComm_t comm) {
  if (r == collSuccess) return;
  std::ostringstream s;
  s << "torch_collectives: " << op.name;
  if (op.seq >= 0) s << " #" << op.seq;
  s << " (" << op.what << ") failed on rank " << rank_ << " of " << size_ << ": " << collGetErrorString(r) << ": "
    << collGetLastError(comm);
  if (comm == comm_ && (r == collTimeout || r == collRemoteError)) s << ranksThatNeverArrived(op);
  throw std::runtime_error(s.str());
}

// Every rank whose operation #seq failed says so through the store; the ranks that have
// not said so within a moment never reached it (stopped calling, or died before).
std::string ProcessGroupCollectives::ranksThatNeverArrived(const OpInfo& op) {
  auto key = [&](int r) { return keyPrefix_ + "failed/" + std::to_string(op.seq) + "/" + std::to_string(r); };
  std::vector<int> missing;
  try {
    store_->set(key(rank_), std::vector<uint8_t>{1});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (;;) {
      missing.clear();
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && !store_->check({key(r)})) missing.push_back(r);
      if (missing.empty() || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    return std::string("; which ranks reached it is unknown (the store failed: ") + e.what() + ")";
  }
  if (missing.empty()) return "; every rank reached it";
  std::ostringstream s;
  s << "; ranks that never arrived at " << op.name << " #" << op.seq << ":";
  for (int r : missing) s << " " << r;
  return s.str();
}

// ---- reductions ----

// Runs call with r's library op: a PreMulSum op made for this call (and freed after it),
// or the built-in one; throws the call's error.
void ProcessGroupCollectives::runReduction(const Reduction& r, const OpInfo& op,
                                           const std::function<collResult_t(collRedOp_t)>& call) {
  collRedOp_t redOp = r.op;
  if (r.preMulSum) {
    char scalar[8];
    preMulSumScalar(r, scalar);
    check(collRedOpCreatePreMulSum(&redOp, scalar, r.type, collScalarHostImmediate, comm_), op, comm_);
  }
  const collResult_t res = call(redOp);
  if (r.preMulSum) collRedOpDestroy(redOp, comm_);
  check(res, op, comm_);
}

void ProcessGroupCollectives::reduceTensor(at::Tensor& t, const Reduction& r, int root, const OpInfo& op) {
  at::Tensor buf = dense(t);
  if (r.path == Path::kBitwise) {
    at::Tensor all = buf.new_empty({size_, buf.numel()});
    allgatherBytes(buf.data_ptr(), all.data_ptr(), buf.nbytes(), op);
    if (root < 0 || root == rank_) buf.copy_(combineBitwise(all, r.bitwise).view_as(buf));
    writeBack(buf, t);
    return;
  }
  at::Tensor low = lowered(buf, r);
  const size_t count = static_cast<size_t>(low.numel());
  runReduction(r, op, [&](collRedOp_t redOp) {
    return root < 0 ? collAllReduce(low.data_ptr(), low.data_ptr(), count, r.type, redOp, comm_, nullptr)
                    : collReduce(low.data_ptr(), low.data_ptr(), count, r.type, redOp, root, comm_, nullptr);
  });
  raise(low, buf, r);
  writeBack(buf, t);
}

void ProcessGroupCollectives::reduceScatterFlat(const at::Tensor& in, at::Tensor& out, const Reduction& r,
                                                const OpInfo& op) {
  at::Tensor src = dense(in), dst = dense(out);
  if (r.path == Path::kBitwise) {
    at::Tensor all = src.new_empty({size_, src.numel()});
    allgatherBytes(src.data_ptr(), all.data_ptr(), src.nbytes(), op);
    at::Tensor mine = all.narrow(1, rank_ * dst.numel(), dst.numel());
    dst.copy_(combineBitwise(mine, r.bitwise).view_as(dst));
    writeBack(dst, out);
    return;
  }
  at::Tensor lowIn = lowered(src, r), lowOut = lowered(dst, r);
  runReduction(r, op, [&](collRedOp_t redOp) {
    return collReduceScatter(lowIn.data_ptr(), lowOut.data_ptr(), static_cast<size_t>(lowOut.numel()), r.type, redOp,
                             comm_, nullptr);
  });
  raise(lowOut, dst, r);
  writeBack(dst, out);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allreduce(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceOptions& opts) {
  at::Tensor t = single("allreduce", tensors);
  Reduction r = planReduction("allreduce", t.scalar_type(), opts.reduceOp);
  OpInfo op = info("allreduce", t);
  return post(c10d::OpType::ALLREDUCE, op, {t}, t.device(), [this, t, r, op]() mutable { reduceTensor(t, r, -1, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<Reduction> plans;
  for (const at::Tensor& t : tensors) {
    checkTensor("allreduce_coalesced", t);
    plans.push_back(planReduction("allreduce_coalesced", t.scalar_type(), opts.reduceOp));
  }
  OpInfo op{"allreduce_coalesced", static_cast<int64_t>(seq_.fetch_add(1)),
            std::to_string(tensors.size()) + " tensors"};
  return post(c10d::OpType::ALLREDUCE_COALESCED, op, tensors, deviceOf(tensors), [this, tensors, plans, op]() mutable {
    // One reduction per tensor, in order: every rank passes the same list.
    for (size_t i = 0; i < tensors.size(); ++i) reduceTensor(tensors[i], plans[i], -1, op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::reduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::ReduceOptions& opts) {
  at::Tensor t = single("reduce", tensors);
  checkRoot("reduce", opts.rootRank, size_);
  Reduction r = planReduction("reduce", t.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce", t);
  const int root = static_cast<int>(opts.rootRank);
  return post(c10d::OpType::REDUCE, op, {t}, t.device(),
              [this, t, r, root, op]() mutable { reduceTensor(t, r, root, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                                       const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single("reduce_scatter", outputs);
  std::vector<at::Tensor> ins = rankList("reduce_scatter", "input", inputs, out, size_);
  Reduction r = planReduction("reduce_scatter", out.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce_scatter", out);
  return post(c10d::OpType::REDUCE_SCATTER, op, {out}, out.device(), [this, out, ins, r, op]() mutable {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : ins) flat.push_back(t.reshape({-1}));
    reduceScatterFlat(at::cat(flat), out, r, op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                             const c10d::ReduceScatterOptions& opts) {
  checkWhole("reduce_scatter_tensor", "input", input, output, size_);
  Reduction r = planReduction("reduce_scatter_tensor", output.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce_scatter_tensor", output);
  at::Tensor out = output, in = input;
  return post(c10d::OpType::_REDUCE_SCATTER_BASE, op, {out}, out.device(),
              [this, out, in, r, op]() mutable { reduceScatterFlat(in, out, r, op); });
}

// ---- copies (every dtype, as bytes) ----

void ProcessGroupCollectives::allgatherBytes(const void* in, void* out, size_t bytes, const OpInfo& op) {
  check(collAllGather(in, out, bytes, collUint8, comm_, nullptr), op, comm_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::broadcast(std::vector<at::Tensor>& tensors,
                                                                  const c10d::BroadcastOptions& opts) {
  at::Tensor t = single("broadcast", tensors);
  checkRoot("broadcast", opts.rootRank, size_);
  OpInfo op = info("broadcast", t);
  const int root = static_cast<int>(opts.rootRank);
  return post(c10d::OpType::BROADCAST, op, {t}, t.device(), [this, t, root, op]() mutable {
    at::Tensor buf = dense(t);
    check(collBroadcast(buf.data_ptr(), buf.data_ptr(), buf.nbytes(), collUint8, root, comm_, nullptr), op, comm_);
    writeBack(buf, t);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                  std::vector<at::Tensor>& inputs,
                                                                  const c10d::AllgatherOptions&) {
  at::Tensor in = single("allgather", inputs);
  std::vector<at::Tensor> outs = rankList("allgather", "output", outputs, in, size_);
  OpInfo op = info("allgather", in);
  return post(c10d::OpType::ALLGATHER, op, outs, in.device(), [this, in, outs, op]() mutable {
    at::Tensor src = dense(in);
    at::Tensor all = src.new_empty({size_, src.numel()});
    allgatherBytes(src.data_ptr(), all.data_ptr(), src.nbytes(), op);
    for (int r = 0; r < size_; ++r) outs[r].copy_(all[r].view(outs[r].sizes()));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::AllgatherOptions&) {
  checkWhole("all_gather_into_tensor", "output", output, input, size_);
  OpInfo op = info("all_gather_into_tensor", input);
  at::Tensor out = output, in = input;
  return post(c10d::OpType::_ALLGATHER_BASE, op, {out}, in.device(), [this, out, in, op]() mutable {
    at::Tensor src = dense(in), dst = dense(out);
    allgatherBytes(src.data_ptr(), dst.data_ptr(), src.nbytes(), op);
    writeBack(dst, out);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_), "torch_collectives: allgather_coalesced takes ", size_,
              " output lists (one per rank), got ", outputLists.size());
  for (const at::Tensor& t : inputs)
    TORCH_CHECK(t.device().is_cpu(), "torch_collectives: allgather_coalesced: CPU tensors only, got one on ",
                t.device().str(), " (use all_gather_into_tensor)");
  for (const auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "torch_collectives: allgather_coalesced: an output list has ",
                list.size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) checkSameAs("allgather_coalesced", "output", list[i], inputs[i]);
  }
  OpInfo op{"allgather_coalesced", static_cast<int64_t>(seq_.fetch_add(1)), std::to_string(inputs.size()) + " tensors"};
  std::vector<at::Tensor> flatOuts;
  for (const auto& list : outputLists) flatOuts.insert(flatOuts.end(), list.begin(), list.end());
  return post(c10d::OpType::ALLGATHER_COALESCED, op, flatOuts, deviceOf(inputs),
              [this, outputLists, inputs, op]() mutable {
    size_t total = 0;
    for (const at::Tensor& t : inputs) total += t.nbytes();
    std::vector<uint8_t> mine(total), all(total * static_cast<size_t>(size_));
    size_t off = 0;
    for (const at::Tensor& t : inputs) {
      at::Tensor c = dense(t);
      std::memcpy(mine.data() + off, c.data_ptr(), c.nbytes());
      off += c.nbytes();
    }
    allgatherBytes(mine.data(), all.data(), total, op);
    for (int r = 0; r < size_; ++r) {
      off = total * static_cast<size_t>(r);
      for (at::Tensor& t : outputLists[static_cast<size_t>(r)]) {
        at::Tensor c = dense(t);
        std::memcpy(c.data_ptr(), all.data() + off, c.nbytes());
        off += c.nbytes();
        writeBack(c, t);
      }
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::GatherOptions& opts) {
  at::Tensor in = single("gather", inputs);
  checkRoot("gather", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs = rootList("gather", "output", outputs, in, size_, rank_, root);
  OpInfo op = info("gather", in);
  return post(c10d::OpType::GATHER, op, outs, in.device(), [this, in, outs, root, op]() mutable {
    at::Tensor src = dense(in);
    at::Tensor all = rank_ == root ? src.new_empty({size_, src.numel()}) : at::Tensor();
    check(collGather(src.data_ptr(), all.defined() ? all.data_ptr() : nullptr, src.nbytes(), collUint8, root, comm_,
                     nullptr),
          op, comm_);
    for (size_t r = 0; r < outs.size(); ++r) outs[r].copy_(all[static_cast<int64_t>(r)].view(outs[r].sizes()));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ScatterOptions& opts) {
  at::Tensor out = single("scatter", outputs);
  checkRoot("scatter", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins = rootList("scatter", "input", inputs, out, size_, rank_, root);
  OpInfo op = info("scatter", out);
  return post(c10d::OpType::SCATTER, op, {out}, out.device(), [this, out, ins, root, op]() mutable {
    at::Tensor dst = dense(out);
    at::Tensor all;
    if (!ins.empty()) {
      std::vector<at::Tensor> flat;
      for (const at::Tensor& t : ins) flat.push_back(t.reshape({-1}));
      all = at::cat(flat);
    }
    check(collScatter(all.defined() ? all.data_ptr() : nullptr, dst.data_ptr(), dst.nbytes(), collUint8, root, comm_,
                      nullptr),
          op, comm_);
    writeBack(dst, out);
  });
}

// Sends sendBytes[p] from sendPtr[p] to every rank p and receives recvBytes[p] into
// recvPtr[p], in one group (the rank's own block is a copy).
void ProcessGroupCollectives::exchange(const std::vector<const char*>& sendPtr, const std::vector<size_t>& sendBytes,
                                       const std::vector<char*>& recvPtr, const std::vector<size_t>& recvBytes,
                                       c10::Device device, const OpInfo& op) {
  if (recvBytes[rank_]) {  // the own block: a copy (on the device of the buffers)
    auto bytes = at::TensorOptions().dtype(at::kByte).device(device);
    const auto n = static_cast<int64_t>(recvBytes[rank_]);
    at::from_blob(recvPtr[rank_], {n}, bytes).copy_(at::from_blob(const_cast<char*>(sendPtr[rank_]), {n}, bytes));
  }
  check(collGroupStart(), op, comm_);
  collResult_t first = collSuccess;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    collResult_t r = collSuccess;
    if (sendBytes[p]) r = collSend(sendPtr[p], sendBytes[p], collUint8, p, comm_, nullptr);
    if (r == collSuccess && recvBytes[p]) r = collRecv(recvPtr[p], recvBytes[p], collUint8, p, comm_, nullptr);
    if (first == collSuccess) first = r;
  }
  collResult_t end = collGroupEnd();
  check(first != collSuccess ? first : end, op, comm_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                      std::vector<int64_t>& outputSplitSizes,
                                                                      std::vector<int64_t>& inputSplitSizes,
                                                                      const c10d::AllToAllOptions&) {
  checkTensor("all_to_all_single", output);
  checkTensor("all_to_all_single", input);
  TORCH_CHECK(input.device() == output.device(), "torch_collectives: all_to_all_single: input on ",
              input.device().str(), ", output on ", output.device().str());
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "torch_collectives: all_to_all_single: input is ",
              shapeOf(input), ", output ", shapeOf(output), ": the dtypes differ");
  const int64_t inRows = input.dim() ? input.size(0) : 1, outRows = output.dim() ? output.size(0) : 1;
  auto splits = [&](std::vector<int64_t> s, int64_t rows, const char* which) {
    if (s.empty()) {
      TORCH_CHECK(rows % size_ == 0, "torch_collectives: all_to_all_single: ", which, " has ", rows,
                  " rows, not a multiple of the group size ", size_, " (pass split sizes)");
      return evenSplits(rows, size_);
    }
    TORCH_CHECK(s.size() == static_cast<size_t>(size_), "torch_collectives: all_to_all_single: ", which,
                " split sizes have ", s.size(), " entries for ", size_, " ranks");
    int64_t sum = 0;
    for (int64_t v : s) {
      TORCH_CHECK(v >= 0, "torch_collectives: all_to_all_single: ", which, " split size ", v, " is negative");
      sum += v;
    }
    TORCH_CHECK(sum == rows, "torch_collectives: all_to_all_single: ", which, " split sizes sum to ", sum, ", not its ",
                rows, " rows");
    return s;
  };
  std::vector<int64_t> inSplit = splits(inputSplitSizes, inRows, "input");
  std::vector<int64_t> outSplit = splits(outputSplitSizes, outRows, "output");
  OpInfo op = info("all_to_all_single", input);
  at::Tensor out = output, in = input;
  return post(c10d::OpType::ALLTOALL_BASE, op, {out}, in.device(),
              [this, out, in, inSplit, outSplit, inRows, outRows, op]() mutable {
    at::Tensor src = dense(in), dst = dense(out);
    if (src.data_ptr() == dst.data_ptr()) src = src.clone();  // in place: keep the input whole
    const size_t inRow = inRows ? src.nbytes() / static_cast<size_t>(inRows) : 0;
    const size_t outRow = outRows ? dst.nbytes() / static_cast<size_t>(outRows) : 0;
    std::vector<const char*> sp(size_);
    std::vector<char*> rp(size_);
    std::vector<size_t> sb(size_), rb(size_);
    size_t so = 0, ro = 0;
    for (int p = 0; p < size_; ++p) {
      sp[p] = static_cast<const char*>(src.data_ptr()) + so;
      rp[p] = static_cast<char*>(dst.data_ptr()) + ro;
      sb[p] = static_cast<size_t>(inSplit[p]) * inRow;
      rb[p] = static_cast<size_t>(outSplit[p]) * outRow;
      so += sb[p];
      ro += rb[p];
    }
    exchange(sp, sb, rp, rb, dst.device(), op);
    writeBack(dst, out);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::alltoall(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllToAllOptions&) {
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
              "torch_collectives: all_to_all takes ", size_, " input and ", size_, " output tensors, got ",
              inputs.size(), " and ", outputs.size());
  for (int p = 0; p < size_; ++p) {
    checkTensor("all_to_all", inputs[p]);
    checkTensor("all_to_all", outputs[p]);
    TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() &&
                    outputs[p].scalar_type() == inputs[0].scalar_type(),
                "torch_collectives: all_to_all: every tensor must have one dtype");
  }
  OpInfo op = info("all_to_all", inputs[0]);
  return post(c10d::OpType::ALLTOALL, op, outputs, deviceOf(inputs), [this, outputs, inputs, op]() mutable {
    std::vector<at::Tensor> src(size_), dst(size_);
    std::vector<const char*> sp(size_);
    std::vector<char*> rp(size_);
    std::vector<size_t> sb(size_), rb(size_);
    for (int p = 0; p < size_; ++p) {
      src[p] = dense(inputs[p]);
      dst[p] = dense(outputs[p]);
      sp[p] = static_cast<const char*>(src[p].data_ptr());
      rp[p] = static_cast<char*>(dst[p].data_ptr());
      sb[p] = src[p].nbytes();
      rb[p] = dst[p].nbytes();
    }
    exchange(sp, sb, rp, rb, deviceOf(dst), op);
    for (int p = 0; p < size_; ++p) writeBack(dst[p], outputs[p]);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::barrier(const c10d::BarrierOptions&) {
  OpInfo op{"barrier", static_cast<int64_t>(seq_.fetch_add(1)), "no data"};
  return post(c10d::OpType::BARRIER, op, {}, c10::Device(c10::kCPU), [this, op] {
    uint8_t token = 0;
    check(collAllReduce(&token, &token, 1, collUint8, collMax, comm_, nullptr), op, comm_);
  });
}

// ---- send / recv ----

ProcessGroupCollectives::Lane& ProcessGroupCollectives::lane(int peer, bool sending) {
  std::lock_guard<std::mutex> lock(lanesMu_);
  Lane& l = lanes_[{peer, sending}];
  if (!l.worker) l.worker = std::make_unique<Worker>((sending ? "coll-send" : "coll-recv") + std::to_string(peer));
  return l;
}

// One transfer on the (peer, direction) lane; the lane's communicator has the sender as
// rank 0 and is made by its first transfer.
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::transfer(std::vector<at::Tensor>& tensors, int peer,
                                                                 bool sending) {
  const char* name = sending ? "send" : "recv";
  at::Tensor t = single(name, tensors);
  checkRoot(name, peer, size_);
  TORCH_CHECK(peer != rank_, "torch_collectives: ", name, ": ", sending ? "dst " : "src ", peer, " is this rank");
  Lane& l = lane(peer, sending);
  OpInfo op{name, -1, shapeOf(t) + (sending ? " to rank " : " from rank ") + std::to_string(peer)};
  const int src = sending ? rank_ : peer, dst = sending ? peer : rank_;
  const std::string key = keyPrefix_ + "p2p/" + std::to_string(src) + "->" + std::to_string(dst);
  return post(
      sending ? c10d::OpType::SEND : c10d::OpType::RECV, op, {t}, t.device(),
      [this, &l, t, key, op, sending]() mutable {
    if (!l.comm.load()) l.comm = makeComm(key, 2, sending ? 0 : 1);
    collComm_t comm = l.comm.load();
    at::Tensor buf = dense(t);
    check(sending ? collSend(buf.data_ptr(), buf.nbytes(), collUint8, 1, comm, nullptr)
                  : collRecv(buf.data_ptr(), buf.nbytes(), collUint8, 0, comm, nullptr),
          op, comm);
    if (!sending) writeBack(buf, t);
      },
      l.worker.get());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::send(std::vector<at::Tensor>& tensors, int dstRank, int) {
  return transfer(tensors, dstRank, true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::recv(std::vector<at::Tensor>& tensors, int srcRank, int) {
  return transfer(tensors, srcRank, false);
}

c10::intrusive_ptr<c10d::ProcessGroup> createProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                          int size, const std::chrono::duration<float>& timeout) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return c10::make_intrusive<ProcessGroupCollectives>(store, rank, size, ms);
}

}  // namespace torch_collectives

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

namespace {

void addSpans(const std::vector<at::Tensor>& ts, size_t part, std::vector<Span>& out) {
  for (const at::Tensor& t : ts) {
    if (t.numel() == 0) continue;
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
    out.push_back({begin, begin + static_cast<uintptr_t>((last + 1) * t.element_size()), part});
  }
}

// Each tensor a part of its own; with `with`, the tensor of the same index in its part.
std::vector<Span> spansOfEach(const std::vector<at::Tensor>& ts, const std::vector<at::Tensor>& with = {}) {
  std::vector<Span> spans;
  for (size_t i = 0; i < ts.size(); ++i) {
    addSpans({ts[i]}, i, spans);
    if (i < with.size()) addSpans({with[i]}, i, spans);
  }
  return spans;
}

// Library groups runGroup has open on this thread.
thread_local int tlsOpenGroups = 0;

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

// Whether tensors of two different parts (the operations of a block, the tensors of a
// coalesced list) share bytes; a tensor's bytes run from its first element to its last
// (torch's strides are never negative).
bool partsOverlap(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  uintptr_t end = 0;
  size_t owner = 0;
  for (const Span& s : spans) {
    if (s.begin < end && s.part != owner) return true;
    if (s.end > end) {
      end = s.end;
      owner = s.part;
    }
  }
  return false;
}

// Small contiguous CPU tensors of one dtype, reduced together: one reduction of their
// concatenation costs less than a library group of one per tensor (2 processes: 32 of 1
// KiB in a group ~20 us, one of 32 KiB ~6 us; 32 of 8 KiB 67 us, one of 256 KiB 26 us).
constexpr size_t kFuseMaxBytes = size_t{256} << 10;

// Not where two tensors share bytes: one reduction of both copies would not be the two
// reductions in turn that the group gives (a tensor passed twice is summed twice).
bool fusible(const std::vector<at::Tensor>& ts) {
  if (ts.size() < 2 || !ts[0].device().is_cpu()) return false;
  size_t bytes = 0;
  for (const at::Tensor& t : ts) {
    if (t.scalar_type() != ts[0].scalar_type() || !t.is_contiguous()) return false;
    bytes += t.nbytes();
  }
  return bytes <= kFuseMaxBytes && !partsOverlap(spansOfEach(ts));
}

// Copies between a list of contiguous CPU tensors and their concatenation, flat.
void packInto(const std::vector<at::Tensor>& ts, at::Tensor& flat) {
  auto* p = static_cast<char*>(flat.data_ptr());
  for (const at::Tensor& t : ts) {
    if (t.nbytes()) std::memcpy(p, t.const_data_ptr(), t.nbytes());
    p += t.nbytes();
  }
}
void unpackFrom(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  const auto* p = static_cast<const char*>(flat.const_data_ptr());
  for (const at::Tensor& t : ts) {
    if (t.nbytes()) std::memcpy(t.data_ptr(), p, t.nbytes());
    p += t.nbytes();
  }
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

// ---- life cycle ----

namespace {

collCompress_t compressCode(const std::string& name) {
  if (name.empty() || name == "none") return collCompressNone;
  if (name == "fp16" || name == "float16" || name == "half") return collCompressFloat16;
  if (name == "bf16" || name == "bfloat16") return collCompressBfloat16;
  TORCH_CHECK(false, "torch_collectives: option compress=", name, " is not one of none, fp16, bf16");
}

}  // namespace

ProcessGroupCollectives::ProcessGroupCollectives(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                 c10::intrusive_ptr<CollOptions> options)
    : c10d::Backend(rank, size),
      store_(store),
      options_(std::move(options)),
      timeoutS_(static_cast<double>(options_->timeout.count()) / 1000.0) {
  TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "torch_collectives: rank ", rank, " is not a rank of a group of ",
              size);
  TORCH_CHECK(options_->handoffUs >= 0, "torch_collectives: Options handoff_us=", options_->handoffUs,
              ": must be >= 0 (microseconds)");
  // Keys of this group's incarnation: a group made again on the same store (destroyed,
  // then initialized again) must not read the last one's ids. Every rank adds 1 before
  // its init, and no rank starts the next incarnation before every rank's init of this
  // one, so (count - 1) / size is the same on every rank of one incarnation.
  const int64_t count = store_->add("torch_collectives/instances", 1);
  keyPrefix_ = "torch_collectives/" + std::to_string((count - 1) / size) + "/";
  comm_ = makeComm(keyPrefix_ + "unique_id", size, rank, true);
  worker_ = std::make_unique<Worker>("coll-pg" + std::to_string(rank), Worker::Idle::kSleep,
                                     std::chrono::microseconds(options_->handoffUs));
}

// Operations still queued get a grace period to finish (their peers may be about to
// call); after it, the communicators are revoked so what is left fails at once instead of
// holding the destructor (and the interpreter's exit) up to the group's timeout.
ProcessGroupCollectives::~ProcessGroupCollectives() {
  closing_ = true;
  // Python drops the last reference with the GIL held; the worker may need it to run a
  // future's Python callback before it can stop.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  drain(false);
  anySourceWorker_.reset();
  worker_.reset();
  std::lock_guard<std::mutex> lock(peerWorkersMu_);
  for (auto& [key, pw] : peerWorkers_) pw.worker.reset();
  for (auto& [key, pw] : peerWorkers_) {
    release(pw.comm.exchange(nullptr), true);
    release(pw.cudaComm.exchange(nullptr), true);
  }
  release(cudaComm_.exchange(nullptr), false);
  release(comm_, false);
  comm_ = nullptr;
  if (saved) PyEval_RestoreThread(saved);
}

// Waits (up to a grace period, none with revoke) for what is queued, then revokes the
// communicators if something is still running, so that it fails at once. Either way what
// is queued is handed to the workers at once (waitIdle), none left for a waiting thread.
void ProcessGroupCollectives::drain(bool revoke) {
  constexpr auto kGrace = std::chrono::seconds(5);
  std::lock_guard<std::mutex> lock(peerWorkersMu_);
  bool idle = (!worker_ || worker_->waitIdle(revoke ? std::chrono::seconds(0) : kGrace)) && !revoke;
  if (anySourceWorker_) idle = anySourceWorker_->waitIdle(idle ? kGrace : std::chrono::seconds(0)) && idle;
  for (auto& [key, pw] : peerWorkers_) idle = pw.worker->waitIdle(idle ? kGrace : std::chrono::seconds(0)) && idle;
  if (idle) return;
  for (collComm_t c : {comm_, cudaComm_.load()})
    if (c) collCommRevoke(c, 0);
  for (auto& [key, pw] : peerWorkers_)
    for (collComm_t c : {pw.comm.load(), pw.cudaComm.load()})
      if (c) collCommRevoke(c, 0);
}

void ProcessGroupCollectives::shutdown() {
  if (closing_.exchange(true)) return;
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  drain(false);
  if (saved) PyEval_RestoreThread(saved);
}

void ProcessGroupCollectives::abort() {
#if COLL_TORCH_ABORT_HOOKS
  abortHooks_.fire("an abort");
#endif
  closing_ = true;
  drain(true);
}

void ProcessGroupCollectives::waitForPendingWorks() {
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  worker_->waitIdle(std::chrono::hours(24 * 365));
  if (saved) PyEval_RestoreThread(saved);
}

void ProcessGroupCollectives::checkOpen(const char* op) const {
  TORCH_CHECK(!closing_, "torch_collectives: ", op, " on rank ", rank_,
              ": the group was shut down or aborted (destroy_process_group); make a new group");
}

void ProcessGroupCollectives::setTimeout(std::chrono::milliseconds timeout) {
  timeoutS_ = static_cast<double>(timeout.count()) / 1000.0;
  options_->timeout = timeout;
  std::vector<collComm_t> comms{comm_};
  {
    std::lock_guard<std::mutex> lock(cudaMu_);
    comms.push_back(cudaComm_.load());
  }
  {
    std::lock_guard<std::mutex> lock(peerWorkersMu_);
    for (auto& [key, pw] : peerWorkers_) comms.insert(comms.end(), {pw.comm.load(), pw.cudaComm.load()});
  }
  for (collComm_t c : comms) {
    if (!c) continue;
    collResult_t r = collCommSetTimeout(c, timeoutS_);
    TORCH_CHECK(r == collSuccess, "torch_collectives: set timeout ", timeoutS_, " s: ", collGetLastError(c));
  }
}

// Destroys a healthy communicator, aborts one that failed or was revoked.
void ProcessGroupCollectives::release(collComm_t comm, bool revoked) {
  if (!comm) return;
  collResult_t async = collSuccess;
  if (revoked || (collCommGetAsyncError(comm, &async) == collSuccess && async != collSuccess)) collCommAbort(comm);
  else collCommDestroy(comm);
}

// Polls rather than store->get(): a TCPStore holds its one lock through a blocking get, so
// a peer worker's thread waiting there for its peer's id would keep this process's others
// from publishing theirs, and two ranks could wait on each other for the whole timeout.
std::vector<uint8_t> ProcessGroupCollectives::awaitKey(const std::string& key, double timeoutS) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(100);
  while (!store_->check({key})) {
    TORCH_CHECK(!closing_, "torch_collectives: rank ", rank_, ": the group was destroyed while waiting for ", key);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    TORCH_CHECK(timeoutS <= 0 || waited < timeoutS, "torch_collectives: rank ", rank_, ": no peer published ", key,
                " in the store within the timeout (", timeoutS, " s)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  return store_->get(key);
}

collComm_t ProcessGroupCollectives::makeComm(const std::string& key, int nranks, int rank, bool withConfig) {
  collUniqueId id;
  if (rank == 0) {
    collResult_t r = collGetUniqueId(&id);
    TORCH_CHECK(r == collSuccess, "torch_collectives: collGetUniqueId: ", collGetErrorString(r), ": ",
                collGetLastError(nullptr));
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store_->set(key, std::vector<uint8_t>(p, p + sizeof id));
  } else {
    std::vector<uint8_t> bytes = awaitKey(key, timeoutS_);
    TORCH_CHECK(bytes.size() == sizeof id, "torch_collectives: store key ", key, " holds ", bytes.size(),
                " bytes, not a unique id of ", sizeof id);
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  collConfig_t config = COLL_CONFIG_INITIALIZER;
  const CollOptions& o = *options_;
  if (withConfig) {
    if (!o.compress.empty()) config.compress = compressCode(o.compress);
    if (o.deterministic >= 0) config.deterministic = o.deterministic;
    if (!o.netName.empty()) config.netName = o.netName.c_str();
    if (o.minChannels > 0) config.minCTAs = o.minChannels;
    if (o.maxChannels > 0) config.maxCTAs = o.maxChannels;
    if (!o.groupName.empty()) config.commName = o.groupName.c_str();
  }
  collComm_t comm = nullptr;
  collResult_t r = collCommInitRankConfig(&comm, nranks, id, rank, &config);
  TORCH_CHECK(r == collSuccess, "torch_collectives: rank ", rank, " of ", nranks,
              ": collCommInitRank: ", collGetErrorString(r), ": ", collGetLastError(nullptr));
  r = collCommSetTimeout(comm, std::max(timeoutS_.load(), 0.0));
  TORCH_CHECK(r == collSuccess, "torch_collectives: collCommSetTimeout: ", collGetLastError(comm));
  return comm;
}

// The group's communicator is made at construction, when the process may not have used
// CUDA yet, and the library binds a communicator to the current device only once the
// process has started CUDA there (collCommInitRank). So CUDA tensors get a communicator of
// their own: made by the group's first CUDA collective, which every rank reaches at the
// same point, on the caller's thread with the tensors' device current (their context is
// then started), as ProcessGroupNCCL makes its communicators at first use.
void ProcessGroupCollectives::bindCuda(const char* op, c10::Device device) {
  std::lock_guard<std::mutex> lock(cudaMu_);
  TORCH_CHECK(cudaFailure_.empty(), cudaFailure_);  // the ranks that made theirs wait for no second try
  if (cudaComm_.load()) {
    TORCH_CHECK(device.index() == cudaDevice_, "torch_collectives: ", op, " on rank ", rank_, ": a tensor on ",
                device.str(), ", but this group's CUDA tensors are on cuda:", cudaDevice_,
                " (one CUDA device per process in a group)");
    return;
  }
  c10::DeviceGuard guard(device);
  collComm_t comm = makeComm(keyPrefix_ + "cuda/unique_id", size_, rank_, true);
  int bound = -1;
  if (collCommCuDevice(comm, &bound) != collSuccess || bound != device.index()) {
    const std::string why = collGetLastError(comm);
    collCommAbort(comm);
    cudaFailure_ = c10::str("torch_collectives: ", op, " on rank ", rank_, ": the communicator made for ", device.str(),
                            " is bound to ",
                            bound < 0 ? std::string("no CUDA device") : "cuda:" + std::to_string(bound),
                            why.empty() ? "" : " (" + why + ")", "; this group takes no CUDA tensors");
    TORCH_CHECK(false, cudaFailure_);
  }
  cudaDevice_ = device.index();
  cudaComm_ = comm;
}

c10::intrusive_ptr<c10d::Backend>
ProcessGroupCollectives::split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                               const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  checkOpen("split");
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;
  for (int r : ranks)
    TORCH_CHECK(r >= 0 && r < size_, "torch_collectives: split: rank ", r, " is not a rank of this group (0..",
                size_ - 1, ")");
  auto child = c10::make_intrusive<CollOptions>(*options_);
  if (opts) {
    if (auto ours = c10::dynamic_intrusive_pointer_cast<CollOptions>(opts))
      child = c10::make_intrusive<CollOptions>(*ours);
    child->timeout = opts->timeout;
  }
  child->globalRanks.clear();
  for (int r : ranks)
    child->globalRanks.push_back(options_->globalRanks.empty() ? static_cast<uint64_t>(r)
                                                               : options_->globalRanks.at(static_cast<size_t>(r)));
  const int newRank = static_cast<int>(it - ranks.begin());
  return c10::make_intrusive<ProcessGroupCollectives>(store, newRank, static_cast<int>(ranks.size()), child);
}

void ProcessGroupCollectives::registerOnCompletionHook(std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  workInfoHooks_.add(workInfoHookIds_++, std::move(hook), "registerOnCompletionHook");
}

#if COLL_TORCH_COMPLETION_HOOKS
void ProcessGroupCollectives::registerCompletionHook(int64_t hookId, c10d::CompletionHook hook) {
  completionHooks_.add(hookId, std::move(hook), "registerCompletionHook");
}

void ProcessGroupCollectives::unregisterCompletionHook(int64_t hookId) { completionHooks_.remove(hookId); }
#endif

#if COLL_TORCH_ABORT_HOOKS
void ProcessGroupCollectives::registerAbortHook(int64_t hookId, c10d::AbortHook hook) {
  abortHooks_.add(hookId, std::move(hook), "registerAbortHook");
}

void ProcessGroupCollectives::unregisterAbortHook(int64_t hookId) { abortHooks_.remove(hookId); }
#endif

// ---- posting ----

ProcessGroupCollectives::OpInfo ProcessGroupCollectives::info(const char* name, const at::Tensor& t) {
  return info(name, shapeOf(t));
}

ProcessGroupCollectives::OpInfo ProcessGroupCollectives::info(const char* name, std::string what) {
  return OpInfo{name, static_cast<int64_t>(seq_.fetch_add(1)), std::move(what)};
}

namespace {

// The name the profiler records an operation under ("collectives:all_reduce"), as c10d's
// built-in backends name theirs.
const char* profilingTitle(c10d::OpType type) {
  switch (type) {
    case c10d::OpType::BROADCAST: return "collectives:broadcast";
    case c10d::OpType::ALLREDUCE: return "collectives:all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED: return "collectives:all_reduce_coalesced";
    case c10d::OpType::REDUCE: return "collectives:reduce";
    case c10d::OpType::ALLGATHER: return "collectives:all_gather";
    case c10d::OpType::_ALLGATHER_BASE: return "collectives:all_gather_into_tensor";
    case c10d::OpType::ALLGATHER_COALESCED: return "collectives:all_gather_coalesced";
    case c10d::OpType::GATHER: return "collectives:gather";
    case c10d::OpType::SCATTER: return "collectives:scatter";
    case c10d::OpType::REDUCE_SCATTER: return "collectives:reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE: return "collectives:reduce_scatter_tensor";
    case c10d::OpType::ALLTOALL_BASE:
    case c10d::OpType::ALLTOALL: return "collectives:all_to_all";
    case c10d::OpType::SEND: return "collectives:send";
    case c10d::OpType::RECV: return "collectives:recv";
    case c10d::OpType::RECVANYSOURCE: return "collectives:recvAnySource";
    case c10d::OpType::BARRIER: return "collectives:barrier";
    default: return "collectives:coalesced";
  }
}

}  // namespace

c10::intrusive_ptr<CollWork> ProcessGroupCollectives::newWork(c10d::OpType type, const OpInfo& info,
                                                              std::vector<at::Tensor> outputs, int sourceRank) {
  // A copy: outputs is moved into the Work's by-value parameter before its base records these.
  const std::vector<at::Tensor> inputs = info.inputs.empty() ? outputs : info.inputs;
  return c10::make_intrusive<CollWork>(rank_, type, profilingTitle(type), inputs,
                                       static_cast<uint64_t>(std::max<int64_t>(info.seq, 0)), std::move(outputs),
                                       timing_.load(), sourceRank);
}

// The caller's current stream writes a CUDA operation's inputs: an event recorded there
// now is what the worker waits for (null for CPU tensors).
std::shared_ptr<c10::Event> ProcessGroupCollectives::inputsReadyEvent(c10::Device device) {
  if (!device.is_cuda()) return nullptr;
  c10::impl::VirtualGuardImpl impl(device.type());
  auto event = std::make_shared<c10::Event>(device.type());
  event->record(impl.getStream(device));
  return event;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::post(c10d::OpType type, OpInfo info,
                                                             std::vector<at::Tensor> outputs, c10::Device device,
                                                             Body body, Worker* worker, int sourceRank) {
  checkOpen(info.name);
  if (device.is_cuda() && !worker) bindCuda(info.name, device);
  auto work = newWork(type, info, outputs, sourceRank);
  if (coalesced_.open && !worker) {  // a collective inside a coalesced block: runs at endCoalescing
    TORCH_CHECK(!coalesced_.device || *coalesced_.device == device, "torch_collectives: ", info.name,
                ": a coalesced block holds tensors of one device; this one is on ", device.str(), ", the block's on ",
                coalesced_.device->str());
    coalesced_.device = device;
    addSpans(info.inputs, coalesced_.ops.size(), coalesced_.spans);
    addSpans(outputs, coalesced_.ops.size(), coalesced_.spans);
    work->setInOpenBlock(true);
    coalesced_.ops.emplace_back(work, std::move(body));
    coalesced_.outputs.insert(coalesced_.outputs.end(), outputs.begin(), outputs.end());
    coalesced_.what += (coalesced_.what.empty() ? "" : ", ") + std::string(info.name) + " #" + std::to_string(info.seq);
    return work;
  }
  if (coalesced_.open) coalesced_.transfers.push_back(work);
  auto inputsReady = inputsReadyEvent(device);
  Worker* on = worker ? worker : worker_.get();
  // A CPU operation of the group's worker may run on the thread that waits for it. Not a
  // transfer: a peer worker's first one makes its communicator, on the worker's thread.
  const bool leave = !worker && !inputsReady && on->leaves();
  Worker::Ticket ticket = on->post(
      [this, work, device, inputsReady, body = std::move(body)] {
    std::exception_ptr error;
    work->markStarted();
    try {
      runOn(device, inputsReady, [&] {
        Finish finish = body();
        if (finish) finish();
      });
    } catch (...) {
      error = std::current_exception();
    }
    completed(work, error);
      },
      leave);
  if (leave) work->setTicket(std::move(ticket));
  return work;
}

namespace {

// A steady-clock time on the clock of To (WorkInfo's clock: steady in newer torch, the
// system clock in 2.4).
template <typename To>
To onClockOf(CollWork::Clock::time_point t) {
  if constexpr (std::is_same_v<To, CollWork::Clock::time_point>) {
    return t;
  } else {
    return std::chrono::time_point_cast<typename To::duration>(To::clock::now() - (CollWork::Clock::now() - t));
  }
}

}  // namespace

// Completes work and tells the hooks: the abort hooks before a failure reaches the Work,
// the completion hooks after a success.
void ProcessGroupCollectives::completed(const c10::intrusive_ptr<CollWork>& work, std::exception_ptr error) {
#if COLL_TORCH_ABORT_HOOKS
  if (error) abortHooks_.fire("an abort");
#endif
  work->complete(error);
#if COLL_TORCH_COMPLETION_HOOKS
  if (!error)
    completionHooks_.fire("a completion", c10d::CompletionHookArgs{work->getCompletionKey(), work->timedDuration()});
#endif
  if (workInfoHooks_.empty()) return;
  using TimePoint = decltype(c10d::WorkInfo::timeStarted);
  auto info = std::make_shared<c10d::WorkInfo>(work->opType(), work->getSequencenumber(),
                                               onClockOf<TimePoint>(work->startedAt()),
                                               onClockOf<TimePoint>(work->finishedAt()),
                                               std::chrono::duration<float>(work->finishedAt() - work->startedAt()));
  workInfoHooks_.fire("a completion", info);
}

// An operation, on the worker. CUDA tensors: on the tensors' device, after the event
// recorded on the caller's stream, on the legacy default stream (the library is called
// with no stream, torch's copies here use the same), and complete only once the GPU is:
// a Work that says it is done means its outputs are.
void ProcessGroupCollectives::runOn(c10::Device device, const std::shared_ptr<c10::Event>& inputsReady,
                                    const std::function<void()>& f) {
  at::NoGradGuard noGrad;
  if (!inputsReady) {
    f();
    return;
  }
  c10::DeviceGuard deviceGuard(device);
  c10::impl::VirtualGuardImpl impl(device.type());
  const c10::Stream stream = impl.getDefaultStream(device);
  c10::StreamGuard streamGuard(stream);
  inputsReady->block(stream);
  f();
  stream.synchronize();
}

// ---- coalesced blocks ----

void ProcessGroupCollectives::startCoalescing() {
  checkOpen("startCoalescing");
  TORCH_CHECK(!coalesced_.open, "torch_collectives: startCoalescing on rank ", rank_,
              ": a coalesced block is already open (endCoalescing first)");
  coalesced_ = CoalescedBatch{};
  coalesced_.open = true;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::endCoalescing() {
  TORCH_CHECK(coalesced_.open, "torch_collectives: endCoalescing on rank ", rank_, " without startCoalescing");
  CoalescedBatch batch = std::move(coalesced_);
  coalesced_ = CoalescedBatch{};
  const c10::Device device = batch.device.value_or(c10::Device(c10::kCPU));
  OpInfo op{"coalesced block", -1, batch.what.empty() ? "transfers only" : batch.what};
  if (!batch.ops.empty()) op.seq = static_cast<int64_t>(batch.ops.front().first->getSequencenumber());
  auto work = newWork(c10d::OpType::COALESCED, op, batch.outputs);
  auto inputsReady = inputsReadyEvent(device);
  const bool leave = !inputsReady && worker_->leaves();  // as in post()
  std::vector<c10::intrusive_ptr<CollWork>> members;     // a wait for one of them waits for the block
  for (auto& [w, body] : batch.ops) members.push_back(w);
  Worker::Ticket ticket = worker_->post(
      [this, work, device, inputsReady, op, batch = std::move(batch)] {
    std::exception_ptr error;
    work->markStarted();
    for (auto& [w, body] : batch.ops) w->markStarted();
    try {
      std::vector<Body> bodies;
      for (auto& [w, body] : batch.ops) bodies.push_back(body);
      const bool inOrder = batch.inOrder || partsOverlap(batch.spans);
      if (!bodies.empty())
        runOn(device, inputsReady, [&] {
          if (Finish finish = runGroup(bodies, op, device, inOrder)) finish();
        });
    } catch (...) {
      error = std::current_exception();
    }
    for (auto& [w, body] : batch.ops) completed(w, error);
    for (const auto& t : batch.transfers) {  // on their peer workers: the batch is done when they are
      try {
        t->wait(std::chrono::milliseconds(0));
      } catch (...) {
        if (!error) error = std::current_exception();
      }
    }
    completed(work, error);
      },
      leave);
  if (leave) {
    for (auto& w : members) w->setTicket(ticket);
    work->setTicket(std::move(ticket));
  }
  for (auto& w : members) w->setInOpenBlock(false);
  return work;
}

// Inside a library group the calls only queue; everything runs at the outermost
// collGroupEnd, so the Finishes run after it: a coalesced op's group nested in a
// coalesced block's returns them to the block's (run at its own end, they would copy
// results that are not there yet, then free buffers the block still writes to). A body
// that throws (the library refused its call, or torch failed, say to allocate a copy)
// still closes the group, which then runs nothing, before its error is thrown.
ProcessGroupCollectives::Finish ProcessGroupCollectives::runGroup(const std::vector<Body>& bodies, const OpInfo& block,
                                                                  c10::Device device, bool inOrder) {
  if (inOrder && tlsOpenGroups == 0) {
    for (const Body& body : bodies)
      if (Finish finish = body()) finish();
    return nullptr;
  }
  collComm_t comm = commOf(device);
  check(collGroupStart(), block, comm);
  ++tlsOpenGroups;
  std::vector<Finish> finishes;
  std::exception_ptr queueError;
  for (const Body& body : bodies) {
    try {
      finishes.push_back(body());
    } catch (...) {
      queueError = std::current_exception();
      break;
    }
  }
  --tlsOpenGroups;
  if (queueError) {
    // Nothing of the group runs, as where the library refuses a call in it: the outermost
    // group drops what was queued (collGroupSimulateEnd launches nothing), so ranks that
    // failed alike go on together with their next operation.
    collSimInfo_t dropped = COLL_SIM_INFO_INITIALIZER;
    if (tlsOpenGroups == 0) collGroupSimulateEnd(&dropped);
    else collGroupEnd();
    std::rethrow_exception(queueError);
  }
  const collResult_t end = collGroupEnd();
  check(end, block, comm);
  return [finishes = std::move(finishes)] {
    for (const Finish& f : finishes)
      if (f) f();
  };
}

// Whether a coalesced list runs one by one (its tensors share bytes: runGroup); inside an
// open block, so does the block, which holds the list's group.
bool ProcessGroupCollectives::listInOrder(const std::vector<Span>& spans) {
  const bool inOrder = partsOverlap(spans);
  if (coalesced_.open) coalesced_.inOrder = coalesced_.inOrder || inOrder;
  return inOrder;
}

// ---- errors ----

void ProcessGroupCollectives::check(collResult_t r, const OpInfo& op, collComm_t comm) {
  if (r == collSuccess) return;
  std::ostringstream s;
  s << "torch_collectives: " << op.name;
  if (op.seq >= 0) s << " #" << op.seq;
  s << " (" << op.what << ") failed on rank " << rank_ << " of " << size_ << ": " << collGetErrorString(r);
  if (r == collTimeout) s << " (group timeout " << timeoutS_ << " s)";
  s << ": " << collGetLastError(comm);
  const bool wholeGroup = comm == comm_ || comm == cudaComm_.load();
  if (wholeGroup && (r == collTimeout || r == collRemoteError)) s << ranksThatNeverArrived(op);
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
  } catch (const c10::Error& e) {  // without torch's C++ backtrace
    return std::string("; which ranks reached it is unknown (the store failed: ") + e.what_without_backtrace() + ")";
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

// Issues call with r's library op: a PreMulSum op made for this call (freed by the
// returned Finish, once the call is complete), or the built-in one; throws its error.
ProcessGroupCollectives::Finish ProcessGroupCollectives::runReduction(
    const Reduction& r, const OpInfo& op, collComm_t comm, const std::function<collResult_t(collRedOp_t)>& call) {
  collRedOp_t redOp = r.op;
  if (r.preMulSum) {
    char scalar[8];
    preMulSumScalar(r, scalar);
    check(collRedOpCreatePreMulSum(&redOp, scalar, r.type, collScalarHostImmediate, comm), op, comm);
  }
  const collResult_t res = call(redOp);
  Finish destroy;
  if (r.preMulSum) destroy = [redOp, comm] { collRedOpDestroy(redOp, comm); };
  if (res != collSuccess && destroy) destroy();
  check(res, op, comm);
  return destroy;
}

ProcessGroupCollectives::Finish ProcessGroupCollectives::reduceTensor(at::Tensor t, const Reduction& r, int root,
                                                                      const OpInfo& op) {
  at::Tensor buf = dense(t);
  if (r.path == Path::kBitwise) {
    at::Tensor all = buf.new_empty({size_, buf.numel()});
    allgatherBytes(buf.data_ptr(), all.data_ptr(), buf.nbytes(), buf.device(), op);
    return [this, t, buf, all, r, root]() mutable {
      if (root < 0 || root == rank_) buf.copy_(combineBitwise(all, r.bitwise).view_as(buf));
      writeBack(buf, t);
    };
  }
  at::Tensor low = lowered(buf, r);
  const size_t count = static_cast<size_t>(low.numel());
  collComm_t comm = commOf(buf.device());
  Finish destroy = runReduction(r, op, comm, [&](collRedOp_t redOp) {
    return root < 0 ? collAllReduce(low.data_ptr(), low.data_ptr(), count, r.type, redOp, comm, nullptr)
                    : collReduce(low.data_ptr(), low.data_ptr(), count, r.type, redOp, root, comm, nullptr);
  });
  return [t, buf, low, r, destroy]() mutable {
    if (destroy) destroy();
    raise(low, buf, r);
    writeBack(buf, t);
  };
}

ProcessGroupCollectives::Finish ProcessGroupCollectives::reduceScatterFlat(const at::Tensor& in, at::Tensor out,
                                                                           const Reduction& r, const OpInfo& op) {
  at::Tensor src = dense(in), dst = dense(out);
  if (r.path == Path::kBitwise) {
    at::Tensor all = src.new_empty({size_, src.numel()});
    allgatherBytes(src.data_ptr(), all.data_ptr(), src.nbytes(), src.device(), op);
    return [this, out, dst, all, r]() mutable {
      at::Tensor mine = all.narrow(1, rank_ * dst.numel(), dst.numel());
      dst.copy_(combineBitwise(mine, r.bitwise).view_as(dst));
      writeBack(dst, out);
    };
  }
  at::Tensor lowIn = lowered(src, r), lowOut = lowered(dst, r);
  collComm_t comm = commOf(src.device());
  Finish destroy = runReduction(r, op, comm, [&](collRedOp_t redOp) {
    return collReduceScatter(lowIn.data_ptr(), lowOut.data_ptr(), static_cast<size_t>(lowOut.numel()), r.type, redOp,
                             comm, nullptr);
  });
  return [out, dst, src, lowIn, lowOut, r, destroy]() mutable {
    if (destroy) destroy();
    raise(lowOut, dst, r);
    writeBack(dst, out);
  };
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allreduce(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceOptions& opts) {
  at::Tensor t = single("allreduce", tensors);
  Reduction r = planReduction("allreduce", t.scalar_type(), opts.reduceOp);
  OpInfo op = info("allreduce", t);
  return post(c10d::OpType::ALLREDUCE, op, {t}, t.device(), [this, t, r, op] { return reduceTensor(t, r, -1, op); });
}

// One library group of one reduction per tensor: a single launch for the whole list;
// small CPU tensors of one dtype, outside a coalesced block, as one reduction of their
// concatenation (fusible).
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<Reduction> plans;
  for (const at::Tensor& t : tensors) {
    checkTensor("allreduce_coalesced", t);
    TORCH_CHECK(t.device() == tensors[0].device(), "torch_collectives: allreduce_coalesced: tensors on ",
                tensors[0].device().str(), " and ", t.device().str(), "; one device per call");
    plans.push_back(planReduction("allreduce_coalesced", t.scalar_type(), opts.reduceOp));
  }
  OpInfo op = info("allreduce_coalesced", std::to_string(tensors.size()) + " tensors");
  // Not inside an open coalesced block: the copy in would read the tensors before the
  // block's earlier operations ran, and the copy out overwrite what its later ones wrote.
  if (!coalesced_.open && fusible(tensors))
    return post(c10d::OpType::ALLREDUCE_COALESCED, op, tensors, deviceOf(tensors), [this, tensors, r = plans[0], op] {
      int64_t count = 0;
      for (const at::Tensor& t : tensors) count += t.numel();
      at::Tensor flat = at::empty({count}, tensors[0].options());
      packInto(tensors, flat);
      Finish reduced = reduceTensor(flat, r, -1, op);
      return [tensors, flat, reduced] {
        if (reduced) reduced();
        unpackFrom(flat, tensors);
      };
    });
  const bool inOrder = listInOrder(spansOfEach(tensors));
  return post(c10d::OpType::ALLREDUCE_COALESCED, op, tensors, deviceOf(tensors), [this, tensors, plans, op, inOrder] {
    std::vector<Body> bodies;
    for (size_t i = 0; i < tensors.size(); ++i)
      bodies.push_back([this, t = tensors[i], r = plans[i], op] { return reduceTensor(t, r, -1, op); });
    return runGroup(bodies, op, deviceOf(tensors), inOrder);
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
              [this, t, r, root, op] { return reduceTensor(t, r, root, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                                       const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single("reduce_scatter", outputs);
  std::vector<at::Tensor> ins = rankList("reduce_scatter", "input", inputs, out, size_);
  Reduction r = planReduction("reduce_scatter", out.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce_scatter", out);
  op.inputs = ins;
  return post(c10d::OpType::REDUCE_SCATTER, op, {out}, out.device(), [this, out, ins, r, op] {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : ins) flat.push_back(t.reshape({-1}));
    return reduceScatterFlat(at::cat(flat), out, r, op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                             const c10d::ReduceScatterOptions& opts) {
  checkWhole("reduce_scatter_tensor", "input", input, output, size_);
  Reduction r = planReduction("reduce_scatter_tensor", output.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce_scatter_tensor", output);
  op.inputs = {input};
  at::Tensor out = output, in = input;
  return post(c10d::OpType::_REDUCE_SCATTER_BASE, op, {out}, out.device(),
              [this, out, in, r, op] { return reduceScatterFlat(in, out, r, op); });
}

// One library group of one reduce-scatter per (output, input) pair (FSDP's gradients).
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "torch_collectives: reduce_scatter_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  std::vector<Reduction> plans;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkWhole("reduce_scatter_tensor_coalesced", "input", inputs[i], outputs[i], size_);
    TORCH_CHECK(inputs[i].device() == inputs[0].device(),
                "torch_collectives: reduce_scatter_tensor_coalesced: ", "tensors on ", inputs[0].device().str(),
                " and ", inputs[i].device().str(), "; one device per call");
    plans.push_back(planReduction("reduce_scatter_tensor_coalesced", outputs[i].scalar_type(), opts.reduceOp));
  }
  OpInfo op = info("reduce_scatter_tensor_coalesced", std::to_string(inputs.size()) + " tensors");
  op.inputs = inputs;
  const bool inOrder = listInOrder(spansOfEach(inputs, outputs));
  return post(c10d::OpType::COALESCED, op, outputs, deviceOf(inputs), [this, outputs, inputs, plans, op, inOrder] {
    std::vector<Body> bodies;
    for (size_t i = 0; i < inputs.size(); ++i)
      bodies.push_back([this, out = outputs[i], in = inputs[i], r = plans[i], op] {
        return reduceScatterFlat(in, out, r, op);
      });
    return runGroup(bodies, op, deviceOf(inputs), inOrder);
  });
}

// ---- copies (every dtype, as bytes) ----

void ProcessGroupCollectives::allgatherBytes(const void* in, void* out, size_t bytes, c10::Device device,
                                             const OpInfo& op) {
  collComm_t comm = commOf(device);
  check(collAllGather(in, out, bytes, collUint8, comm, nullptr), op, comm);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::broadcast(std::vector<at::Tensor>& tensors,
                                                                  const c10d::BroadcastOptions& opts) {
  at::Tensor t = single("broadcast", tensors);
  checkRoot("broadcast", opts.rootRank, size_);
  OpInfo op = info("broadcast", t);
  const int root = static_cast<int>(opts.rootRank);
  return post(c10d::OpType::BROADCAST, op, {t}, t.device(), [this, t, root, op]() -> Finish {
    at::Tensor buf = dense(t);
    collComm_t comm = commOf(buf.device());
    check(collBroadcast(buf.data_ptr(), buf.data_ptr(), buf.nbytes(), collUint8, root, comm, nullptr), op, comm);
    return [t, buf]() mutable { writeBack(buf, t); };
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                  std::vector<at::Tensor>& inputs,
                                                                  const c10d::AllgatherOptions&) {
  at::Tensor in = single("allgather", inputs);
  std::vector<at::Tensor> outs = rankList("allgather", "output", outputs, in, size_);
  OpInfo op = info("allgather", in);
  op.inputs = {in};
  return post(c10d::OpType::ALLGATHER, op, outs, in.device(), [this, in, outs, op]() -> Finish {
    at::Tensor src = dense(in);
    at::Tensor all = src.new_empty({size_, src.numel()});
    allgatherBytes(src.data_ptr(), all.data_ptr(), src.nbytes(), src.device(), op);
    return [this, src, all, outs]() mutable {
      for (int r = 0; r < size_; ++r) outs[r].copy_(all[r].view(outs[r].sizes()));
    };
  });
}

std::function<void()> allgatherInto(at::Tensor out, at::Tensor in,
                                    const std::function<void(const at::Tensor&, const at::Tensor&)>& gather) {
  at::Tensor src = dense(in), dst = dense(out);
  gather(src, dst);
  return [out, src, dst]() mutable { writeBack(dst, out); };
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::AllgatherOptions&) {
  checkWhole("all_gather_into_tensor", "output", output, input, size_);
  OpInfo op = info("all_gather_into_tensor", input);
  op.inputs = {input};
  at::Tensor out = output, in = input;
  return post(c10d::OpType::_ALLGATHER_BASE, op, {out}, in.device(), [this, out, in, op] {
    return allgatherInto(out, in, [&](const at::Tensor& src, const at::Tensor& dst) {
      allgatherBytes(src.data_ptr(), dst.data_ptr(), src.nbytes(), src.device(), op);
    });
  });
}

// One library group of one allgather per (output, input) pair (FSDP's parameters).
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(), "torch_collectives: allgather_into_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkWhole("allgather_into_tensor_coalesced", "output", outputs[i], inputs[i], size_);
    TORCH_CHECK(inputs[i].device() == inputs[0].device(),
                "torch_collectives: allgather_into_tensor_coalesced: ", "tensors on ", inputs[0].device().str(),
                " and ", inputs[i].device().str(), "; one device per call");
  }
  OpInfo op = info("allgather_into_tensor_coalesced", std::to_string(inputs.size()) + " tensors");
  op.inputs = inputs;
  const bool inOrder = listInOrder(spansOfEach(inputs, outputs));
  return post(c10d::OpType::COALESCED, op, outputs, deviceOf(inputs), [this, outputs, inputs, op, inOrder] {
    std::vector<Body> bodies;
    for (size_t i = 0; i < inputs.size(); ++i)
      bodies.push_back([this, out = outputs[i], in = inputs[i], op] {
        return allgatherInto(out, in, [&](const at::Tensor& src, const at::Tensor& dst) {
          allgatherBytes(src.data_ptr(), dst.data_ptr(), src.nbytes(), src.device(), op);
        });
      });
    return runGroup(bodies, op, deviceOf(inputs), inOrder);
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
  OpInfo op = info("allgather_coalesced", std::to_string(inputs.size()) + " tensors");
  op.inputs = inputs;
  std::vector<at::Tensor> flatOuts;
  for (const auto& list : outputLists) flatOuts.insert(flatOuts.end(), list.begin(), list.end());
  return post(c10d::OpType::ALLGATHER_COALESCED, op, flatOuts, deviceOf(inputs),
              [this, outputLists, inputs, op]() -> Finish {
                size_t total = 0;
                for (const at::Tensor& t : inputs) total += t.nbytes();
                auto mine = std::make_shared<std::vector<uint8_t>>(total);
                auto all = std::make_shared<std::vector<uint8_t>>(total * static_cast<size_t>(size_));
                size_t off = 0;
                for (const at::Tensor& t : inputs) {
                  at::Tensor c = dense(t);
                  std::memcpy(mine->data() + off, c.data_ptr(), c.nbytes());
                  off += c.nbytes();
                }
                allgatherBytes(mine->data(), all->data(), total, c10::Device(c10::kCPU), op);
                return [this, outputLists, mine, all, total]() mutable {
                  for (int r = 0; r < size_; ++r) {
                    size_t at = total * static_cast<size_t>(r);
                    for (at::Tensor& t : outputLists[static_cast<size_t>(r)]) {
                      at::Tensor c = dense(t);
                      std::memcpy(c.data_ptr(), all->data() + at, c.nbytes());
                      at += c.nbytes();
                      writeBack(c, t);
                    }
                  }
                };
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
  op.inputs = {in};
  return post(c10d::OpType::GATHER, op, outs, in.device(), [this, in, outs, root, op]() -> Finish {
    at::Tensor src = dense(in);
    at::Tensor all = rank_ == root ? src.new_empty({size_, src.numel()}) : at::Tensor();
    collComm_t comm = commOf(src.device());
    check(collGather(src.data_ptr(), all.defined() ? all.data_ptr() : nullptr, src.nbytes(), collUint8, root, comm,
                     nullptr),
          op, comm);
    return [src, all, outs]() mutable {
      for (size_t r = 0; r < outs.size(); ++r) outs[r].copy_(all[static_cast<int64_t>(r)].view(outs[r].sizes()));
    };
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
  op.inputs = ins;
  return post(c10d::OpType::SCATTER, op, {out}, out.device(), [this, out, ins, root, op]() -> Finish {
    at::Tensor dst = dense(out);
    at::Tensor all;
    if (!ins.empty()) {
      std::vector<at::Tensor> flat;
      for (const at::Tensor& t : ins) flat.push_back(t.reshape({-1}));
      all = at::cat(flat);
    }
    collComm_t comm = commOf(dst.device());
    check(collScatter(all.defined() ? all.data_ptr() : nullptr, dst.data_ptr(), dst.nbytes(), collUint8, root, comm,
                      nullptr),
          op, comm);
    return [out, dst, all]() mutable { writeBack(dst, out); };
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
  collComm_t comm = commOf(device);
  check(collGroupStart(), op, comm);
  collResult_t first = collSuccess;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    collResult_t r = collSuccess;
    if (sendBytes[p]) r = collSend(sendPtr[p], sendBytes[p], collUint8, p, comm, nullptr);
    if (r == collSuccess && recvBytes[p]) r = collRecv(recvPtr[p], recvBytes[p], collUint8, p, comm, nullptr);
    if (first == collSuccess) first = r;
  }
  collResult_t end = collGroupEnd();
  check(first != collSuccess ? first : end, op, comm);
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
  op.inputs = {input};
  at::Tensor out = output, in = input;
  return post(c10d::OpType::ALLTOALL_BASE, op, {out}, in.device(),
              [this, out, in, inSplit, outSplit, inRows, outRows, op]() -> Finish {
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
                return [out, src, dst]() mutable { writeBack(dst, out); };
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
    TORCH_CHECK(inputs[p].device() == inputs[0].device() && outputs[p].device() == inputs[0].device(),
                "torch_collectives: all_to_all: input ", p, " is on ", inputs[p].device().str(), " and output ", p,
                " on ", outputs[p].device().str(), ", input 0 on ", inputs[0].device().str(), "; one device per call");
    TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() &&
                    outputs[p].scalar_type() == inputs[0].scalar_type(),
                "torch_collectives: all_to_all: every tensor must have one dtype");
  }
  OpInfo op = info("all_to_all", inputs[0]);
  op.inputs = inputs;
  return post(c10d::OpType::ALLTOALL, op, outputs, deviceOf(inputs), [this, outputs, inputs, op]() -> Finish {
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
    return [this, outputs, src, dst]() mutable {
      for (int p = 0; p < size_; ++p) writeBack(dst[p], outputs[p]);
    };
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::barrier(const c10d::BarrierOptions&) {
  OpInfo op = info("barrier", "no data");
  return post(c10d::OpType::BARRIER, op, {}, c10::Device(c10::kCPU), [this, op]() -> Finish {
    auto token = std::make_shared<uint8_t>(0);
    check(collAllReduce(token.get(), token.get(), 1, collUint8, collMax, comm_, nullptr), op, comm_);
    return [token] {};
  });
}

// Rank 0 waits for every other rank's arrival key; the others wait for rank 0's release.
// Keys are numbered by this group's monitored barriers, the same count on every rank.
void ProcessGroupCollectives::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  checkOpen("monitored_barrier");
  const auto limit = opts.timeout.count() >= 0 ? opts.timeout : options_->timeout;  // unset: negative
  const double limitS = static_cast<double>(limit.count()) / 1000.0;
  const std::string base = keyPrefix_ + "monitored_barrier/" + std::to_string(monitoredBarriers_++) + "/";
  if (rank_ != 0) {
    store_->set(base + std::to_string(rank_), std::vector<uint8_t>{1});
    awaitKey(base + "release", limitS);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) {
    const std::string key = base + std::to_string(r);
    while (!store_->check({key}) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (store_->check({key})) continue;
    missing.push_back(r);
    if (!waitAllRanks) break;
  }
  if (missing.empty()) {
    store_->set(base + "release", std::vector<uint8_t>{1});
    return;
  }
  std::ostringstream s;
  s << "Rank 0 timed out in monitoredBarrier after " << limit.count()
    << " ms: " << (missing.size() == 1 ? "Rank " : "Ranks ");
  for (size_t i = 0; i < missing.size(); ++i) s << (i ? ", " : "") << missing[i];
  s << " failed to pass monitoredBarrier in " << limit.count() << " ms";
  TORCH_CHECK(false, "torch_collectives: ", s.str());
}

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
    collComm_t made = makeComm(keyPrefix_ + "p2p/" + (cuda ? "cuda/" : "") + std::to_string(src) + "->" +
                                   std::to_string(dst),
                               2, sending ? 0 : 1, false);
    int bound = -1;
    if (cuda && (collCommCuDevice(made, &bound) != collSuccess || bound != t.device().index())) {
      collCommAbort(made);
      TORCH_CHECK(false, "torch_collectives: ", op.name, " on rank ", rank_, ": the communicator made for ",
                  t.device().str(), " with rank ", peer, " is bound to ",
                  bound < 0 ? std::string("no CUDA device") : "cuda:" + std::to_string(bound));
    }
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

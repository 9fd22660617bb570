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

// Library groups runGroup has open on this thread.
thread_local int tlsOpenGroups = 0;

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
  // The group's timeout: each operation's, and the rendezvous's (up to COLL_BOOTSTRAP_TIMEOUT_S).
  config.timeoutMs = static_cast<int>(std::clamp(timeoutS_.load(), 0.0, 2e6) * 1000);
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
  return comm;
}

// A communicator for CUDA tensors on device, the current one: null and why where the
// library could not bind it there (the half-made one aborted).
std::pair<collComm_t, std::string> ProcessGroupCollectives::makeCudaComm(const std::string& key, int nranks, int rank,
                                                                         bool withConfig, c10::Device device) {
  collComm_t comm = makeComm(key, nranks, rank, withConfig);
  int bound = -1;
  if (collCommCuDevice(comm, &bound) == collSuccess && bound == device.index()) return {comm, ""};
  const std::string why = collGetLastError(comm);
  collCommAbort(comm);
  return {nullptr, c10::str("is bound to ", bound < 0 ? std::string("no CUDA device") : "cuda:" + std::to_string(bound),
                            why.empty() ? "" : " (" + why + ")")};
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
  auto [comm, why] = makeCudaComm(keyPrefix_ + "cuda/unique_id", size_, rank_, true, device);
  if (!comm) {
    cudaFailure_ = c10::str("torch_collectives: ", op, " on rank ", rank_, ": the communicator made for ", device.str(),
                            " ", why, "; this group takes no CUDA tensors");
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
  // A list that must run in order marks its block so (listInOrder): never inside a group.
  TORCH_CHECK(!inOrder || tlsOpenGroups == 0, "torch_collectives: ", block.name,
              ": internal error: operations that share bytes were queued into an open library group");
  if (inOrder) {
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

}  // namespace torch_collectives

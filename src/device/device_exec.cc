#include "device/device_exec.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "algorithms/algorithms.h"
#include "collectives/config.h"
#include "base/datatype.h"
#include "base/log.h"
#include "base/param.h"
#include "base/wait.h"
#include "device/device_lane.h"
#include "device/device_slice.h"
#include "device/device_comm.h"
#include "device/proxy.h"
#include "transport/transport.h"
#if COLL_HAVE_CUDA
#include "cuda/gpu.h"
#include "device/device_kernel.h"
#include "kernels/device_reduce.h"
#endif

namespace coll {

static_assert(kDeviceMaxDirect == kMaxDirectRanks, "a direct operation's ranks must fit a lane's address table");
static_assert(kDeviceFifoSlots == kFifoSlots, "device lanes and connectors must agree on FIFO depth");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "FIFO counters are read as plain words");

namespace {

// ---- Host emulation backend: one thread runs a lane ------------------------------------

class HostLaneBackend {
 public:
  bool leader() const { return true; }
  void sync() {}
  DeviceSliceCtl& ctl() { return ctl_; }
  DeviceAddr* table() { return table_; }
  unsigned tid() const { return 0; }
  unsigned threads() const { return 1; }
  uint64_t* scratch() { return scratch_; }
  uint32_t load(const uint32_t* p, bool = false) const {
    return std::atomic_ref<uint32_t>(*const_cast<uint32_t*>(p)).load(std::memory_order_acquire);
  }
  void store(uint32_t* p, uint32_t v, bool = false) {  // progress: the next wait spins first again
    waits_ = 0;
    std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
  }
  void note(uint32_t* p, uint32_t v) const { std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_relaxed); }
  void fence(bool = false) const { std::atomic_thread_fence(std::memory_order_release); }
  // A release with the fence before it. The store is a release store as well (on x86 the
  // same instruction as a plain one): ThreadSanitizer does not model fences, and the
  // FIFO data this publishes would otherwise look unordered to it.
  void post(uint32_t* p, uint32_t v) {
    waits_ = 0;
    std::atomic_ref<uint32_t>(*p).store(v, std::memory_order_release);
  }
  uint64_t now() const { return wallNs(); }
  // Spin, then yield, then sleep briefly: lanes poll (kernels wake nobody), and the
  // emulation may run many lanes on few cores.
  void pause() {
    ++waits_;
    if (waits_ < 64) cpuRelax();
    else if (waits_ < 2048) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  // The kernel's own slice code (device/device_slice.h), its block's threads taken one
  // after another (3 of them: the split over threads is exercised; the GPU runs 512).
  static constexpr unsigned kSliceThreads = 3;
  void slice(const DeviceStep& s, const char* in, const char* src, char* dst, char* out, uint64_t len, int nranks) {
    waits_ = 0;
    for (unsigned t = 0; t < kSliceThreads; ++t) deviceSlice(t, kSliceThreads, s, in, src, dst, out, len, nranks);
  }
  bool sliceDirect(const DeviceStep& s, const DeviceAddr* t, uint64_t at, uint64_t len, int nranks) {
    waits_ = 0;
    bool took = true;
    for (unsigned k = 0; k < kSliceThreads && took; ++k)
      took = deviceSliceDirect(k, kSliceThreads, s, t, at, len, nranks);
    return took;
  }

 private:
  DeviceSliceCtl ctl_{};
  DeviceAddr table_[kDeviceMaxDirect]{};
  uint64_t scratch_[kDeviceMaxConns]{};
  uint32_t waits_ = 0;
};

// The emulated GPU's block scheduler (COLL_DEVICE_EMULATE_BLOCKS): a lane waits for a
// free block before it runs, as a block beyond a GPU's resident ones waits for one to end.
class EmulatedThreadBlocks {
 public:
  static EmulatedThreadBlocks& instance() {
    static EmulatedThreadBlocks b;
    return b;
  }
  void acquire(int64_t capacity) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return capacity <= 0 || running_ < capacity; });
    ++running_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t running_ = 0;
};

class EmulatedCompletion : public Completion {
 public:
  bool done(Status*) override { return finished.load(std::memory_order_acquire); }
  std::atomic<bool> finished{false};
};

#if COLL_HAVE_CUDA
// A launch's kernel, run again while its lanes yield (device_lane.h kDeviceYielded): the proxy
// asks done() and relaunches on the launch's stream, which holds nothing after it (a
// launch whose lanes yield returns only when done). One completion may serve the parts
// of several communicators, each with its proxy: one of them relaunches.
class CudaCompletion : public Completion {
 public:
  CudaCompletion(DeviceLaunch launch, int device, std::vector<DeviceComm*> comms)
      : launch_(std::move(launch)), device_(device), comms_(std::move(comms)) {}
  bool done(Status* err) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) {  // a rerun that could not be queued: every proxy asking learns it
      *err = failed_;
      return true;
    }
    if (!launch_.done.done(err, "device executor kernel")) return false;
    if (!err->ok() || !deviceResumes(launch_.results, launch_.nlanes)) return true;
    Status st = gpu::setDevice(device_);
    if (st.ok()) st = relaunchLanes(launch_);
    if (!st.ok()) {
      failed_ = st.prefix("running a device launch again after its lanes yielded: ");
      *err = failed_;
      return true;
    }
    runs.fetch_add(1, std::memory_order_relaxed);
    for (DeviceComm* c : comms_) c->reruns.fetch_add(1, std::memory_order_relaxed);
    return false;
  }

 private:
  std::mutex mu_;
  DeviceLaunch launch_;
  int device_;
  std::vector<DeviceComm*> comms_;  // of the parts, whose reruns it counts
  Status failed_;
};
#endif

// ---- Lowering --------------------------------------------------------------------------

// Maps an address inside a FIFO (control block + slots, starting at base) to the address
// the executor uses.
using MapFn = std::function<Result<char*>(void* base, size_t bytes, const void* p)>;

struct LoweredPart {
  std::shared_ptr<const DevicePlan> plan;
  std::shared_ptr<PendingLaunch> pending;
};

// The address as it is: emulation, and FIFOs already in device memory (p2p).
Result<char*> identityMap(void*, size_t, const void* p) { return const_cast<char*>(static_cast<const char*>(p)); }

Result<DeviceConn> lowerConn(const FifoView& f, bool isSend, int peer, bool onDevice, bool slotsOnDevice, bool sameGpu,
                             const MapFn& map) {
  // p2p FIFOs are device memory already; host-memory ones are mapped for the executor,
  // except net slots in GPU memory (GPUDirect RDMA), which it uses as they are.
  static const MapFn identity(identityMap);
  const MapFn& m = onDevice ? identity : map;
  void* base = f.ctrl;
  const size_t bytes = fifoBytes(f.slotBytes);
  DeviceConn d{};
  COLL_ASSIGN(char* tail, m(base, bytes, &f.ctrl->tail));
  COLL_ASSIGN(char* head, m(base, bytes, &f.ctrl->head));
  COLL_ASSIGN(char* sizes, m(base, bytes, f.ctrl->sizes));
  COLL_ASSIGN(char* data, slotsOnDevice ? identity(base, bytes, f.data) : m(base, bytes, f.data));
  d.tail = reinterpret_cast<uint32_t*>(tail);
  d.head = reinterpret_cast<uint32_t*>(head);
  d.sizes = reinterpret_cast<uint32_t*>(sizes);
  d.data = data;
  d.slotBytes = f.slotBytes;
  d.isSend = isSend ? 1 : 0;
  d.sameGpu = sameGpu ? 1 : 0;
  d.peer = peer;
  return d;
}

// The connectors of a lane so far, in the order of its conns (no allocation: a launch
// lowers a lane per channel, 32 for the smallest operation).
struct ConnKeys {
  std::array<const void*, kDeviceMaxConns> key{};
  size_t n = 0;
};

// Index of connector `conn` in the lane, adding it on first use.
template <typename Conn>
Result<int8_t> connIndex(DeviceLane& lane, ConnKeys& keys, Conn* conn, bool isSend, const MapFn& map, DevicePlan& plan,
                         const Program& p) {
  for (size_t i = 0; i < keys.n; ++i)
    if (keys.key[i] == conn) return static_cast<int8_t>(i);
  if (keys.n >= static_cast<size_t>(kDeviceMaxConns))
    return internalError("rank " + std::to_string(p.rank) + " " + p.lane + " uses more than " +
                         std::to_string(kDeviceMaxConns) + " connectors, the device executor's limit");
  const FifoView* f = conn->fifo();
  COLL_ASSIGN(lane.conns[keys.n], lowerConn(*f, isSend, conn->peer(), conn->fifoInDeviceMemory(),
                                            conn->slotsInDeviceMemory(), conn->sameGpu(), map));
  if (conn->needsProgress()) {
    if constexpr (std::is_same_v<Conn, SendConnector>) plan.sends.push_back(conn);
    else plan.recvs.push_back(conn);
  }
  keys.key[keys.n++] = conn;
  lane.nconns = static_cast<uint32_t>(keys.n);
  return static_cast<int8_t>(keys.n - 1);
}

// Appends the program's lane and steps to `out`, and what messages need to `info`.
Status lowerProgram(const Program& p, const MapFn& map, DevicePlan& out, PendingLaunch::LaneInfos& info) {
  DeviceLane& lane = out.lanes.emplace_back();  // zeroed; built in place (~800 bytes)
  lane.steps = reinterpret_cast<const DeviceStep*>(static_cast<uintptr_t>(out.steps.size()));
  lane.sliceBytes = p.sliceBytes;
  lane.nranks = p.nranks;
  PendingLaunch::LaneInfo& laneInfo = info.emplace_back();
  laneInfo.name = p.lane;
  laneInfo.steps.reserve(p.steps.size());
  ConnKeys keys;
  for (const Step& s : p.steps) {
    const OpDesc& od = (*p.ops)[s.op];
    DeviceStep d{};
    // An address step (kDirect with a connector) carries the op's buffers as they are.
    const bool addr = (s.flags & kDirect) && (s.send || s.recv);
    d.src = (s.flags & kSrc) || addr ? s.src : nullptr;
    d.dst = (s.flags & kDst) || addr ? s.dst : nullptr;
    d.addrEntry = s.addrEntry;
    d.bytes = s.bytes;
    d.flags = static_cast<uint8_t>(s.flags & ~kStream);
    d.dtype = static_cast<uint8_t>(od.dtype);
    d.redop = static_cast<uint8_t>(od.op);
    d.elemSize = s.elemSize;
    d.encoding = s.encoding;
    d.op = s.op;
    d.send = -1;
    d.recv = -1;
    if (s.send) {
      COLL_ASSIGN(d.send, connIndex(lane, keys, s.send, true, map, out, p));
    }
    if (s.recv) {
      COLL_ASSIGN(d.recv, connIndex(lane, keys, s.recv, false, map, out, p));
    }
    out.steps.push_back(d);
    laneInfo.steps.push_back({s.op, s.recv ? s.recv->peer() : -1, s.send ? s.send->peer() : -1});
  }
  lane.nsteps = static_cast<uint32_t>(p.steps.size());
  return okStatus();
}

// The part's plan: the one found for it, or its programs lowered (and kept for the next
// launch of the same operations).
Result<std::shared_ptr<const DevicePlan>> planOf(const DevicePart& part, const MapFn& map) {
  if (part.plan) return part.plan;
  for (size_t i = 0; part.ops && i < part.ops->size(); ++i) {
    const OpDesc& od = (*part.ops)[i];
    if (combines(od.kind) && !knownRedOp(od.op))  // the lanes would leave its steps undone
      return invalidArgument(od.describe() + ": op " + std::to_string(static_cast<int>(od.op)) +
                             " is no reduction operator the device executor knows");
  }
  auto plan = std::make_shared<DevicePlan>();
  auto info = std::make_shared<PendingLaunch::LaneInfos>();
  size_t steps = 0;
  for (const Program* p : part.programs) steps += p->steps.size();
  plan->steps.reserve(steps);  // once: an exact reserve per program would reallocate each time
  plan->lanes.reserve(part.programs.size());
  info->reserve(part.programs.size());
  for (const Program* p : part.programs) COLL_CHECK(lowerProgram(*p, map, *plan, *info));
  plan->info = std::move(info);
  if (part.dev->plans && !part.planKey.empty()) part.dev->plans->keep(part.planKey, plan);
  return std::shared_ptr<const DevicePlan>(std::move(plan));
}

Status lowerPart(const DevicePart& part, const MapFn& map, LoweredPart& out) {
  COLL_ASSIGN(out.plan, planOf(part, map));
  out.pending = std::make_shared<PendingLaunch>();
  PendingLaunch& p = *out.pending;
  if (part.dev->oneShot) p.mailSeq = part.dev->oneShot->mailSeq;
  if (part.ops) p.ops = std::make_shared<const std::vector<OpDesc>>(*part.ops);
  p.laneInfo = out.plan->info;
  p.planReused = part.plan != nullptr;
  p.sends = out.plan->sends;
  p.recvs = out.plan->recvs;
  return okStatus();
}

Result<DeviceProxy*> proxyOf(DeviceComm* c) {
  if (!c->proxy) {
    auto proxy = std::make_unique<DeviceProxy>(c);
    COLL_CHECK(proxy->init());
    c->proxy = std::move(proxy);
    COLL_INFO(INIT, "rank %d: device path %s", c->core->rank,
              c->emulate ? "emulated on host threads (COLL_DEVICE_EMULATE=1)"
                         : ("on CUDA device " + std::to_string(c->cudaDev)).c_str());
  }
  return c->proxy.get();
}

// ---- One kernel's worth of lanes ------------------------------------------------------

// The lanes of the parts one kernel runs (on one device; with emulation, all of them): the
// parts' lanes one after another, each lane's `steps` the index of its first step in
// `steps`. Both executors start from this, so the offsets that tie a part to its lanes
// and results are the code CI runs.
struct Assembly {
  std::vector<size_t> parts;  // indices into the launch's parts
  std::vector<LoweredPart> lowered;
  std::vector<size_t> firstLane;  // per part: its first lane in `lanes`
  std::vector<DeviceLane> lanes;
  std::vector<DeviceStep> steps;
  std::vector<void*> streams;  // distinct streams of the parts, in order
  uint64_t assembledNs = 0;    // when assemble() ended (COLL_DEVICE_TIMING)
};

Status assemble(std::vector<DevicePart>& parts, Assembly& a, const MapFn& map, struct ::collComm** failedComm) {
  a.lowered.resize(a.parts.size());
  for (size_t k = 0; k < a.parts.size(); ++k) {
    DevicePart& part = parts[a.parts[k]];
    LoweredPart& l = a.lowered[k];
    Status st = lowerPart(part, map, l);
    Result<DeviceProxy*> proxy = st.ok() ? proxyOf(part.dev) : Result<DeviceProxy*>(st);
    if (!proxy.ok()) {
      *failedComm = part.dev->owner;
      return proxy.takeStatus();
    }
    const size_t stepBase = a.steps.size();
    a.firstLane.push_back(a.lanes.size());
    for (const DeviceLane& lowered : l.plan->lanes) {
      DeviceLane& lane = a.lanes.emplace_back(lowered);
      lane.steps = reinterpret_cast<const DeviceStep*>(reinterpret_cast<uintptr_t>(lane.steps) + stepBase);
      lane.abortWord = proxy.value()->abortWordDevice();
      lane.yieldNs = part.dev->yieldNs;
    }
    a.steps.insert(a.steps.end(), l.plan->steps.begin(), l.plan->steps.end());
    for (void* s : part.streams)
      if (std::find(a.streams.begin(), a.streams.end(), s) == a.streams.end()) a.streams.push_back(s);
  }
  a.assembledNs = wallNs();
  return okStatus();
}

// Counts a launch run again (its lanes yielded) on each of its parts' communicators.
void countRerun(std::vector<DevicePart>& parts, const Assembly& a, Completion& c) {
  c.runs.fetch_add(1, std::memory_order_relaxed);
  for (size_t k : a.parts) parts[k].dev->reruns.fetch_add(1, std::memory_order_relaxed);
}

// The parts' launches of an assembly, to be waited for.
void addWaits(std::vector<DevicePart>& parts, const Assembly& a, DeviceWaits* waits) {
  for (size_t k = 0; k < a.parts.size(); ++k) waits->launches.emplace_back(parts[a.parts[k]].dev, a.lowered[k].pending);
}

// Hands every part's launch to its proxy: `results` holds one result per lane of the
// assembly, owned by `owner`.
void submitParts(std::vector<DevicePart>& parts, Assembly& a, const std::shared_ptr<Completion>& completion,
                 const DeviceLaneResult* results, const std::shared_ptr<void>& owner) {
  const uint64_t now = wallNs();
  for (size_t k = 0; k < a.parts.size(); ++k) {
    PendingLaunch& p = *a.lowered[k].pending;
    p.calledNs = parts[a.parts[k]].calledNs;
    p.builtNs = parts[a.parts[k]].builtNs;
    p.assembledNs = a.assembledNs;
    p.submittedNs = now;
    p.completion = completion;
    p.results = results + a.firstLane[k];
    p.resultsOwner = owner;
    parts[a.parts[k]].dev->proxy->submit(a.lowered[k].pending);
  }
}

// ---- Emulation: lanes on host threads ------------------------------------------------

// As a kernel's launch: results in memory of their own; the plan as a parameter image
// where the parts allow it and it fits (each lane copied out of it, its steps read in
// it, as the kernel does), else steps in one block with the lanes pointing there.
struct EmulatedMemory {
  std::vector<DeviceStep> steps;
  std::vector<DeviceLaneResult> results;
  std::vector<DeviceLane> lanes;  // as the blocks hold them
  std::unique_ptr<DeviceParamPlan> image;
};

std::shared_ptr<EmulatedMemory> emulatedMemory(Assembly& a, bool inParams) {
  auto mem = std::make_shared<EmulatedMemory>();
  mem->steps = std::move(a.steps);
  mem->results.resize(a.lanes.size());
  mem->lanes = std::move(a.lanes);
  const auto n = static_cast<uint32_t>(mem->lanes.size());
  for (uint32_t i = 0; i < n; ++i) mem->lanes[i].result = &mem->results[i];
  if (inParams) {
    mem->image = std::make_unique_for_overwrite<DeviceParamPlan>();
    if (!devicePackPlan(*mem->image, mem->lanes.data(), n, mem->steps.data(), mem->steps.size())) mem->image.reset();
  }
  for (uint32_t i = 0; i < n; ++i) {
    DeviceLane& lane = mem->lanes[i];
    if (mem->image) std::memcpy(&lane, deviceParamLaneWords(*mem->image, i), sizeof(DeviceLane));
    lane.steps = mem->image ? deviceParamSteps(*mem->image, lane)
                            : mem->steps.data() + reinterpret_cast<uintptr_t>(lane.steps);
  }
  return mem;
}

Status runEmulated(std::vector<DevicePart>& parts, struct ::collComm** failedComm) {
  Assembly a;
  for (size_t i = 0; i < parts.size(); ++i) a.parts.push_back(i);
  COLL_CHECK(assemble(parts, a, identityMap, failedComm));
  const bool inParams = std::all_of(parts.begin(), parts.end(),
                                    [](const DevicePart& p) { return p.dev->planInParams; });
  std::shared_ptr<EmulatedMemory> mem = emulatedMemory(a, inParams);
  auto completion = std::make_shared<EmulatedCompletion>();
  submitParts(parts, a, completion, mem->results.data(), mem);
  // As a kernel's blocks: a lane per thread, and while lanes yield (COLL_DEVICE_YIELD_US)
  // the launch runs again once all have ended, as the proxy relaunches a kernel.
  const int64_t blocks = param(IntParam::DEVICE_EMULATE_BLOCKS);
  for (;;) {
    std::vector<std::thread> threads;
    for (const DeviceLane& lane : mem->lanes)
      threads.emplace_back([&lane, blocks] {
        HostLaneBackend b;
        EmulatedThreadBlocks::instance().acquire(blocks);
        deviceRunLane(lane, b);
        EmulatedThreadBlocks::instance().release();
      });
    for (std::thread& t : threads) t.join();
    if (!deviceResumes(mem->results.data(), mem->results.size())) break;
    countRerun(parts, a, *completion);
  }
  completion->finished.store(true, std::memory_order_release);
  DeviceWaits waits;
  addWaits(parts, a, &waits);
  return deviceWait(waits, failedComm);
}

// ---- CUDA: one kernel per device -----------------------------------------------------

#if COLL_HAVE_CUDA
// The legacy default stream (0) serialises every blocking stream of the device: a rank's
// kernel there would wait forever for a rank of the same process and device whose kernel
// is queued behind it. Allowed when the launch holds all of them (a group driven by one
// thread: one kernel), as with one rank per device. And a launch whose lanes yield is run
// again by the proxy until done: a CUDA graph would hold only its first run.
Status checkStreams(const DevicePart& part, int partsOnDevice) {
  if (part.dev->yieldNs != 0)
    for (void* s : part.streams)
      if (gpu::isCapturing(s))
        return invalidUsage("rank " + std::to_string(part.dev->core->rank) +
                            ": a device collective cannot be captured into a CUDA graph while its lanes yield "
                            "(ranks of other processes share this GPU without MPS, or COLL_DEVICE_YIELD_US is set); "
                            "start the MPS daemon, or set COLL_DEVICE_YIELD_US=0");
  const int sharing = ranksOnGpu(part.dev->core->bootstrap->peers(), part.dev->core->rank, true);
  if (sharing <= partsOnDevice) return okStatus();
  for (void* s : part.streams)
    if (s == nullptr || s == reinterpret_cast<void*>(1) /* cudaStreamLegacy */)
      return invalidUsage("rank " + std::to_string(part.dev->core->rank) + " shares CUDA device " +
                          std::to_string(part.dev->cudaDev) + " with " + std::to_string(sharing - 1) +
                          " other rank(s) of this process but was given the legacy default stream (0): their "
                          "kernels would wait for each other forever; give each rank its own stream (or "
                          "cudaStreamPerThread), or drive them all from one thread in one group");
  return okStatus();
}

Status runOnDevices(std::vector<DevicePart>& parts, struct ::collComm** failedComm, DeviceWaits* waits) {
  const MapFn mapHost = [](void* base, size_t bytes, const void* p) { return gpu::mapHost(base, bytes, p); };
  // Every part's rank is bound to a device: launch() refuses device buffers on ranks
  // without a device set, which only device-bound (or emulated) ranks have.
  std::map<int, std::vector<size_t>> byDevice;
  for (size_t i = 0; i < parts.size(); ++i) byDevice[parts[i].dev->cudaDev].push_back(i);
  for (auto& [dev, idx] : byDevice)
    for (size_t i : idx) {
      Status st = checkStreams(parts[i], static_cast<int>(idx.size()));
      if (!st.ok()) {
        *failedComm = parts[i].dev->owner;
        return st;
      }
    }
  const int before = gpu::currentDevice();
  Status result;
  for (auto& [dev, idx] : byDevice) {
    Assembly a;
    a.parts = idx;
    Status st = gpu::setDevice(dev);
    if (!st.ok()) {
      *failedComm = parts[idx.front()].dev->owner;
      result = st;
      break;
    }
    result = assemble(parts, a, mapHost, failedComm);  // names the part that failed
    if (!result.ok()) break;
    const bool inParams = std::all_of(idx.begin(), idx.end(), [&](size_t i) { return parts[i].dev->planInParams; });
    Result<DeviceLaunch> h = launchLanes(a.lanes, a.steps, a.streams.front(),
                                         std::vector<void*>(a.streams.begin() + 1, a.streams.end()), inParams);
    if (!h.ok()) {
      *failedComm = parts[idx.front()].dev->owner;
      result = h.takeStatus();
      break;
    }
    DeviceLaunch& launch = h.value();
    std::vector<DeviceComm*> comms;
    for (size_t i : idx) comms.push_back(parts[i].dev);
    submitParts(parts, a, std::make_shared<CudaCompletion>(launch, dev, std::move(comms)), launch.results,
                std::make_shared<gpu::LaunchBuffer>(launch.memory));
    // Lanes that yield are relaunched by the proxy on the launch's stream: nothing of the
    // caller's may be queued behind them before they are done.
    if (std::any_of(idx.begin(), idx.end(), [&](size_t i) { return parts[i].dev->yieldNs != 0; }))
      addWaits(parts, a, waits);
  }
  if (before >= 0) (void)gpu::setDevice(before);
  return result;
}
#endif

}  // namespace

int ranksOnGpu(const std::vector<PeerInfo>& peers, int rank, bool oneProcess) {
  const PeerInfo& me = peers[static_cast<size_t>(rank)];
  int n = 0;
  for (const PeerInfo& p : peers) n += sameGpu(me, p) && (!oneProcess || p.pid == me.pid);
  return n;
}

std::string hardwareQueueWarning(int sharing, int queues) {
  if (sharing <= queues) return "";
  return std::to_string(sharing) + " ranks of this process share this GPU, but it runs kernels of " +
         std::to_string(queues) +
         " streams at once (CUDA_DEVICE_MAX_CONNECTIONS): collectives called from separate threads can hang; set "
         "CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts, or drive those ranks from one thread in groups";
}

int deviceLaneBudget(const std::vector<PeerInfo>& peers, int rank, int cudaDev, bool emulate) {
  const PeerInfo& me = peers[static_cast<size_t>(rank)];
  if (emulate) {
    const int64_t blocks = param(IntParam::DEVICE_EMULATE_BLOCKS);
    if (blocks <= 0) return kUnlimitedLanes;
    int sharing = 0;  // the emulated GPU is the process's
    for (const PeerInfo& p : peers) sharing += sameProcess(p, me);
    return static_cast<int>(std::min<int64_t>(blocks / std::max(1, sharing), kUnlimitedLanes));
  }
#if COLL_HAVE_CUDA
  // Every rank on the GPU counts, other processes' too: under MPS their blocks share it.
  const int sharing = ranksOnGpu(peers, rank, false);
  const int resident = cudaDev >= 0 ? residentLanes(cudaDev) : 0;
  if (sharing > 0 && resident > 0) return resident / sharing;
#else
  (void)cudaDev;
#endif
  return kUnlimitedLanes;
}

uint32_t deviceYieldNs(int64_t requestedUs, int onGpu, int inProcess, bool mps) {
  if (requestedUs < 0) requestedUs = onGpu > inProcess && !mps ? kAutoYieldUs : 0;
  return static_cast<uint32_t>(std::min<int64_t>(requestedUs, 4'000'000) * 1000);
}

DeviceShape deviceShape(int nranks, int budget, int requested) {
  if (nranks <= 1) return {1, 1};
  // Unset (COLL_DEVICE_NCHANNELS=0): half of the lanes this rank may keep resident, the
  // other half left to send/receive lanes. The H100 run: 2 ranks at 32-64 channels moved
  // 3x the busbw of 8 at 128-256 MiB. Where the GPU's share is unknown, 8.
  if (requested <= 0) requested = budget >= kUnlimitedLanes ? 8 : std::clamp(budget / 2, 1, kDeviceDefaultChannels);
  // A lane holds at most kDeviceMaxConns connectors: enough send lanes for every peer.
  const int minP2p = (nranks - 1 + kDeviceMaxConns - 1) / kDeviceMaxConns;
  DeviceShape s{};
  s.channels = std::clamp(std::min(requested, budget - 2 * minP2p), 1, kDeviceMaxChannels);
  s.peerLanes = std::max(minP2p, std::min((budget - s.channels) / 2, 8));
  return s;
}

bool devicePathFor(const DeviceComm& d, const void* p) {
  if (d.emulate) return true;
#if COLL_HAVE_CUDA
  return gpu::isDeviceMemory(p);
#else
  (void)p;
  return false;
#endif
}

bool copiesOnly(const DeviceComm& d, std::span<const OpDesc> ops) {
  return d.core->nranks == 1 &&
         std::none_of(ops.begin(), ops.end(), [](const OpDesc& od) { return isPeerOp(od.kind); });
}

Status runCopiesOnly(const DeviceComm& d, std::span<const OpDesc> ops) {
  for (const OpDesc& od : ops) {
    const size_t bytes = od.bytes();
    if (bytes == 0 || od.sendbuff == od.recvbuff) continue;
    if (d.emulate) {
      std::memcpy(od.recvbuff, od.sendbuff, bytes);
      continue;
    }
#if COLL_HAVE_CUDA
    COLL_CHECK(deviceCopy(od.recvbuff, od.sendbuff, bytes, od.stream).prefix(od.describe() + ": "));
#else
    return invalidUsage("device buffers need a build with CUDA support");
#endif
  }
  return okStatus();
}

Status deviceWait(const DeviceWaits& waits, struct ::collComm** failedComm) {
  Status first;
  for (const auto& [dev, pending] : waits.launches) {
    Status st = dev->proxy->wait(pending);
    if (!st.ok() && first.ok()) {
      first = st;
      *failedComm = dev->owner;
    }
  }
  return first;
}

Status deviceRun(std::vector<DevicePart>& parts, struct ::collComm** failedComm, DeviceWaits* waits) {
  if (parts.empty()) return okStatus();
  // Every rank of a communicator agrees on emulation (checked at init); a group mixing
  // emulated and real communicators is run part by part.
  std::vector<DevicePart> emulated, real;
  for (DevicePart& p : parts) (p.dev->emulate ? emulated : real).push_back(std::move(p));
  if (!emulated.empty()) COLL_CHECK(runEmulated(emulated, failedComm));
  if (real.empty()) return okStatus();
  parts.swap(real);
#if COLL_HAVE_CUDA
  return runOnDevices(parts, failedComm, waits);
#else
  *failedComm = parts.front().dev->owner;
  return invalidUsage("device buffers need a build with CUDA support");
#endif
}

uint32_t deviceYieldFor(const std::vector<PeerInfo>& peers, int rank, int cudaDev, bool emulate) {
  int onGpu = 0, inProcess = 0;
  bool mps = false;
#if COLL_HAVE_CUDA
  if (cudaDev >= 0 && !emulate) {
    onGpu = ranksOnGpu(peers, rank, false);
    inProcess = ranksOnGpu(peers, rank, true);
    mps = gpu::mpsEnabled(cudaDev);
  }
#else
  (void)cudaDev;
  (void)emulate;
#endif
  const uint32_t ns = deviceYieldNs(param(IntParam::DEVICE_YIELD_US), onGpu, inProcess, mps);
  if (ns != 0)
    COLL_INFO(INIT,
              "rank %d: device lanes give their block up after %u us of waiting (%d of the %d ranks on its GPU "
              "in other processes, MPS %s); each launch returns when done",
              rank, ns / 1000, onGpu - inProcess, onGpu, mps ? "on" : "off");
  return ns;
}

Status devicePrepare(DeviceComm& d) {
  bool bound = false;
#if COLL_HAVE_CUDA
  bound = d.cudaDev >= 0 && !d.emulate;
#endif
  if (!bound && !d.emulate) return okStatus();
  // The device set's ring channels (p2p where possible), connected like the host ones.
  d.conns = std::make_unique<ConnectorSet>();
  d.planInParams = param(IntParam::DEVICE_PLAN_PARAMS) != 0;
  if (const int64_t plans = param(IntParam::DEVICE_PLAN_CACHE); plans > 0)
    d.plans = std::make_unique<DevicePlanCache>(static_cast<size_t>(plans));
  auto& channels = d.conns->channels;
  channels.resize(static_cast<size_t>(d.channels));
  if (d.core->nranks > 1) {
    ConnectJob job(d.core->bootstrap.get(), d.slotBytes, true, d.emulate, d.core->net);
    for (size_t ch = 0; ch < channels.size(); ++ch) {
      job.addRecv(d.ring->prev, kTagDevice | kTagRing | ch, &channels[ch].recv);
      job.addSend(d.ring->next, kTagDevice | kTagRing | ch, &channels[ch].send);
    }
    COLL_CHECK(job.run());
    COLL_INFO(INIT, "rank %d: device ring %d -> %d -> %d over %s/%s, %zu channel(s)", d.core->rank, d.ring->prev,
              d.core->rank, d.ring->next, channels[0].recv->kind(), channels[0].send->kind(), channels.size());
  }
#if COLL_HAVE_CUDA
  if (!bound) return okStatus();
  const std::string queues = hardwareQueueWarning(ranksOnGpu(d.core->bootstrap->peers(), d.core->rank, true),
                                                  gpu::hardwareQueues());
  if (!queues.empty()) COLL_WARN(INIT, "rank %d: %s", d.core->rank, queues.c_str());
  // Kernels reach host-memory FIFOs (shm, net) through mappings made now, before any
  // kernel runs; the abort word and launch memory likewise.
  Result<DeviceProxy*> proxy = proxyOf(&d);
  if (!proxy.ok()) return proxy.takeStatus();
  auto map = [](auto& conn) -> Status {
    if (!conn || conn->fifoInDeviceMemory()) return okStatus();
    const FifoView* f = conn->fifo();
    Result<char*> r = gpu::mapHost(f->ctrl, fifoBytes(f->slotBytes), f->ctrl);
    return r.ok() ? okStatus() : r.takeStatus();
  };
  for (auto& ch : channels) {
    COLL_CHECK(map(ch.send));
    COLL_CHECK(map(ch.recv));
  }
  return gpu::LaunchBuffer::warmPool();
#else
  return okStatus();
#endif
}

void deviceQuiesce(DeviceComm& d, bool abort) {
  if (d.proxy) d.proxy->quiesce(abort);
}

}  // namespace coll

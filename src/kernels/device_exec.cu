// The device executor kernel: one thread block per lane runs devRunLane (dev_lane.h), the
// interpreter the host emulation runs in CI. Thread 0 waits on and moves the FIFO
// counters with system-scope acquire/release (the other side may be another kernel, the
// host or another process); all threads move a slice's data (kernels/dev_slice.h, the
// code the host emulation runs too): 16 bytes per load where every operand is 16-byte
// aligned, elements combined with the host's Elem/Op code, so results equal the host
// executor's.
//
// Also here: mapping FIFO memory for kernels, pinned launch memory, events.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "collectives/collectives.h"
#include "device/dev_lane.h"
#include "device/device_cuda.h"
#include "kernels/cuda_status.h"
#include "kernels/dev_slice.h"
#include "kernels/step_flags.h"

namespace coll {

namespace {

constexpr int kThreads = 512;

// ---- The block backend of devRunLane ---------------------------------------------------

class BlockBackend {
 public:
  __device__ explicit BlockBackend(DevSliceCtl* ctl) : ctl_(ctl) {}
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
  __device__ DevSliceCtl& ctl() { return *ctl_; }
  __device__ uint32_t load(const uint32_t* p) const {
    uint32_t v;
    asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ void store(uint32_t* p, uint32_t v) const {
    asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  __device__ void fence() const { __threadfence_system(); }
  __device__ void pause() const { __nanosleep(100); }
  // Out of line: inlined, the 12 x 5 slice variants made ptxas outline devRunLane instead,
  // with spills in its waiting loop.
  __device__ __noinline__ void slice(const DevStep& s, const char* in, const char* src, char* dst, char* out,
                                     uint64_t len, int nranks) const {
    devSlice(threadIdx.x, blockDim.x, s, in, src, dst, out, len, nranks);
  }

 private:
  DevSliceCtl* ctl_;
};

// The lane is read from pinned host memory once, into shared memory: the interpreter reads
// its fields on every slice.
__global__ void __launch_bounds__(kThreads) devExecKernel(const DevLane* lanes) {
  __shared__ DevSliceCtl ctl;
  __shared__ DevLane lane;
  const auto* from = reinterpret_cast<const uint32_t*>(&lanes[blockIdx.x]);
  auto* to = reinterpret_cast<uint32_t*>(&lane);
  for (unsigned i = threadIdx.x; i < sizeof(DevLane) / 4; i += blockDim.x) to[i] = from[i];
  __syncthreads();
  BlockBackend b(&ctl);
  devRunLane(lane, b);
}

// ---- Host side -------------------------------------------------------------------------

// Host memory registered for kernels: base -> (bytes, device address of base).
std::mutex gMapMu;
std::map<char*, std::pair<size_t, char*>> gMapped;

// Launch memory, recycled so that steady state allocates nothing: a pinned mapped host
// block (the plan is written there, results are read from there) and a device block of
// the same size on one device, into which the plan is copied in stream order so the
// kernel reads its steps from device memory rather than across PCIe on every step.
struct PoolBlock {
  void* host = nullptr;
  void* dev = nullptr;
  size_t bytes = 0;
  int device = -1;
  void* stream = nullptr;  // of the launch holding it
};
std::mutex gPoolMu;
std::condition_variable gPoolCv;
std::multimap<std::pair<int, size_t>, PoolBlock> gPool;  // free blocks by (device, size)
std::map<std::pair<int, void*>, int> gInFlight;          // blocks held, by (device, stream)
std::map<int, int> gBlocks, gWarmTarget;                 // blocks made / wanted, by device

// Returns a block: one a launch held (`held`), or a new one.
void poolPut(const PoolBlock& b, bool held = true) {
  {
    std::lock_guard<std::mutex> lock(gPoolMu);
    auto it = held ? gInFlight.find(std::make_pair(b.device, b.stream)) : gInFlight.end();
    if (it != gInFlight.end() && --it->second == 0) gInFlight.erase(it);
    gPool.emplace(std::make_pair(b.device, b.bytes), b);
  }
  gPoolCv.notify_all();
}

Result<PoolBlock> newBlock(int device, size_t bytes);

// One non-blocking stream per device for the library's own copies and fills (zeroing a
// p2p FIFO). Plain cudaMemset runs on the legacy default stream, which waits for every
// blocking stream of the device: when ranks share a GPU and one wires a connection on
// first use while another's kernel waits for it on a cudaStreamCreate'd stream, that
// wait never ends. Created at init, since creating a stream may itself wait for
// running kernels.
std::mutex gSideMu;
std::map<int, cudaStream_t> gSide;

Result<cudaStream_t> sideStream(int device) {
  std::lock_guard<std::mutex> lock(gSideMu);
  auto it = gSide.find(device);
  if (it != gSide.end()) return it->second;
  cudaStream_t s = nullptr;
  COLL_CHECK(cudaStatus(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
  gSide.emplace(device, s);
  return s;
}

// A free block of at least `bytes` for a launch on `stream` (current device). When none
// is free, allocating one (cudaHostAlloc, cudaMalloc) may wait for the kernels on the
// GPU, or for a driver lock held by a thread that waits for them (another rank's thread
// copying to pageable memory), and one of those kernels may be waiting for this very
// launch. So while earlier launches on the same stream hold blocks, wait for one of them
// to end instead: their kernels need only launches that other ranks make without waiting
// for this one. Allocate only when this stream holds none (its first launches, or a plan
// larger than every block it had).
Result<PoolBlock> poolGet(size_t bytes, void* stream) {
  int device = -1;
  COLL_CHECK(cudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  const auto key = std::make_pair(device, stream);
  std::unique_lock<std::mutex> lock(gPoolMu);
  for (;;) {
    auto it = gPool.lower_bound(std::make_pair(device, bytes));
    if (it != gPool.end() && it->first.first == device) {
      PoolBlock b = it->second;
      gPool.erase(it);
      b.stream = stream;
      ++gInFlight[key];
      return b;
    }
    if (gInFlight.count(key) == 0) break;
    gPoolCv.wait_for(lock, std::chrono::milliseconds(100));
  }
  lock.unlock();
  COLL_ASSIGN(PoolBlock b, newBlock(device, bytes));
  b.stream = stream;
  lock.lock();
  ++gInFlight[key];
  return b;
}

Result<PoolBlock> newBlock(int device, size_t bytes) {
  PoolBlock b;
  b.device = device;
  b.bytes = 64 << 10;
  while (b.bytes < bytes) b.bytes *= 2;
  COLL_CHECK(cudaStatus(cudaHostAlloc(&b.host, b.bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                        "cudaHostAlloc(" + std::to_string(b.bytes) + " bytes) for a device launch"));
  Status st = cudaStatus(cudaMalloc(&b.dev, b.bytes), "cudaMalloc(" + std::to_string(b.bytes) + ") for a device launch");
  if (!st.ok()) {
    cudaFreeHost(b.host);
    return st;
  }
  std::lock_guard<std::mutex> lock(gPoolMu);
  ++gBlocks[device];
  return b;
}

}  // namespace

Status cudaWarmLaunchPool() {
  // Blocks for a queue of launches of every rank on the device (a benchmark enqueues
  // many before it waits), so that a stream's first launches rarely find none free
  // while other ranks' kernels run (poolGet: later ones wait for their own stream).
  constexpr int kWarmPerRank = 4;
  int device = -1;
  COLL_CHECK(cudaStatus(cudaGetDevice(&device), "cudaGetDevice"));
  COLL_ASSIGN(cudaStream_t side, sideStream(device));  // made now, used on first-use wiring
  (void)side;
  int missing;
  {
    std::lock_guard<std::mutex> lock(gPoolMu);
    int& target = gWarmTarget[device];
    target = std::max(target + kWarmPerRank, 2 * kWarmPerRank);
    missing = target - gBlocks[device];
  }
  std::vector<PoolBlock> made;
  for (int i = 0; i < missing; ++i) {
    COLL_ASSIGN(PoolBlock b, newBlock(device, 1));
    made.push_back(b);
  }
  for (const PoolBlock& b : made) poolPut(b, false);
  return okStatus();
}

Result<char*> cudaMapHost(void* base, size_t bytes, const void* p) {
  char* b = static_cast<char*>(base);
  std::lock_guard<std::mutex> lock(gMapMu);
  auto it = gMapped.find(b);
  if (it == gMapped.end()) {
    cudaError_t e = cudaHostRegister(base, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e == cudaErrorHostMemoryAlreadyRegistered) {
      cudaGetLastError();
    } else if (e != cudaSuccess) {
      return cudaStatus(e, "cudaHostRegister of a " + std::to_string(bytes) + "-byte FIFO");
    }
    void* d = nullptr;
    COLL_CHECK(cudaStatus(cudaHostGetDevicePointer(&d, base, 0), "cudaHostGetDevicePointer of a FIFO"));
    it = gMapped.emplace(b, std::make_pair(bytes, static_cast<char*>(d))).first;
  }
  const char* q = static_cast<const char*>(p);
  if (q < b || q >= b + it->second.first) return internalError("address outside its mapped FIFO");
  return it->second.second + (q - b);
}

void cudaUnmapHost(void* base) {
  std::lock_guard<std::mutex> lock(gMapMu);
  auto it = gMapped.find(static_cast<char*>(base));
  if (it == gMapped.end()) return;
  cudaHostUnregister(base);
  cudaGetLastError();
  gMapped.erase(it);
}

Result<void*> cudaAllocMapped(size_t bytes) {
  void* p = nullptr;
  COLL_CHECK(cudaStatus(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                        "cudaHostAlloc(" + std::to_string(bytes) + " bytes)"));
  std::memset(p, 0, bytes);
  return p;
}

void cudaFreeMapped(void* p) {
  if (p) cudaFreeHost(p);
}

Result<char*> cudaMappedDevicePtr(void* p) {
  void* d = nullptr;
  COLL_CHECK(cudaStatus(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer"));
  return static_cast<char*>(d);
}

Result<DevLaunchHandle> cudaLaunchLanes(std::vector<DevLane> lanes, const std::vector<DevStep>& steps, void* stream,
                                        const std::vector<void*>& join) {
  DevLaunchHandle h;
  if (lanes.empty()) return h;
  auto s = static_cast<cudaStream_t>(stream);
  // Layout: lanes, steps, results; every part 64-byte aligned.
  auto up = [](size_t x) { return (x + 63) & ~size_t{63}; };
  const size_t laneBytes = up(lanes.size() * sizeof(DevLane));
  const size_t stepBytes = up(steps.size() * sizeof(DevStep));
  const size_t resBytes = up(lanes.size() * sizeof(DevLaneResult));
  COLL_ASSIGN(PoolBlock block, poolGet(laneBytes + stepBytes + resBytes, stream));
  h.memory = std::shared_ptr<void>(block.host, [block](void*) { poolPut(block); });
  char* host = static_cast<char*>(block.host);
  char* dev = static_cast<char*>(block.dev);
  COLL_ASSIGN(char* mapped, cudaMappedDevicePtr(host));
  // Lanes and steps are read from the device block; results are written to the pinned
  // block, where the proxy reads them.
  auto* devSteps = reinterpret_cast<const DevStep*>(dev + laneBytes);
  auto* devResults = reinterpret_cast<DevLaneResult*>(mapped + laneBytes + stepBytes);
  h.results = reinterpret_cast<DevLaneResult*>(host + laneBytes + stepBytes);
  std::memset(h.results, 0, lanes.size() * sizeof(DevLaneResult));
  for (size_t i = 0; i < lanes.size(); ++i) {
    lanes[i].steps = devSteps + reinterpret_cast<uintptr_t>(lanes[i].steps);
    lanes[i].result = devResults + i;
  }
  std::memcpy(host, lanes.data(), lanes.size() * sizeof(DevLane));
  if (!steps.empty()) std::memcpy(host + laneBytes, steps.data(), steps.size() * sizeof(DevStep));

  // Join: the kernel starts after the work queued on every stream of the group.
  for (void* other : join) {
    cudaEvent_t e;
    COLL_CHECK(cudaStatus(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    Status st = cudaStatus(cudaEventRecord(e, static_cast<cudaStream_t>(other)), "cudaEventRecord");
    if (st.ok()) (void)(st = cudaStatus(cudaStreamWaitEvent(s, e, 0), "cudaStreamWaitEvent"));
    cudaEventDestroy(e);
    COLL_CHECK(st);
  }
  // The pinned source makes the copy asynchronous: the call never waits for the stream.
  COLL_CHECK(cudaStatus(cudaMemcpyAsync(dev, host, laneBytes + stepBytes, cudaMemcpyHostToDevice, s),
                        "cudaMemcpyAsync of a device launch's plan"));
  devExecKernel<<<static_cast<unsigned>(lanes.size()), kThreads, 0, s>>>(reinterpret_cast<const DevLane*>(dev));
  COLL_CHECK(cudaStatus(cudaGetLastError(), "device executor kernel launch"));
  cudaEvent_t done;
  COLL_CHECK(cudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate"));
  COLL_CHECK(cudaStatus(cudaEventRecord(done, s), "cudaEventRecord"));
  for (void* other : join)
    COLL_CHECK(cudaStatus(cudaStreamWaitEvent(static_cast<cudaStream_t>(other), done, 0), "cudaStreamWaitEvent"));
  h.event = done;
  return h;
}

// ---- p2p FIFOs --------------------------------------------------------------------------

namespace {

// Runs f with dev current on the calling thread, then restores the previous device.
template <typename F>
auto onDevice(int dev, F f) {
  int before = -1;
  cudaGetDevice(&before);
  cudaGetLastError();
  if (before != dev) cudaSetDevice(dev);
  auto r = f();
  if (before >= 0 && before != dev) cudaSetDevice(before);
  return r;
}

}  // namespace

Result<void*> cudaAllocDevice(int dev, size_t bytes) {
  return onDevice(dev, [&]() -> Result<void*> {
    void* p = nullptr;
    COLL_ASSIGN(cudaStream_t side, sideStream(dev));
    COLL_CHECK(cudaStatus(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + ") of a p2p FIFO"));
    Status st = cudaStatus(cudaMemsetAsync(p, 0, bytes, side), "cudaMemsetAsync of a p2p FIFO");
    if (st.ok()) (void)(st = cudaStatus(cudaStreamSynchronize(side), "zeroing a p2p FIFO"));
    if (!st.ok()) {
      cudaFree(p);
      return st;
    }
    return p;
  });
}

void cudaFreeDevice(void* p) {
  if (p) cudaFree(p);
  cudaGetLastError();
}

Status cudaIpcExport(void* p, unsigned char handle[64]) {
  static_assert(sizeof(cudaIpcMemHandle_t) == 64, "IPC handles travel as 64 bytes");
  cudaIpcMemHandle_t h;
  COLL_CHECK(cudaStatus(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle of a p2p FIFO"));
  std::memcpy(handle, &h, 64);
  return okStatus();
}

Result<void*> cudaIpcImport(const unsigned char handle[64], int selfDev) {
  return onDevice(selfDev, [&]() -> Result<void*> {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle, 64);
    void* p = nullptr;
    COLL_CHECK(cudaStatus(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                          "cudaIpcOpenMemHandle of a peer's p2p FIFO"));
    return p;
  });
}

void cudaIpcClose(void* p) {
  if (p) cudaIpcCloseMemHandle(p);
  cudaGetLastError();
}

bool cudaCanAccess(int from, int to) {
  if (from == to) return true;
  int ok = 0;
  if (cudaDeviceCanAccessPeer(&ok, from, to) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return ok != 0;
}

Status cudaEnablePeer(int from, int to) {
  if (from == to) return okStatus();
  return onDevice(from, [&]() -> Status {
    cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
      return okStatus();
    }
    return cudaStatus(e, "cudaDeviceEnablePeerAccess(" + std::to_string(from) + " -> " + std::to_string(to) + ")");
  });
}

int cudaResidentLanes(int dev) {
  int sms = 0, perSm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const cudaError_t e = onDevice(dev, [&] {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, devExecKernel, kThreads, 0);
  });
  if (e != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms * perSm;
}

std::string cudaBusIdOf(int dev) {
  char id[16] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof(id), dev) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

int cudaDeviceByBusId(const char* busId) {
  int dev = -1;
  if (!busId[0] || cudaDeviceGetByPCIBusId(&dev, busId) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

bool cudaEventDone(void* ev, Status* err) {
  if (!ev) return true;
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(ev));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  if (e != cudaSuccess) (void)(*err = cudaStatus(e, "device executor kernel"));
  return true;
}

void cudaEventFree(void* ev) {
  if (ev) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
}

}  // namespace coll

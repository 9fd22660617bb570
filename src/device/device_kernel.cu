// The device executor kernel: one thread block per lane runs devRunLane (dev_lane.h), the
// interpreter the host emulation runs in CI. Thread 0 waits on and moves the FIFO
// counters with system-scope acquire/release (the other side may be another kernel, the
// host or another process); all threads move a slice's data (device/dev_slice.h, the
// code the host emulation runs too): 16 bytes per load where every operand is 16-byte
// aligned, elements combined with the host's Elem/Op code, so results equal the host
// executor's.
//
// Also here: its launch (launch memory from the pool of src/cuda/, events joining the
// group's streams).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/collectives.h"
#include "cuda/check.h"
#include "device/dev_lane.h"
#include "device/dev_slice.h"
#include "device/device_kernel.h"
#include "kernels/step_flags.h"

namespace coll {

namespace {

constexpr int kThreads = 512;

// ---- The block backend of devRunLane ---------------------------------------------------

class BlockBackend {
 public:
  __device__ BlockBackend(DevSliceCtl* ctl, DevAddr* table, uint64_t* scratch)
      : ctl_(ctl), table_(table), scratch_(scratch) {}
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
  __device__ DevSliceCtl& ctl() { return *ctl_; }
  __device__ DevAddr* table() { return table_; }
  __device__ unsigned tid() const { return threadIdx.x; }
  __device__ unsigned threads() const { return blockDim.x; }
  __device__ uint64_t* scratch() { return scratch_; }
  __device__ uint32_t load(const uint32_t* p) const {
    uint32_t v;
    asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ void store(uint32_t* p, uint32_t v) const {
    asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  __device__ void note(uint32_t* p, uint32_t v) const {
    asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  __device__ void fence() const { __threadfence_system(); }
  __device__ void pause() const { __nanosleep(100); }
  __device__ uint64_t now() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  // Out of line: inlined, the 12 x 5 slice variants made ptxas outline devRunLane instead,
  // with spills in its waiting loop.
  __device__ __noinline__ void slice(const DevStep& s, const char* in, const char* src, char* dst, char* out,
                                     uint64_t len, int nranks) const {
    devSlice(threadIdx.x, blockDim.x, s, in, src, dst, out, len, nranks);
  }

 private:
  DevSliceCtl* ctl_;
  DevAddr* table_;
  uint64_t* scratch_;
};

// The lane is read from pinned host memory once, into shared memory: the interpreter reads
// its fields on every slice.
__global__ void __launch_bounds__(kThreads) devExecKernel(const DevLane* lanes) {
  __shared__ DevSliceCtl ctl;
  __shared__ DevAddr table[kDevMaxDirect];  // a direct operation's buffers (dev_lane.h)
  __shared__ DevLane lane;
  __shared__ uint64_t scratch[kDevMaxConns];  // a batch of tokens' results (dev_lane.h)
  const auto* from = reinterpret_cast<const uint32_t*>(&lanes[blockIdx.x]);
  auto* to = reinterpret_cast<uint32_t*>(&lane);
  for (unsigned i = threadIdx.x; i < sizeof(DevLane) / 4; i += blockDim.x) to[i] = from[i];
  __syncthreads();
  BlockBackend b(&ctl, table, scratch);
  devRunLane(lane, b);
}

}  // namespace

Result<DevLaunch> launchLanes(std::vector<DevLane> lanes, const std::vector<DevStep>& steps, void* stream,
                              const std::vector<void*>& join) {
  DevLaunch h;
  if (lanes.empty()) return h;
  // Layout: lanes, steps, results; every part 64-byte aligned.
  auto up = [](size_t x) { return (x + 63) & ~size_t{63}; };
  const size_t laneBytes = up(lanes.size() * sizeof(DevLane));
  const size_t stepBytes = up(steps.size() * sizeof(DevStep));
  const size_t resBytes = up(lanes.size() * sizeof(DevLaneResult));
  COLL_ASSIGN(h.memory, gpu::LaunchBlock::take(laneBytes + stepBytes + resBytes, stream));
  char* host = h.memory.host();
  char* dev = h.memory.device();
  char* mapped = h.memory.hostMappedOnDevice();
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
    COLL_ASSIGN(gpu::Event queued, gpu::Event::record(other));
    COLL_CHECK(queued.waitOn(stream));
  }
  // The pinned source makes the copy asynchronous: the call never waits for the stream.
  auto s = static_cast<cudaStream_t>(stream);
  COLL_CHECK(gpu::check(cudaMemcpyAsync(dev, host, laneBytes + stepBytes, cudaMemcpyHostToDevice, s),
                        "cudaMemcpyAsync of a device launch's plan"));
  h.lanes = reinterpret_cast<const DevLane*>(dev);
  h.nlanes = static_cast<unsigned>(lanes.size());
  h.stream = stream;
  COLL_CHECK(relaunchLanes(h));
  for (void* other : join) COLL_CHECK(h.done.waitOn(other));
  return h;
}

Status relaunchLanes(DevLaunch& h) {
  devExecKernel<<<h.nlanes, kThreads, 0, static_cast<cudaStream_t>(h.stream)>>>(h.lanes);
  COLL_CHECK(gpu::check(cudaGetLastError(), "device executor kernel launch"));
  COLL_ASSIGN(h.done, gpu::Event::record(h.stream));
  return okStatus();
}

int residentLanes(int dev) {
  const int sms = gpu::multiprocessors(dev);
  int perSm = 0;
  const cudaError_t e = gpu::onDevice(dev, [&] {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, devExecKernel, kThreads, 0);
  });
  if (e != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms * perSm;
}

}  // namespace coll

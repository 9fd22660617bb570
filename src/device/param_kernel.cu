// The executor kernel: one thread block per lane runs deviceRunLane (device_lane.h), the
// interpreter the host emulation runs in CI. Thread 0 waits on and moves the FIFO
// counters with system-scope acquire/release (the other side may be another kernel, the
// host or another process); all threads move a slice's data (device/device_slice.h, the
// code the host emulation runs too): 16 bytes per load where every operand is 16-byte
// aligned, elements combined with the host's Elem/Op code, so results equal the host
// executor's.
//
// Each block copies its lane into shared memory once (the interpreter reads its fields on
// every slice), out of the parameter image or out of launch memory, and reads its steps
// where they are.
#include "device/param_kernel.h"

#include <cstdint>

#include "device/device_slice.h"

namespace coll {

namespace {

constexpr int kThreads = 512;

class ThreadBlockBackend {
 public:
  __device__ ThreadBlockBackend(DeviceSliceCtl* ctl, DeviceAddr* table, uint64_t* scratch)
      : ctl_(ctl), table_(table), scratch_(scratch) {}
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ void sync() const { __syncthreads(); }
  __device__ DeviceSliceCtl& ctl() { return *ctl_; }
  __device__ DeviceAddr* table() { return table_; }
  __device__ unsigned tid() const { return threadIdx.x; }
  __device__ unsigned threads() const { return blockDim.x; }
  __device__ uint64_t* scratch() { return scratch_; }
  // gpu: the other side runs on this GPU (DeviceConn::sameGpu), so GPU scope orders them.
  __device__ uint32_t load(const uint32_t* p, bool gpu = false) const {
    uint32_t v;
    if (gpu) asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    else asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ void store(uint32_t* p, uint32_t v, bool gpu = false) const {
    if (gpu) asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
    else asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  __device__ void note(uint32_t* p, uint32_t v) const {
    asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  }
  __device__ void fence(bool gpu = false) const {
    if (gpu) __threadfence();
    else __threadfence_system();
  }
  __device__ void post(uint32_t* p, uint32_t v) const { note(p, v); }
  __device__ void pause() const { __nanosleep(100); }
  __device__ uint64_t now() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  // Out of line: inlined, the 12 x 5 slice variants made ptxas outline deviceRunLane instead,
  // with spills in its waiting loop.
  __device__ __noinline__ void slice(const DeviceStep& s, const char* in, const char* src, char* dst, char* out,
                                     uint64_t len, int nranks) const {
    deviceSlice(threadIdx.x, blockDim.x, s, in, src, dst, out, len, nranks);
  }
  __device__ __noinline__ bool sliceDirect(const DeviceStep& s, const DeviceAddr* t, uint64_t at, uint64_t len,
                                           int nranks) const {
    return deviceSliceDirect(threadIdx.x, blockDim.x, s, t, at, len, nranks);
  }

 private:
  DeviceSliceCtl* ctl_;
  DeviceAddr* table_;
  uint64_t* scratch_;
};

__global__ void __launch_bounds__(kThreads) deviceExecKernel(const __grid_constant__ DeviceParamPlan plan) {
  __shared__ DeviceSliceCtl ctl;
  __shared__ DeviceAddr table[kDeviceMaxDirect];  // a direct operation's buffers (device_lane.h)
  __shared__ DeviceLane lane;
  __shared__ uint64_t scratch[kDeviceMaxConns];  // a batch of tokens' results (device_lane.h)
  const uint32_t* from = plan.lanes ? reinterpret_cast<const uint32_t*>(plan.lanes + blockIdx.x)
                                    : deviceParamLaneWords(plan, blockIdx.x);
  auto* to = reinterpret_cast<uint32_t*>(&lane);
  for (unsigned i = threadIdx.x; i < sizeof(DeviceLane) / 4; i += blockDim.x) to[i] = from[i];
  __syncthreads();
  if (!plan.lanes && threadIdx.x == 0) lane.steps = deviceParamSteps(plan, lane);
  __syncthreads();
  ThreadBlockBackend b(&ctl, table, scratch);
  deviceRunLane(lane, b);
}

}  // namespace

void launchParamKernel(const DeviceParamPlan& plan, unsigned nlanes, cudaStream_t stream) {
  deviceExecKernel<<<nlanes, kThreads, 0, stream>>>(plan);
}

void launchLanesKernel(const DeviceLane* lanes, unsigned nlanes, cudaStream_t stream) {
  DeviceParamPlan plan;  // the image is not read: only the header is set
  plan.nlanes = nlanes;
  plan.stepsAt = 0;
  plan.lanes = lanes;
  deviceExecKernel<<<nlanes, kThreads, 0, stream>>>(plan);
}

cudaError_t kernelBlocksPerSm(int* perSm) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(perSm, deviceExecKernel, kThreads, 0);
}

}  // namespace coll

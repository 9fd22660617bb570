// The thread-block backend of devRunLane (dev_lane.h), shared by the executor kernels
// (device_kernel.cu: the plan in device memory; param_kernel.cu: the plan in the
// parameters). Each kernel is compiled in a translation unit of its own: with two
// kernels in one, ptxas spilled more in both (56 bytes stored and loaded per thread
// instead of 20-24 on sm_90), the out-of-line step functions being shared between them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device/dev_lane.h"
#include "device/dev_slice.h"

namespace coll {
namespace {  // each translation unit its own copy, as the note above wants

constexpr int kThreads = 512;

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

}  // namespace
}  // namespace coll

// Device reduce/copy kernels: a grid-stride loop over 16-byte packs (an aligned load of
// 16 bytes per thread and input), each element combined by the same Elem/Op code as the
// host (reduce_ops.h), and a scalar kernel for unaligned buffers and the tail.
//
// Instantiations: 12 types x (sum, prod, max, min, avg-final) x {vector, scalar} = 120
// kernels per architecture (Avg's non-final step is the sum). Compiled with -fmad=false
// so no multiply-add is fused and every rounding matches the host's.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kernels/device_reduce.h"
#include "cuda/check.h"
#include "kernels/slice.h"
#include "kernels/reduce_ops.h"

namespace coll {

namespace {

// The executor's 16-byte packs and element combine (device_slice.h): one definition of how
// elements are combined on the device.
using slice::combine;
using slice::Pack;

template <typename T, typename Op, bool kAvg>
__global__ void reducePacks(Pack<T>* d, const Pack<T>* a, const Pack<T>* b, size_t npacks, int nranks) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < npacks; i += stride) {
    const Pack<T> x = a[i], y = b[i];
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < Pack<T>::kN; ++k) r.e[k] = combine<T, Op, kAvg>(x.e, y.e, k, nranks);
    d[i] = r;
  }
}

template <typename T, typename Op, bool kAvg>
__global__ void reduceScalar(T* d, const T* a, const T* b, size_t n, int nranks) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    d[i] = combine<T, Op, kAvg>(a, b, i, nranks);
}

constexpr int kThreads = 256;

unsigned gridFor(size_t items) {
  size_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks > 4096) blocks = 4096;  // grid-stride beyond: enough to fill any current GPU
  return static_cast<unsigned>(blocks == 0 ? 1 : blocks);
}

// A copy of 16-byte packs, kCopyUnroll loads in flight per thread before the stores, then
// the last tail (< 16) bytes by the first block.
constexpr int kCopyUnroll = 4;
__global__ void copyPacks(uint4* d, const uint4* a, size_t npacks, unsigned tail) {
  if (blockIdx.x == 0 && threadIdx.x < tail)
    reinterpret_cast<char*>(d + npacks)[threadIdx.x] = reinterpret_cast<const char*>(a + npacks)[threadIdx.x];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kCopyUnroll - 1) * stride < npacks; i += kCopyUnroll * stride) {
    uint4 v[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) v[u] = a[i + u * stride];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) d[i + u * stride] = v[u];
  }
  for (; i < npacks; i += stride) d[i] = a[i];
}

template <typename T, typename Op, bool kAvg>
Status launch(void* dst, const void* a, const void* b, size_t n, int nranks, cudaStream_t s) {
  if (n == 0) return okStatus();
  auto* d = static_cast<T*>(dst);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  size_t done = 0;
  if (((addr(d) | addr(x) | addr(y)) & 15) == 0) {
    const size_t npacks = n / Pack<T>::kN;
    if (npacks > 0)
      reducePacks<T, Op, kAvg>
          <<<gridFor(npacks), kThreads, 0, s>>>(reinterpret_cast<Pack<T>*>(d), reinterpret_cast<const Pack<T>*>(x),
                                                reinterpret_cast<const Pack<T>*>(y), npacks, nranks);
    done = npacks * Pack<T>::kN;
  }
  if (done < n)
    reduceScalar<T, Op, kAvg><<<gridFor(n - done), kThreads, 0, s>>>(d + done, x + done, y + done, n - done, nranks);
  return gpu::check(cudaGetLastError(), "reduction kernel launch");
}

template <typename T>
Status forOp(void* dst, const void* a, const void* b, size_t n, collRedOp_t op, bool final, int nranks,
             cudaStream_t s) {
  Status st;
  const bool known = withRedOp(op, [&](auto o, auto avg) {
    if (decltype(avg)::value && final) (void)(st = launch<T, decltype(o), true>(dst, a, b, n, nranks, s));
    else (void)(st = launch<T, decltype(o), false>(dst, a, b, n, nranks, s));
  });
  if (known) return st;
  return invalidArgument("op " + std::to_string(static_cast<int>(op)) + " is not a reduction operator");
}

// Calls f with a value of the element type of `type` (one switch for every entry point).
template <typename F>
Status byType(collDataType_t type, F&& f) {
  Status st;
  if (withElemType(type, [&](auto elem) { (void)(st = f(elem)); })) return st;
  return invalidArgument("datatype " + std::to_string(static_cast<int>(type)) + " is not a data type");
}

// PreMulSum's input step: one element times the scalar, by the Prod combine.
template <typename T>
__global__ void preMulScalar(T* d, const T* a, size_t n, const T* scalarDev, T scalarVal) {
  const T s[1] = {scalarDev ? *scalarDev : scalarVal};
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T x[1] = {a[i]};
    d[i] = combine<T, OpProd, false>(x, s, 0, 1);
  }
}

template <typename T>
Status preMul(void* dst, const void* src, size_t n, const void* scalarDev, const void* scalarHost, cudaStream_t s) {
  if (n == 0) return okStatus();
  T val{};
  if (!scalarDev) std::memcpy(&val, scalarHost, sizeof(T));
  preMulScalar<T><<<gridFor(n), kThreads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), n,
                                                  static_cast<const T*>(scalarDev), val);
  return gpu::check(cudaGetLastError(), "PreMulSum scaling kernel launch");
}

}  // namespace

Status devicePreMul(void* dst, const void* src, size_t n, collDataType_t type, const void* scalarDev,
                    const void* scalarHost, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  return byType(type, [&](auto elem) { return preMul<decltype(elem)>(dst, src, n, scalarDev, scalarHost, s); });
}

Status deviceReduce(void* dst, const void* a, const void* b, size_t n, collDataType_t type, collRedOp_t op, bool final,
                    int nranks, void* stream) {
  if (nranks < 1) return invalidArgument("nranks " + std::to_string(nranks) + " must be at least 1");
  auto s = static_cast<cudaStream_t>(stream);
  return byType(type, [&](auto elem) { return forOp<decltype(elem)>(dst, a, b, n, op, final, nranks, s); });
}

Status deviceCopy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return okStatus();
  auto s = static_cast<cudaStream_t>(stream);
  // Below this a kernel of ours beats cudaMemcpyAsync (the H100 run, 1 rank: the copy took
  // 7-8 us from 8 B to 2 MiB where NCCL's kernel took 4.3-5.2; from 8 MiB up they were
  // equal, as both run at the HBM's rate).
  constexpr size_t kKernelBelow = size_t{8} << 20;
  const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  if (bytes < kKernelBelow && ((addr(dst) | addr(src)) & 15) == 0) {
    const size_t npacks = bytes / 16;
    copyPacks<<<gridFor(npacks / kCopyUnroll + 1), kThreads, 0, s>>>(static_cast<uint4*>(dst),
                                                                     static_cast<const uint4*>(src), npacks,
                                                                     static_cast<unsigned>(bytes % 16));
    return gpu::check(cudaGetLastError(), "copy kernel launch");
  }
  return gpu::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s),
                    "cudaMemcpyAsync (device to device)");
}

}  // namespace coll

#include "comm/premulsum.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>

#include "collectives/config.h"
#include "base/datatype.h"
#include "kernels/host_reduce.h"
#if COLL_HAVE_CUDA
#include "cuda/gpu.h"
#include "kernels/device_reduce.h"
#endif

namespace coll {

namespace {

// The scalar of a PreMulSum op as one element of its type, read now.
Status readScalar(const PreMulSumOp& p, unsigned char* out) {
  const size_t es = dataTypeSize(p.dtype);
  if (p.immediate) {
    std::memcpy(out, p.value, es);
    return okStatus();
  }
#if COLL_HAVE_CUDA
  if (gpu::isDeviceMemory(p.scalar)) return gpu::copyToHost(out, p.scalar, es);
#endif
  std::memcpy(out, p.scalar, es);
  return okStatus();
}

// dst = src * scalar elementwise on the host, by the Prod kernel over a block of scalars
// (the same rounding as every reduction step).
void hostPreMul(char* dst, const char* src, size_t n, collDataType_t t, const unsigned char* scalar) {
  const size_t block = std::min<size_t>(n, 1024);  // small operations fill only what they use
  const size_t es = dataTypeSize(t);
  alignas(64) char scalars[1024 * 8];
  for (size_t i = 0; i < block; ++i) std::memcpy(scalars + i * es, scalar, es);
  const ReduceKernels& k = hostReduceKernels(t, collProd);
  for (size_t off = 0; off < n; off += block) {
    const size_t m = std::min(block, n - off);
    k.reduce(dst + off * es, src + off * es, scalars, m);
  }
}

}  // namespace

Status lowerPreMulSum(collComm* comm, OpDesc* od) {
  if (validRedOp(static_cast<int>(od->op))) return okStatus();  // built-in ops (and ops of ops-free calls)
  // A copy: the op may be destroyed once this call returns, before a group runs it.
  const PreMulSumOp p = comm->redOps.at(static_cast<int>(od->op));
  od->op = collSum;
  const size_t bytes = od->inputBytes(comm->rank, comm->nranks);
  if (bytes == 0) return okStatus();
  const size_t inputCount = bytes / dataTypeSize(od->dtype);
  const void* src = od->sendbuff;
  const collDataType_t t = od->dtype;
#if COLL_HAVE_CUDA
  if (od->device && !comm->dev.emulate) {
    // The comm's device: one thread may drive ranks on several GPUs.
    COLL_CHECK(gpu::setDevice(comm->dev.cudaDev));
    COLL_ASSIGN(void* scratch, gpu::allocateOnStream(bytes, od->stream));
    od->keep = std::shared_ptr<void>(scratch, [s = od->stream](void* q) { gpu::releaseOnStream(q, s); });
    od->sendbuff = scratch;
    od->prepare = std::make_shared<std::function<Status()>>([p, scratch, src, inputCount, t, s = od->stream,
                                                             dev = comm->dev.cudaDev] {
      COLL_CHECK(gpu::setDevice(dev));
      const void* deviceScalar = !p.immediate && gpu::isDeviceMemory(p.scalar) ? p.scalar : nullptr;
      unsigned char host[8] = {};
      if (!deviceScalar) COLL_CHECK(readScalar(p, host));
      return devicePreMul(scratch, src, inputCount, t, deviceScalar, host, s);
    });
    return okStatus();
  }
#endif
  std::shared_ptr<char> scaled = comm->scratch->take(bytes);
  char* dst = scaled.get();
  od->sendbuff = dst;
  od->keep = std::move(scaled);
  od->prepare = std::make_shared<std::function<Status()>>([p, dst, src, inputCount, t] {
    unsigned char scalar[8] = {};
    COLL_CHECK(readScalar(p, scalar));
    hostPreMul(dst, static_cast<const char*>(src), inputCount, t, scalar);
    return okStatus();
  });
  return okStatus();
}

}  // namespace coll

// Device reduce and copy primitives (CUDA), the device twins of host_reduce.h.
//
// deviceReduce computes dst[i] = op(a[i], b[i]) for i < n on device memory, enqueued on
// a CUDA stream; with `final` it applies the op's post-step as FinalFn does (Avg: the sum
// divided by nranks). The element types and operators are the host's (reduce_ops.h), so
// results equal hostReduceKernels' bit for bit, integers and floats alike (fp16, bf16
// and fp8 combined in fp32 and rounded once). Buffers whose addresses are 16-byte
// aligned alike move in 16-byte vectors; any other alignment takes a scalar path.
//
// This header needs no CUDA headers: streams travel as void* (a cudaStream_t). Built only
// when CUDA is (COLL_HAVE_CUDA); without a driver or a device every call returns a clear
// error, and gpu::usable (src/cuda/gpu.h) says why.
#pragma once

#include <cstddef>

#include "collectives/collectives.h"
#include "base/status.h"

namespace coll {

Status deviceReduce(void* dst, const void* a, const void* b, size_t n, collDataType_t type, collRedOp_t op, bool final,
                    int nranks, void* stream);
// dst[i] = src[i] * scalar for i < n (PreMulSum's input step), rounded as a Prod step of
// deviceReduce. The scalar is read on the device from scalarDev when it is not null (device
// memory, read in stream order), else taken from the bytes at scalarHost (one element).
Status devicePreMul(void* dst, const void* src, size_t n, collDataType_t type, const void* scalarDev,
                    const void* scalarHost, void* stream);
// dst = bytes of src, device to device, on the stream.
Status deviceCopy(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace coll

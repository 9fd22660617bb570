// Data movement of one slice of a device lane (dev_lane.h): the code every thread of the
// executor kernel's block runs (device/device_kernel.cu), and, with its threads taken one
// after another, the code the host emulation runs (device/device_exec.cc). So CI, which
// has no GPU, runs the GPU's copy and reduction code (16-byte packs, the strided split
// over threads, scalar tails, Avg) through the whole emulated sweep.
//
// The copy and reduction primitives are kernels/slice.h's.
#pragma once

#include <cstdint>

#include "collectives/collectives.h"
#include "device/dev_lane.h"
#include "kernels/slice.h"
#include "kernels/step_flags.h"

namespace coll {

// Thread tid of nt's share of one slice of step s: in (the received slot), src and dst
// (the step's buffers at this slice), out (the slot to send); absent ones are null.
COLL_HD inline void devSlice(unsigned tid, unsigned nt, const DevStep& s, const char* in, const char* src, char* dst,
                             char* out, uint64_t len, int nranks) {
  using namespace slice;
  // Pure copies need no element type.
  if (!(in && src) && !((s.flags & kFinal) && s.redop == collAvg)) {
    if (in) copy(tid, nt, in, dst, out, len);
    else if (src) copy(tid, nt, src, dst != src ? dst : nullptr, out, len);
    return;
  }
  switch (s.dtype) {
    case collInt8: withOp<int8_t>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collUint8: withOp<uint8_t>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collInt32: withOp<int32_t>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collUint32: withOp<uint32_t>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collInt64: withOp<int64_t>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collUint64: withOp<uint64_t>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collFloat16: withOp<Half>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collFloat32: withOp<float>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collFloat64: withOp<double>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collBfloat16: withOp<Bf16>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collFloat8e4m3: withOp<E4M3>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    case collFloat8e5m2: withOp<E5M2>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); break;
    default: break;  // validated by the API
  }
}

}  // namespace coll

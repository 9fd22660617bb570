// Data movement of one slice of a device lane (dev_lane.h): the code every thread of the
// executor kernel's block runs (device/param_kernel.cu), and, with its threads taken one
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
#include "kernels/wire_slice.h"

namespace coll {

// Thread tid of nt's share of one slice of step s: in (the received slot), src and dst
// (the step's buffers at this slice), out (the slot to send); absent ones are null.
COLL_HD inline void devSlice(unsigned tid, unsigned nt, const DevStep& s, const char* in, const char* src, char* dst,
                             char* out, uint64_t len, int nranks) {
  using namespace slice;
  if (s.wire != kWireNone) {
    wireSliceHd(tid, nt, s.flags, s.wire, s.redop, in, reinterpret_cast<const float*>(src),
                reinterpret_cast<float*>(dst), out, len / 4, nranks);
    return;
  }
  // Pure copies need no element type.
  if (!(in && src) && !((s.flags & kFinal) && s.redop == collAvg)) {
    if (in) copy(tid, nt, in, dst, out, len);
    else if (src) copy(tid, nt, src, dst != src ? dst : nullptr, out, len);
    return;
  }
  // An unknown type does nothing: the API validated it.
  withElemType(s.dtype,
               [&](auto elem) { withOp<decltype(elem)>(tid, nt, s.redop, s.flags, in, src, dst, out, len, nranks); });
}

}  // namespace coll

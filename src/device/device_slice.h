// Data movement of one slice of a device lane (device_lane.h): the code every thread of the
// executor kernel's block runs (device/param_kernel.cu), and, with its threads taken one
// after another, the code the host emulation runs (device/device_exec.cc). So CI, which
// has no GPU, runs the GPU's copy and reduction code (16-byte packs, the strided split
// over threads, scalar tails, Avg) through the whole emulated sweep.
//
// The copy and reduction primitives are kernels/slice.h's.
#pragma once

#include <cstdint>

#include "collectives/collectives.h"
#include "device/device_lane.h"
#include "kernels/slice.h"
#include "kernels/step_flags.h"
#include "kernels/encoded_slice.h"

namespace coll {

// Thread tid of nt's share of one slice of step s: in (the received slot), src and dst
// (the step's buffers at this slice), out (the slot to send); absent ones are null.
COLL_HD inline void deviceSlice(unsigned tid, unsigned nt, const DeviceStep& s, const char* in, const char* src,
                                char* dst, char* out, uint64_t len, int nranks) {
  using namespace slice;
  if (s.encoding != kEncodingNone) {
    encodedSliceHd(tid, nt, s.flags, s.encoding, s.redop, in, reinterpret_cast<const float*>(src),
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

// One type of deviceSliceDirect: a function of its own in the kernel.
template <typename T, bool kAvg>
COLL_HD COLL_DEV_OUTLINE void deviceDirectTyped(unsigned tid, unsigned nt, const DeviceAddr* t, uint64_t at,
                                                uint64_t len, int n) {
  auto in = [t, at, n](int j) { return reinterpret_cast<const T*>(t[j + 1 < n ? j + 1 : 0].in + at); };
  auto out = [t, at](int j) { return reinterpret_cast<T*>(t[j].out + at); };
  slice::reduceAll<T, OpSum, kAvg>(tid, nt, in, n, out, n, len / sizeof(T), n);
}

// deviceDirectTyped<T, true or false>, the Avg division only in the final step.
template <typename T>
COLL_HD inline void deviceDirectOf(bool avg, unsigned tid, unsigned nt, const DeviceAddr* t, uint64_t at, uint64_t len,
                                   int n) {
  if (avg) deviceDirectTyped<T, true>(tid, nt, t, at, len, n);
  else deviceDirectTyped<T, false>(tid, nt, t, at, len, n);
}

// Thread tid of nt's share of a direct allreduce's slice: bytes [at, at + len) of the n
// ranks' buffers in t (t[0] this rank's), combined in the ring's order (t[1], ..., t[n-1],
// then t[0]) in one pass, the result written to every rank's output. Only sums and
// averages of float, fp16 and bf16 (a training job's gradients): each type and op the
// pass takes adds to the kernel's compile time (docs/PERFORMANCE.md, "The direct route in
// one pass over all inputs", has the table); false for the others, which take a chain of
// two-input slices.
COLL_HD inline bool deviceSliceDirect(unsigned tid, unsigned nt, const DeviceStep& s, const DeviceAddr* t, uint64_t at,
                                      uint64_t len, int n) {
  if (s.redop != collSum && s.redop != collAvg) return false;
  const bool avg = s.redop == collAvg && (s.flags & kFinal);
  switch (s.dtype) {
    case collFloat32: deviceDirectOf<float>(avg, tid, nt, t, at, len, n); return true;
    case collFloat16: deviceDirectOf<Half>(avg, tid, nt, t, at, len, n); return true;
    case collBfloat16: deviceDirectOf<Bf16>(avg, tid, nt, t, at, len, n); return true;
    default: return false;
  }
}

}  // namespace coll

// One slice of a compressed step (Step::wire, kernels/compress.h): the fp32 elements of the
// caller's buffers, the wire form in the connectors' slots. What the step's flags mean is
// unchanged (plan.h); what differs is where values are rounded:
//   - a value leaving for the wire (out) is encoded, and the result kept here (dst) is the
//     decoding of those very bits, so the owner of a result and every rank it reaches
//     hold the same bits;
//   - a received value forwarded as it is (in and out, no src) keeps its wire bits: it
//     is rounded once, where it was made, however far it travels;
//   - reductions happen in fp32: decode, combine with the local source, encode again.
// A result that leaves for nowhere (dst only) is kept in fp32.
//
// hostWireSlice is the host executor's (vectorised where the CPU allows); wireSliceHd is
// the device executor's and its emulation's, thread tid of nt taking whole blocks. Both
// round alike: the same values give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/compress.h"
#include "kernels/host_reduce.h"
#include "kernels/reduce_ops.h"
#include "kernels/step_flags.h"

namespace coll {

// A slice of n elements with wire form `wire` (not kWireNone): in and out are wire slices
// (wireBytes(wire, n) bytes), src and dst fp32; absent ones are null.
void hostWireSlice(uint8_t flags, uint8_t wire, const ReduceKernels* kernels, const char* in, const float* src,
                   float* dst, char* out, size_t n, int nranks);

namespace slice {

COLL_HD inline const uint16_t* wireWords(uint8_t wire, const char* base, uint64_t n) {
  return reinterpret_cast<const uint16_t*>(base + wireHeaderBytes(wire, n));
}

// Element i of a wire slice whose block exponent is e (fp16) or ignored (bf16).
COLL_HD inline float wireDecode(uint8_t wire, uint16_t w, int e) {
  return wire == kWireFp16 ? decodeFp16Scaled(w, e) : bf16ToFloat(w);
}

// The value step flags make of element i before it is encoded or kept.
template <typename Op, bool kAvg>
COLL_HD inline float wireValue(uint8_t wire, bool final, const uint16_t* in, int e, const float* src, uint64_t i,
                               int nranks) {
  float v = in ? wireDecode(wire, in[i], e) : src[i];
  if (in && src) v = Op::apply(v, src[i]);
  if (kAvg && final) v = avgOf<float>(v, nranks);
  return v;
}

// Block b of a slice of n elements.
template <typename Op, bool kAvg>
COLL_HD inline void wireBlock(uint8_t wire, bool final, const char* in, const float* src, float* dst, char* out,
                              uint64_t n, uint64_t b, int nranks) {
  const uint64_t lo = b * kCompressBlock, hi = lo + kCompressBlock < n ? lo + kCompressBlock : n;
  const uint16_t* win = in ? wireWords(wire, in, n) : nullptr;
  const int ein = in && wire == kWireFp16 ? reinterpret_cast<const int8_t*>(in)[b] : 0;
  if (!out) {
    for (uint64_t i = lo; i < hi; ++i) dst[i] = wireValue<Op, kAvg>(wire, final, win, ein, src, i, nranks);
    return;
  }
  auto* wout = const_cast<uint16_t*>(wireWords(wire, out, n));
  if (in && !src) {  // forwarded: the same bits
    if (wire == kWireFp16) reinterpret_cast<int8_t*>(out)[b] = static_cast<int8_t>(ein);
    for (uint64_t i = lo; i < hi; ++i) {
      wout[i] = win[i];
      if (dst) dst[i] = wireDecode(wire, win[i], ein);
    }
    return;
  }
  int e = 0;
  if (wire == kWireFp16) {
    float m = 0.0f;
    for (uint64_t i = lo; i < hi; ++i) {
      const float a = fabsf(wireValue<Op, kAvg>(wire, final, win, ein, src, i, nranks));
      if (a <= 3.4028234664e38f && a > m) m = a;
    }
    e = blockExponent(m);
    reinterpret_cast<int8_t*>(out)[b] = static_cast<int8_t>(e);
  }
  for (uint64_t i = lo; i < hi; ++i) {
    const float v = wireValue<Op, kAvg>(wire, final, win, ein, src, i, nranks);
    const uint16_t w = wire == kWireFp16 ? encodeFp16Scaled(v, e) : floatToBf16(v);
    wout[i] = w;
    if (dst) dst[i] = wireDecode(wire, w, e);
  }
}

template <typename Op, bool kAvg>
COLL_HD inline void wireTyped(unsigned tid, unsigned nt, uint8_t wire, bool final, const char* in, const float* src,
                              float* dst, char* out, uint64_t n, int nranks) {
  for (uint64_t b = tid; b < compressBlocks(n); b += nt)
    wireBlock<Op, kAvg>(wire, final, in, src, dst, out, n, b, nranks);
}

// Thread tid of nt's share of a compressed slice of n elements: whole blocks, so one
// thread finds a block's exponent.
COLL_HD inline void wireSliceHd(unsigned tid, unsigned nt, uint8_t flags, uint8_t wire, uint8_t redop, const char* in,
                                const float* src, float* dst, char* out, uint64_t n, int nranks) {
  const bool final = flags & kFinal;
  withRedOp(redop, [&](auto op, auto avg) {
    wireTyped<decltype(op), decltype(avg)::value>(tid, nt, wire, final, in, src, dst, out, n, nranks);
  });
}

}  // namespace slice
}  // namespace coll

// One slice of a compressed step (Step::encoding, kernels/compress.h): the fp32 elements of the
// caller's buffers, the encoded form in the connectors' slots. What the step's flags mean is
// unchanged (plan.h); what differs is where values are rounded:
//   - a value leaving in a slot (out) is encoded, and the result kept here (dst) is the
//     decoding of those very bits, so the owner of a result and every rank it reaches
//     hold the same bits;
//   - a received value forwarded as it is (in and out, no src) keeps its encoded bits: it
//     is rounded once, where it was made, however far it travels;
//   - reductions happen in fp32: decode, combine with the local source, encode again.
// A result that leaves for nowhere (dst only) is kept in fp32.
//
// hostEncodedSlice is the host executor's (vectorised where the CPU allows); encodedSliceHd is
// the device executor's and its emulation's, thread tid of nt taking whole groups. Both
// round alike: the same values give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/compress.h"
#include "kernels/host_reduce.h"
#include "kernels/reduce_ops.h"
#include "kernels/step_flags.h"

namespace coll {

// A slice of n elements with encoding `encoding` (not kEncodingNone): in and out are encoded slices
// (encodedBytes(encoding, n) bytes), src and dst fp32; absent ones are null.
void hostEncodedSlice(uint8_t flags, uint8_t encoding, const ReduceKernels* kernels, const char* in, const float* src,
                      float* dst, char* out, size_t n, int nranks);

namespace slice {

COLL_HD inline const uint16_t* encodedWords(uint8_t encoding, const char* base, uint64_t n) {
  return reinterpret_cast<const uint16_t*>(base + encodedHeaderBytes(encoding, n));
}

// Element i of an encoded slice whose group exponent is e (fp16) or ignored (bf16).
COLL_HD inline float decodeElement(uint8_t encoding, uint16_t w, int e) {
  return encoding == kEncodingFp16 ? decodeFp16Scaled(w, e) : bf16ToFloat(w);
}

// The value step flags make of element i before it is encoded or kept.
template <typename Op, bool kAvg>
COLL_HD inline float valueToEncode(uint8_t encoding, bool final, const uint16_t* in, int e, const float* src,
                                   uint64_t i, int nranks) {
  float v = in ? decodeElement(encoding, in[i], e) : src[i];
  if (in && src) v = Op::apply(v, src[i]);
  if (kAvg && final) v = avgOf<float>(v, nranks);
  return v;
}

// Group b of a slice of n elements.
template <typename Op, bool kAvg>
COLL_HD inline void encodedGroup(uint8_t encoding, bool final, const char* in, const float* src, float* dst, char* out,
                                 uint64_t n, uint64_t b, int nranks) {
  const uint64_t lo = b * kCompressGroup, hi = lo + kCompressGroup < n ? lo + kCompressGroup : n;
  const uint16_t* win = in ? encodedWords(encoding, in, n) : nullptr;
  const int ein = in && encoding == kEncodingFp16 ? reinterpret_cast<const int8_t*>(in)[b] : 0;
  if (!out) {
    for (uint64_t i = lo; i < hi; ++i) dst[i] = valueToEncode<Op, kAvg>(encoding, final, win, ein, src, i, nranks);
    return;
  }
  auto* wout = const_cast<uint16_t*>(encodedWords(encoding, out, n));
  if (in && !src) {  // forwarded: the same bits
    if (encoding == kEncodingFp16) reinterpret_cast<int8_t*>(out)[b] = static_cast<int8_t>(ein);
    for (uint64_t i = lo; i < hi; ++i) {
      wout[i] = win[i];
      if (dst) dst[i] = decodeElement(encoding, win[i], ein);
    }
    return;
  }
  int e = 0;
  if (encoding == kEncodingFp16) {
    float m = 0.0f;
    for (uint64_t i = lo; i < hi; ++i) {
      const float a = fabsf(valueToEncode<Op, kAvg>(encoding, final, win, ein, src, i, nranks));
      if (a <= 3.4028234664e38f && a > m) m = a;
    }
    e = groupExponent(m);
    reinterpret_cast<int8_t*>(out)[b] = static_cast<int8_t>(e);
  }
  for (uint64_t i = lo; i < hi; ++i) {
    const float v = valueToEncode<Op, kAvg>(encoding, final, win, ein, src, i, nranks);
    const uint16_t w = encoding == kEncodingFp16 ? encodeFp16Scaled(v, e) : floatToBf16(v);
    wout[i] = w;
    if (dst) dst[i] = decodeElement(encoding, w, e);
  }
}

template <typename Op, bool kAvg>
COLL_HD inline void encodedSliceTyped(unsigned tid, unsigned nt, uint8_t encoding, bool final, const char* in,
                                      const float* src, float* dst, char* out, uint64_t n, int nranks) {
  for (uint64_t b = tid; b < compressGroups(n); b += nt)
    encodedGroup<Op, kAvg>(encoding, final, in, src, dst, out, n, b, nranks);
}

// Thread tid of nt's share of a compressed slice of n elements: whole groups, so one
// thread finds a group's exponent.
COLL_HD inline void encodedSliceHd(unsigned tid, unsigned nt, uint8_t flags, uint8_t encoding, uint8_t redop,
                                   const char* in, const float* src, float* dst, char* out, uint64_t n, int nranks) {
  const bool final = flags & kFinal;
  withRedOp(redop, [&](auto op, auto avg) {
    encodedSliceTyped<decltype(op), decltype(avg)::value>(tid, nt, encoding, final, in, src, dst, out, n, nranks);
  });
}

}  // namespace slice
}  // namespace coll

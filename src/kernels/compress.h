// The encodings of compressed collectives (fp32 values carried in 16 bits), for the host
// and the device alike (COLL_HD: the same bits on both).
//
// fp16, group-scaled: elements go in groups of kCompressGroup, each with one power-of-two
// exponent e (int8). An element is stored as fp16(x * 2^-e), rounded to nearest even, with
// e chosen from the group's largest finite magnitude m so that m * 2^-e lies in
// [2^14, 2^15) (or just below 2^14 where it would round up to 2^15: then decoding and
// encoding again gives the same bits): no finite input overflows fp16, and every element
// keeps an absolute error of at most 2^-11 * 2^floor(log2 m) <= 2^-11 * m, whatever the
// magnitude of the group. e stays within [-126, 114], so groups of values below 2^-112
// lose precision (they are scaled by 2^126 at most). Infinities and NaN are stored unscaled as fp16 infinity and
// NaN; an all-zero or all-non-finite group has e = 0. A finite input never decodes to an
// infinity: in the top binade of fp32 (m >= 2^127) a value that would round up to 2^128
// rounds down instead, so there the bound is one ulp, 2^-10 * 2^127.
//
// bf16: round to nearest even (float_conv.h), no scale: relative error at most 2^-8.
//
// A slice of n fp32 elements once encoded (encodedBytes): fp16 puts the ceil(n / 256) group
// exponents first, padded to 16 bytes so the halves after them stay 16-byte aligned, then
// the n halves; bf16 is the n words alone.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/float_conv.h"

namespace coll {

constexpr size_t kCompressGroup = 256;

// What a step carries in its slots (Step::encoding, DeviceStep::encoding): the caller's elements
// (fp32 when compressed) or their 16-bit encoding.
enum Encoding : uint8_t { kEncodingNone = 0, kEncodingFp16 = 1, kEncodingBf16 = 2 };

COLL_HD inline uint64_t compressGroups(uint64_t n) { return (n + kCompressGroup - 1) / kCompressGroup; }

// Bytes of the exponents ahead of the halves of an fp16 slice of n elements.
COLL_HD inline uint64_t encodedHeaderBytes(uint8_t encoding, uint64_t n) {
  return encoding == kEncodingFp16 ? (compressGroups(n) + 15) / 16 * 16 : 0;
}

// Encoded bytes of a slice of n elements (n * 4 when not compressed).
COLL_HD inline uint64_t encodedBytes(uint8_t encoding, uint64_t n) {
  return encoding == kEncodingNone ? n * 4 : encodedHeaderBytes(encoding, n) + 2 * n;
}

// The caller's bytes of the largest slice whose encoded form fits a slot of slotBytes: whole
// groups when a group fits, a multiple of 16 bytes otherwise (slotBytes itself when not
// compressed).
COLL_HD inline uint64_t sliceBytesFor(uint8_t encoding, uint64_t slotBytes) {
  if (encoding == kEncodingNone) return slotBytes;
  uint64_t n = slotBytes / 2 / 4 * 4;  // bf16, and the first guess for fp16
  if (encoding == kEncodingFp16) {
    n = (slotBytes > 16 ? slotBytes - 16 : 0) / 2 / 4 * 4;
    if (n >= kCompressGroup) n = n / kCompressGroup * kCompressGroup;
    while (n > kCompressGroup && encodedBytes(encoding, n) > slotBytes) n -= kCompressGroup;
  }
  return n * 4;
}

// 2^e as a float, for e in [-126, 127].
COLL_HD inline float pow2f(int e) { return bitsFloat(static_cast<uint32_t>(127 + e) << 23); }

// The exponent of a group whose largest finite magnitude is m (0 when m is 0).
COLL_HD inline int8_t groupExponent(float m) {
  if (!(m > 0.0f)) return 0;
  uint32_t bits = floatBits(m);
  int biased = static_cast<int>((bits >> 23) & 0xffu);
  if (biased == 0) biased = static_cast<int>((floatBits(m * 0x1p64f) >> 23) & 0xffu) - 64;  // subnormal
  const int floorLog2 = biased - 127;
  int e = floorLog2 - 14;
  if (e < -126) return -126;
  // m that rounds up to 2^15 takes the next exponent: then decoded values encode again to
  // the same bits (a rank re-sending a result it decoded sends what it received).
  if (floatToHalf(m * pow2f(-e)) == 0x7800u) ++e;
  return static_cast<int8_t>(e);
}

// The largest finite magnitude among x[0, n) (0 when there is none).
COLL_HD inline float maxFiniteMagnitude(const float* x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float a = fabsf(x[i]);
    if (a <= 3.4028234664e38f && a > m) m = a;  // NaN and infinity compare false
  }
  return m;
}

// One element of a group of exponent e.
COLL_HD inline uint16_t encodeFp16Scaled(float x, int e) {
  const uint32_t abs = floatBits(x) & 0x7fffffffu;
  if (abs >= 0x7f800000u) return floatToHalf(x);  // infinity and NaN, unscaled
  uint16_t h = floatToHalf(x * pow2f(-e));
  // Only the top binade of fp32 can round up to 2^128 on decoding: step down instead.
  if (e > 110 && (h & 0x7fffu) != 0 && !(fabsf(halfToFloat(h) * pow2f(e)) <= 3.4028234664e38f))
    h = static_cast<uint16_t>(h - 1);
  return h;
}

COLL_HD inline float decodeFp16Scaled(uint16_t h, int e) {
  if ((h & 0x7c00u) == 0x7c00u) return halfToFloat(h);  // infinity and NaN
#if defined(__CUDA_ARCH__)
  return __fmul_rn(halfToFloat(h), pow2f(e));  // never contracted into a caller's addition
#else
  return halfToFloat(h) * pow2f(e);
#endif
}

// Encodes x[0, n) (n <= kCompressGroup) as one group: its exponent and n fp16 words.
COLL_HD inline int8_t encodeFp16Group(const float* x, size_t n, uint16_t* out) {
  const int8_t e = groupExponent(maxFiniteMagnitude(x, n));
  for (size_t i = 0; i < n; ++i) out[i] = encodeFp16Scaled(x[i], e);
  return e;
}

COLL_HD inline void decodeFp16Group(const uint16_t* in, size_t n, int8_t e, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = decodeFp16Scaled(in[i], e);
}

}  // namespace coll

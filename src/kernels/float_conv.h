// Conversions between float32 and the narrow floating types: fp16 (IEEE binary16),
// bf16, fp8 e4m3 (OCP "FN": no infinity, one NaN per sign, max 448) and fp8 e5m2.
// Narrowing rounds to nearest, ties to even, for every input: subnormals, infinities
// and NaN included. fp16 and bf16 overflow to infinity; fp8 saturates to the largest
// finite value (CUDA's __NV_SATFINITE, which device reductions use), so host and device
// agree. NaN stays NaN (quiet, sign kept).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// Every conversion is also device code when compiled by nvcc (kernels/device_reduce.cu),
// so host and device round alike, bit for bit.
#if defined(__CUDACC__)
#define COLL_HD __host__ __device__
#else
#define COLL_HD
#endif

namespace coll {

COLL_HD inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
COLL_HD inline float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// The quiet NaN that sums, products and averages store when their result is NaN
// (reduce_ops.h canonicalNaN): fp32 0x7fc00000, fp64 0x7ff8000000000000.
COLL_HD inline float quietNaNFloat() { return bitsFloat(0x7fc00000u); }
COLL_HD inline double quietNaNDouble() {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(0x7ff8000000000000ll);
#else
  const uint64_t u = 0x7ff8000000000000ull;
  double d;
  std::memcpy(&d, &u, 8);
  return d;
#endif
}

// ---- fp16 ----
COLL_HD inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return bitsFloat(sign);
    // Subnormal: value = mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

COLL_HD inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {
    // Result is subnormal (or zero): quantum 2^-24. Add and subtract a magic value so the
    // FPU does the round-to-nearest-even in float.
    float a = bitsFloat(absx);
    float r = a + 0.5f;  // 0.5 = 2^-1; ulp(0.5) = 2^-24: aligns the rounding point
    uint32_t m = floatBits(r) - floatBits(0.5f);
    return static_cast<uint16_t>(sign | m);
  }
  // Normal: round the 13 dropped bits to nearest even.
  uint32_t mantOdd = (absx >> 13) & 1u;
  absx += 0xfffu + mantOdd;
  absx -= 0x38000000u;  // rebias 127 -> 15 (112 << 23)
  return static_cast<uint16_t>(sign | (absx >> 13));
}

// ---- bf16 ----
COLL_HD inline float bf16ToFloat(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }
COLL_HD inline uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

// ---- fp8 ----
// Generic narrow format with E exponent bits and M mantissa bits.
template <int E, int M, bool kHasInf>
struct Fp8Format {
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr int kMaxExpField = kHasInf ? (1 << E) - 2 : (1 << E) - 1;
  static constexpr int kMaxMantAtMaxExp = kHasInf ? (1 << M) - 1 : (1 << M) - 2;
  static constexpr uint8_t kNaN = kHasInf ? static_cast<uint8_t>(((1 << E) - 1) << M | 2)
                                          : static_cast<uint8_t>((1 << (E + M)) - 1);
  static constexpr uint8_t kMaxFinite = static_cast<uint8_t>(kMaxExpField << M | kMaxMantAtMaxExp);

  // Exact decode of every code (used to build the table and by tests).
  COLL_HD static float decodeSlow(uint8_t v) {
    int sign = v >> (E + M);
    int exp = (v >> M) & ((1 << E) - 1);
    int mant = v & ((1 << M) - 1);
    float r;
    if (kHasInf && exp == (1 << E) - 1) {
      r = mant ? bitsFloat(0x7fc00000u) : bitsFloat(0x7f800000u);
    } else if (!kHasInf && exp == (1 << E) - 1 && mant == (1 << M) - 1) {
      r = bitsFloat(0x7fc00000u);
    } else if (exp == 0) {
      r = ldexpf(static_cast<float>(mant), 1 - kBias - M);
    } else {
      r = ldexpf(static_cast<float>(mant + (1 << M)), exp - kBias - M);
    }
    return sign ? -r : r;
  }

  COLL_HD static float toFloat(uint8_t v) {
#if defined(__CUDA_ARCH__)
    return decodeSlow(v);
#else
    static const struct Table {
      float v[256];
      Table() {
        for (int i = 0; i < 256; ++i) v[i] = decodeSlow(static_cast<uint8_t>(i));
      }
    } table;
    return table.v[v];
#endif
  }

  // Round to nearest even on the float's bits, as floatToHalf does: the dropped mantissa
  // bits are rounded in integer arithmetic in the normal range, and by the FPU (adding a
  // constant whose ulp is the format's quantum) in the subnormal range.
  COLL_HD static uint8_t fromFloat(float f) {
    constexpr int kShift = 23 - M;
    constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
    constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << M;
    uint32_t x = floatBits(f);
    uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80);
    uint32_t absx = x & 0x7fffffffu;
    if (absx > 0x7f800000u) return sign | kNaN;
    // At or beyond twice the largest finite value (infinity included): saturate.
    constexpr uint32_t kHuge = static_cast<uint32_t>(127 + kMaxExpField - kBias + 1) << 23;
    if (absx >= kHuge) return sign | kMaxFinite;
    uint32_t code;
    if (absx < kMinNormalBits) {
      const float magic = bitsFloat(static_cast<uint32_t>(127 + 1 - kBias - M + 23) << 23);
      code = floatBits(bitsFloat(absx) + magic) - floatBits(magic);
    } else {
      absx += (1u << (kShift - 1)) - 1 + ((absx >> kShift) & 1u);
      code = (absx >> kShift) - kRebias;
    }
    if (code > kMaxFinite) code = kMaxFinite;
    return sign | static_cast<uint8_t>(code);
  }
};

using Fp8E4M3 = Fp8Format<4, 3, false>;
using Fp8E5M2 = Fp8Format<5, 2, true>;

}  // namespace coll

#include "kernels/host_compress.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/compress.h"
#include "kernels/float_conv.h"

namespace coll {

namespace {

// ---- portable: the scalar functions of compress.h / float_conv.h ----
int8_t portableEncodeFp16(const float* x, size_t n, uint16_t* out) { return encodeFp16Group(x, n, out); }
void portableDecodeFp16(const uint16_t* in, size_t n, int8_t e, float* out) { decodeFp16Group(in, n, e, out); }
void portableEncodeBf16(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = floatToBf16(x[i]);
}
void portableDecodeBf16(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16ToFloat(in[i]);
}

// decode(in) + src (times 1/nranks when avg) into v, n <= kCompressGroup.
template <typename Decode>
void portableSum(Decode decode, const float* src, size_t n, bool avg, int nranks, float* v) {
  decode(v);
  const float scale = 1.0f / static_cast<float>(nranks);
  for (size_t i = 0; i < n; ++i) v[i] = avg ? (v[i] + src[i]) * scale : v[i] + src[i];
}

int8_t portableSumEncodeFp16(const uint16_t* in, int8_t ein, const float* src, size_t n, bool avg, int nranks,
                             uint16_t* out, float* dst) {
  float v[kCompressGroup];
  portableSum([&](float* to) { decodeFp16Group(in, n, ein, to); }, src, n, avg, nranks, v);
  const int8_t e = encodeFp16Group(v, n, out);
  if (dst) decodeFp16Group(out, n, e, dst);
  return e;
}

void portableSumEncodeBf16(const uint16_t* in, const float* src, size_t n, bool avg, int nranks, uint16_t* out,
                           float* dst) {
  float v[kCompressGroup];
  for (size_t lo = 0; lo < n; lo += kCompressGroup) {
    const size_t k = std::min(kCompressGroup, n - lo);
    portableSum([&](float* to) { portableDecodeBf16(in + lo, k, to); }, src + lo, k, avg, nranks, v);
    portableEncodeBf16(v, k, out + lo);
    if (dst) portableDecodeBf16(out + lo, k, dst + lo);
  }
}

struct Impl {
  int8_t (*encodeFp16)(const float*, size_t, uint16_t*);
  void (*decodeFp16)(const uint16_t*, size_t, int8_t, float*);
  void (*encodeBf16)(const float*, size_t, uint16_t*);
  void (*decodeBf16)(const uint16_t*, size_t, float*);
  int8_t (*sumEncodeFp16)(const uint16_t*, int8_t, const float*, size_t, bool, int, uint16_t*, float*);
  void (*sumEncodeBf16)(const uint16_t*, const float*, size_t, bool, int, uint16_t*, float*);
  const char* name;
};
constexpr Impl kPortable = {portableEncodeFp16,    portableDecodeFp16,    portableEncodeBf16, portableDecodeBf16,
                            portableSumEncodeFp16, portableSumEncodeBf16, "portable"};

#if defined(__x86_64__)
// AVX2 + F16C, 8 elements a step, the rest with the scalar functions. Why the bits match:
// - fp16 encode: x * 2^-e is the same fp32 product as the scalar one, and vcvtps2ph rounds
//   to nearest even like floatToHalf, NaN included (sign | 0x7e00 | top payload bits; the
//   product only quiets a NaN, a bit that result sets anyway; infinity stays infinity). The
//   scalar step-down for the top binade (e > 110) has no vector form: such groups (values
//   >= 2^125) go to the scalar encoder whole.
// - fp16 decode: vcvtph2ps is exact for finite words, but quiets a signalling NaN, which
//   halfToFloat keeps: lanes holding infinity or NaN are rebuilt from their bits, unscaled.
// - bf16: floatToBf16's integer arithmetic, lane by lane.
// (AVX types only cross always-inlined functions: no ABI change for other callers.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#define COLL_AVX2 __attribute__((target("avx2,f16c")))
#define COLL_AVX2_INLINE __attribute__((target("avx2,f16c"), always_inline)) static inline

COLL_AVX2_INLINE float horizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

// |x| where finite, else 0.
COLL_AVX2_INLINE __m256 finiteMagnitude(const float* x) {
  const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  return _mm256_and_ps(a, _mm256_cmp_ps(a, _mm256_set1_ps(3.4028234664e38f), _CMP_LE_OQ));
}

// == maxFiniteMagnitude; four accumulators hide the latency of max.
COLL_AVX2_INLINE float maxFiniteAvx2(const float* x, size_t n) {
  __m256 m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(m0, finiteMagnitude(x + i));
    m1 = _mm256_max_ps(m1, finiteMagnitude(x + i + 8));
    m2 = _mm256_max_ps(m2, finiteMagnitude(x + i + 16));
    m3 = _mm256_max_ps(m3, finiteMagnitude(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, finiteMagnitude(x + i));
  const float m = horizontalMax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  return std::max(m, maxFiniteMagnitude(x + i, n - i));
}

COLL_AVX2 int8_t avx2EncodeFp16(const float* x, size_t n, uint16_t* out) {
  const int8_t e = groupExponent(maxFiniteAvx2(x, n));
  if (e > 110) return encodeFp16Group(x, n, out);  // the top binade's step-down: scalar
  const __m256 scale = _mm256_set1_ps(pow2f(-e));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = encodeFp16Scaled(x[i], e);
  return e;
}

// halfToFloat of words that are infinity or NaN: sign, all-ones exponent, payload << 13.
COLL_AVX2_INLINE __m256 nonFiniteHalfToFloat(__m128i h) {
  const __m256i w = _mm256_cvtepu16_epi32(h);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16);
  const __m256i rest = _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7fff)), 13);
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_or_si256(sign, rest), _mm256_set1_epi32(0x70000000)));
}

COLL_AVX2 void avx2DecodeFp16(const uint16_t* in, size_t n, int8_t e, float* out) {
  const __m256 scale = _mm256_set1_ps(pow2f(e));
  const __m128i expMask = _mm_set1_epi16(0x7c00);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), scale);
    const __m128i nonFinite = _mm_cmpeq_epi16(_mm_and_si128(h, expMask), expMask);
    if (!_mm_testz_si128(nonFinite, nonFinite))
      v = _mm256_blendv_ps(v, nonFiniteHalfToFloat(h), _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nonFinite)));
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < n; ++i) out[i] = decodeFp16Scaled(in[i], e);
}

// floatToBf16 of 8 floats, each in the low half of its lane.
COLL_AVX2_INLINE __m256i floatToBf16Avx2(__m256i x) {
  const __m256i high = _mm256_srli_epi32(x, 16);
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
  const __m256i quietNan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
  const __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i isNan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));  // both non-negative
  return _mm256_blendv_epi8(rounded, quietNan, isNan);
}

COLL_AVX2 void avx2EncodeBf16(const float* x, size_t n, uint16_t* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = floatToBf16Avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m256i b = floatToBf16Avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256i a = floatToBf16Avx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  portableEncodeBf16(x + i, n - i, out + i);
}

COLL_AVX2 void avx2DecodeBf16(const uint16_t* in, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(w, 16));
  }
  portableDecodeBf16(in + i, n - i, out + i);
}
// The fused hop (hostSumEncodeFp16Group): one pass decodes, adds and finds the group's
// largest finite magnitude, keeping v in cache; a second encodes it and decodes the
// words just made into dst. Decoding needs no repair of non-finite lanes: a signalling
// NaN is quieted by the addition in either order of work, and the words written here
// are never signalling.
COLL_AVX2 int8_t avx2SumEncodeFp16(const uint16_t* in, int8_t ein, const float* src, size_t n, bool avg, int nranks,
                                   uint16_t* out, float* dst) {
  alignas(32) float v[kCompressGroup];
  const __m256 inScale = _mm256_set1_ps(pow2f(ein)), avgScale = _mm256_set1_ps(1.0f / static_cast<float>(nranks));
  const __m256 absMask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), big = _mm256_set1_ps(3.4028234664e38f);
  __m256 m = _mm256_setzero_ps();
  const size_t n8 = n / 8 * 8;
  for (size_t i = 0; i < n8; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    __m256 x = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtph_ps(h), inScale), _mm256_loadu_ps(src + i));
    if (avg) x = _mm256_mul_ps(x, avgScale);
    _mm256_store_ps(v + i, x);
    const __m256 a = _mm256_and_ps(x, absMask);
    m = _mm256_max_ps(m, _mm256_and_ps(a, _mm256_cmp_ps(a, big, _CMP_LE_OQ)));
  }
  const float scale = 1.0f / static_cast<float>(nranks);
  for (size_t i = n8; i < n; ++i)
    v[i] = avg ? (decodeFp16Scaled(in[i], ein) + src[i]) * scale : decodeFp16Scaled(in[i], ein) + src[i];
  const int8_t e = groupExponent(std::max(horizontalMax(m), maxFiniteMagnitude(v + n8, n - n8)));
  if (e > 110) {  // the top binade: scalar, as avx2EncodeFp16
    encodeFp16Group(v, n, out);
    if (dst) decodeFp16Group(out, n, e, dst);
    return e;
  }
  const __m256 down = _mm256_set1_ps(pow2f(-e)), up = _mm256_set1_ps(pow2f(e));
  for (size_t i = 0; i < n8; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_load_ps(v + i), down), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    if (dst) _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(h), up));
  }
  for (size_t i = n8; i < n; ++i) {
    out[i] = encodeFp16Scaled(v[i], e);
    if (dst) dst[i] = decodeFp16Scaled(out[i], e);
  }
  return e;
}

// bf16 in one pass: widen, add, round (floatToBf16Avx2), and the rounded value into dst.
COLL_AVX2 void avx2SumEncodeBf16(const uint16_t* in, const float* src, size_t n, bool avg, int nranks, uint16_t* out,
                                 float* dst) {
  const __m256 avgScale = _mm256_set1_ps(1.0f / static_cast<float>(nranks));
  const size_t n8 = n / 8 * 8;
  for (size_t i = 0; i < n8; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    __m256 x = _mm256_add_ps(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), _mm256_loadu_ps(src + i));
    if (avg) x = _mm256_mul_ps(x, avgScale);
    const __m256i b = floatToBf16Avx2(_mm256_castps_si256(x));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
    if (dst) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(b, 16));
  }
  if (n8 < n) portableSumEncodeBf16(in + n8, src + n8, n - n8, avg, nranks, out + n8, dst ? dst + n8 : nullptr);
}
#pragma GCC diagnostic pop

constexpr Impl kAvx2 = {avx2EncodeFp16,    avx2DecodeFp16,    avx2EncodeBf16, avx2DecodeBf16,
                        avx2SumEncodeFp16, avx2SumEncodeBf16, "avx2+f16c"};
#endif

// Chosen once, at the first call.
const Impl& impl() {
  static const Impl chosen = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();  // safe even when first called from a static initialiser
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return kAvx2;
#endif
    return kPortable;
  }();
  return chosen;
}

}  // namespace

int8_t hostEncodeFp16Group(const float* x, size_t n, uint16_t* out) { return impl().encodeFp16(x, n, out); }
void hostDecodeFp16Group(const uint16_t* in, size_t n, int8_t e, float* out) { impl().decodeFp16(in, n, e, out); }
void hostEncodeBf16(const float* x, size_t n, uint16_t* out) { impl().encodeBf16(x, n, out); }
void hostDecodeBf16(const uint16_t* in, size_t n, float* out) { impl().decodeBf16(in, n, out); }
int8_t hostSumEncodeFp16Group(const uint16_t* in, int8_t ein, const float* src, size_t n, bool avg, int nranks,
                              uint16_t* out, float* dst) {
  return impl().sumEncodeFp16(in, ein, src, n, avg, nranks, out, dst);
}
void hostSumEncodeBf16(const uint16_t* in, const float* src, size_t n, bool avg, int nranks, uint16_t* out,
                       float* dst) {
  impl().sumEncodeBf16(in, src, n, avg, nranks, out, dst);
}
const char* hostCompressVariant() { return impl().name; }

}  // namespace coll

#include "kernels/host_reduce.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/float_conv.h"
#include "kernels/host_copy.h"
#include "kernels/reduce_ops.h"

namespace coll {

namespace {

// Element i of a buffer of T. The caller's buffers need not be aligned to T (NCCL takes
// any address; launch_hosts_trees runs buffers at page offset 4095), and a T access at a
// misaligned address is undefined: elements move through memcpy, which compiles to the
// same (unaligned, vectorizable) loads and stores.
template <typename T>
T loadAt(const char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
void storeAt(char* p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

template <typename T, typename Op>
void reduceImpl(void* dst, const void* a, const void* b, size_t n) {
  char* __restrict d = static_cast<char*>(dst);
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  for (size_t i = 0; i < n; ++i)
    storeAt(d, i, Elem<T>::store(Op::apply(Elem<T>::load(loadAt<T>(x, i)), Elem<T>::load(loadAt<T>(y, i)))));
}

template <typename T>
void avgFinalImpl(void* dst, const void* a, const void* b, size_t n, int nranks) {
  char* d = static_cast<char*>(dst);
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  for (size_t i = 0; i < n; ++i)
    storeAt(d, i,
            Elem<T>::store(avgOf<T>(wrapAdd(Elem<T>::load(loadAt<T>(x, i)), Elem<T>::load(loadAt<T>(y, i))), nranks)));
}

template <typename T>
void avgScaleImpl(void* dst, const void* src, size_t n, int nranks) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (size_t i = 0; i < n; ++i) storeAt(d, i, Elem<T>::store(avgOf<T>(Elem<T>::load(loadAt<T>(s, i)), nranks)));
}

template <typename T, typename Op>
void finalImpl(void* dst, const void* a, const void* b, size_t n, int) {
  reduceImpl<T, Op>(dst, a, b, n);
}

template <typename T>
void copyScale(void* dst, const void* src, size_t n, int) {
  if (dst == src) return;
  const auto s = reinterpret_cast<uintptr_t>(src), d = reinterpret_cast<uintptr_t>(dst);
  const size_t bytes = n * sizeof(T);
  if (d < s + bytes && s < d + bytes) std::memmove(dst, src, bytes);  // overlapping
  else hostCopy(dst, src, bytes);
}

// The kernels of `op` for element type T from a family of implementations: Family::reduce<Op>
// and Family::final<Op> combine two inputs, Family::avgFinal ends an average. An op
// withRedOp does not know leaves them null (hostReduceKernels is only asked for valid ops).
template <typename T, typename Family>
ReduceKernels kernelsOf(collRedOp_t op) {
  ReduceKernels k{};
  withRedOp(op, [&](auto o, auto avg) {
    using Op = decltype(o);
    if constexpr (decltype(avg)::value) k = {Family::template reduce<OpSum>, Family::avgFinal, avgScaleImpl<T>};
    else k = {Family::template reduce<Op>, Family::template final<Op>, copyScale<T>};
  });
  return k;
}

// The portable loops, every type.
template <typename T>
struct Portable {
  template <typename Op>
  static constexpr ReduceFn reduce = reduceImpl<T, Op>;
  template <typename Op>
  static constexpr FinalFn final = finalImpl<T, Op>;
  static constexpr FinalFn avgFinal = avgFinalImpl<T>;
};

// fp8: a result depends only on the two 8-bit inputs, so sum/prod/max/min are one
// lookup in a 256x256 table built once from the scalar path (bit-identical to it).
template <typename T, typename Op>
void fp8TableReduce(void* dst, const void* a, const void* b, size_t n) {
  static const std::array<uint8_t, 65536> kTable = [] {
    std::array<uint8_t, 65536> t{};
    for (int x = 0; x < 256; ++x)
      for (int y = 0; y < 256; ++y) {
        T tx{static_cast<uint8_t>(x)}, ty{static_cast<uint8_t>(y)}, r;
        reduceImpl<T, Op>(&r, &tx, &ty, 1);
        t[x << 8 | y] = r.v;
      }
    return t;
  }();
  auto* d = static_cast<uint8_t*>(dst);
  auto* x = static_cast<const uint8_t*>(a);
  auto* y = static_cast<const uint8_t*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = kTable[static_cast<size_t>(x[i]) << 8 | y[i]];
}
template <typename T, typename Op>
void fp8TableFinal(void* dst, const void* a, const void* b, size_t n, int) {
  fp8TableReduce<T, Op>(dst, a, b, n);
}

// fp8 through the 64K-entry tables (an average ends as the portable one does).
template <typename T>
struct Fp8Tables : Portable<T> {
  template <typename Op>
  static constexpr ReduceFn reduce = fp8TableReduce<T, Op>;
  template <typename Op>
  static constexpr FinalFn final = fp8TableFinal<T, Op>;
};

#if defined(__x86_64__)
// fp16 with F16C: 8 elements per conversion instruction, rounding to nearest even like
// floatToHalf (NaN, overflow and subnormals included); chosen at run time when the CPU
// has it. The scalar tail and machines without F16C use the portable code.
// (AVX types only cross always-inlined AVX functions: no ABI change for other callers.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#define COLL_AVX_INLINE __attribute__((target("avx,f16c"), always_inline)) static inline
struct VSum {
  COLL_AVX_INLINE __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
struct VProd {
  COLL_AVX_INLINE __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
};
// Same NaN behaviour as the scalar ops: max(a, b) = b > a ? b : a.
struct VMax {
  COLL_AVX_INLINE __m256 apply(__m256 a, __m256 b) { return _mm256_max_ps(b, a); }
};
struct VMin {
  COLL_AVX_INLINE __m256 apply(__m256 a, __m256 b) { return _mm256_min_ps(b, a); }
};
#pragma GCC diagnostic pop

template <typename V, typename Op, bool kAvg>
__attribute__((target("avx,f16c"))) void halfF16c(void* dst, const void* a, const void* b, size_t n, int nranks) {
  auto* d = static_cast<uint16_t*>(dst);
  auto* x = static_cast<const uint16_t*>(a);
  auto* y = static_cast<const uint16_t*>(b);
  const __m256 scale = _mm256_set1_ps(1.0f / static_cast<float>(nranks));
  const __m256 qnan = _mm256_set1_ps(quietNaNFloat());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 fx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    __m256 fy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    __m256 r = V::apply(fx, fy);
    if (kAvg) r = _mm256_mul_ps(r, scale);
    if constexpr (!std::is_same_v<V, VMax> && !std::is_same_v<V, VMin>)  // NaN results: canonicalNaN
      r = _mm256_blendv_ps(r, qnan, _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {
    if (kAvg) avgFinalImpl<Half>(d + i, x + i, y + i, n - i, nranks);
    else reduceImpl<Half, Op>(d + i, x + i, y + i, n - i);
  }
}

template <typename V, typename Op>
void halfF16cReduce(void* dst, const void* a, const void* b, size_t n) {
  halfF16c<V, Op, false>(dst, a, b, n, 1);
}
template <typename V, typename Op>
void halfF16cFinal(void* dst, const void* a, const void* b, size_t n, int) {
  halfF16c<V, Op, false>(dst, a, b, n, 1);
}
void halfF16cAvg(void* dst, const void* a, const void* b, size_t n, int nranks) {
  halfF16c<VSum, OpSum, true>(dst, a, b, n, nranks);
}

// The AVX functor of each scalar one.
template <typename Op>
using VectorOf = std::conditional_t<
    std::is_same_v<Op, OpSum>, VSum,
    std::conditional_t<std::is_same_v<Op, OpProd>, VProd, std::conditional_t<std::is_same_v<Op, OpMax>, VMax, VMin>>>;

struct HalfF16c {
  template <typename Op>
  static constexpr ReduceFn reduce = halfF16cReduce<VectorOf<Op>, Op>;
  template <typename Op>
  static constexpr FinalFn final = halfF16cFinal<VectorOf<Op>, Op>;
  static constexpr FinalFn avgFinal = halfF16cAvg;
};
#endif

template <typename T>
constexpr auto row() {
  return std::array<ReduceKernels, collNumOps>{kernelsOf<T, Portable<T>>(collSum), kernelsOf<T, Portable<T>>(collProd),
                                               kernelsOf<T, Portable<T>>(collMax), kernelsOf<T, Portable<T>>(collMin),
                                               kernelsOf<T, Portable<T>>(collAvg)};
}

}  // namespace

const ReduceKernels& hostReduceKernels(collDataType_t type, collRedOp_t op) {
  static const std::array<std::array<ReduceKernels, collNumOps>, collNumTypes> kTable = [] {
    std::array<std::array<ReduceKernels, collNumOps>, collNumTypes> t = {
        row<int8_t>(), row<uint8_t>(), row<int32_t>(), row<uint32_t>(), row<int64_t>(), row<uint64_t>(),
        row<Half>(),   row<float>(),   row<double>(),  row<Bf16>(),     row<E4M3>(),    row<E5M2>()};
    for (int o = 0; o < collNumOps; ++o) {
      t[collFloat8e4m3][o] = kernelsOf<E4M3, Fp8Tables<E4M3>>(static_cast<collRedOp_t>(o));
      t[collFloat8e5m2][o] = kernelsOf<E5M2, Fp8Tables<E5M2>>(static_cast<collRedOp_t>(o));
    }
#if defined(__x86_64__)
    if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx"))
      for (int o = 0; o < collNumOps; ++o) t[collFloat16][o] = kernelsOf<Half, HalfF16c>(static_cast<collRedOp_t>(o));
#endif
    return t;
  }();
  return kTable[type][op];
}

const char* hostReduceVariant(collDataType_t type) {
#if defined(__x86_64__)
  if (type == collFloat16 && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx")) return "f16c";
#endif
  (void)type;
  return "portable";
}

}  // namespace coll

#include "kernels/host_reduce.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/float_conv.h"

namespace coll {

namespace {

// Storage type T and how it maps to the computing type C.
template <typename T>
struct Elem {
  using C = T;
  static C load(T v) { return v; }
  static T store(C v) { return v; }
};

struct Half { uint16_t v; };
struct Bf16 { uint16_t v; };
struct E4M3 { uint8_t v; };
struct E5M2 { uint8_t v; };

template <> struct Elem<Half> {
  using C = float;
  static C load(Half h) { return halfToFloat(h.v); }
  static Half store(C f) { return {floatToHalf(f)}; }
};
template <> struct Elem<Bf16> {
  using C = float;
  static C load(Bf16 h) { return bf16ToFloat(h.v); }
  static Bf16 store(C f) { return {floatToBf16(f)}; }
};
template <> struct Elem<E4M3> {
  using C = float;
  static C load(E4M3 h) { return Fp8E4M3::toFloat(h.v); }
  static E4M3 store(C f) { return {Fp8E4M3::fromFloat(f)}; }
};
template <> struct Elem<E5M2> {
  using C = float;
  static C load(E5M2 h) { return Fp8E5M2::toFloat(h.v); }
  static E5M2 store(C f) { return {Fp8E5M2::fromFloat(f)}; }
};

// Integer arithmetic that wraps: do it in the unsigned type of the same width, so signed
// overflow is defined, and small types do not promote past their width.
template <typename C>
C wrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename C>
C wrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // Promote to at least unsigned int so uint16-style promotion to int cannot overflow.
    using U = std::make_unsigned_t<C>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<C>(static_cast<U>(static_cast<W>(static_cast<U>(a)) *
                                         static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

struct OpSum { template <typename C> static C apply(C a, C b) { return wrapAdd(a, b); } };
struct OpProd { template <typename C> static C apply(C a, C b) { return wrapMul(a, b); } };
struct OpMax { template <typename C> static C apply(C a, C b) { return b > a ? b : a; } };
struct OpMin { template <typename C> static C apply(C a, C b) { return b < a ? b : a; } };

template <typename T, typename Op>
void reduceImpl(void* dst, const void* a, const void* b, size_t n) {
  T* __restrict d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i)
    d[i] = Elem<T>::store(Op::apply(Elem<T>::load(x[i]), Elem<T>::load(y[i])));
}

template <typename T>
typename Elem<T>::C avgOf(typename Elem<T>::C sum, int nranks) {
  using C = typename Elem<T>::C;
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(sum / static_cast<C>(nranks));  // C++ truncates toward zero
  } else {
    return sum * (static_cast<C>(1) / static_cast<C>(nranks));
  }
}

template <typename T>
void avgFinalImpl(void* dst, const void* a, const void* b, size_t n, int nranks) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i)
    d[i] = Elem<T>::store(avgOf<T>(wrapAdd(Elem<T>::load(x[i]), Elem<T>::load(y[i])), nranks));
}

template <typename T>
void avgScaleImpl(void* dst, const void* src, size_t n, int nranks) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = Elem<T>::store(avgOf<T>(Elem<T>::load(s[i]), nranks));
}

template <typename T, typename Op>
void finalImpl(void* dst, const void* a, const void* b, size_t n, int) {
  reduceImpl<T, Op>(dst, a, b, n);
}

template <typename T>
void copyScale(void* dst, const void* src, size_t n, int) {
  if (dst != src) std::memmove(dst, src, n * sizeof(T));
}

template <typename T>
constexpr ReduceKernels kernelsFor(collRedOp_t op) {
  switch (op) {
    case collSum: return {reduceImpl<T, OpSum>, finalImpl<T, OpSum>, copyScale<T>};
    case collProd: return {reduceImpl<T, OpProd>, finalImpl<T, OpProd>, copyScale<T>};
    case collMax: return {reduceImpl<T, OpMax>, finalImpl<T, OpMax>, copyScale<T>};
    case collMin: return {reduceImpl<T, OpMin>, finalImpl<T, OpMin>, copyScale<T>};
    default: return {reduceImpl<T, OpSum>, avgFinalImpl<T>, avgScaleImpl<T>};
  }
}

template <typename T>
constexpr auto row() {
  return std::array<ReduceKernels, collNumOps>{kernelsFor<T>(collSum), kernelsFor<T>(collProd),
                                               kernelsFor<T>(collMax), kernelsFor<T>(collMin),
                                               kernelsFor<T>(collAvg)};
}

}  // namespace

const ReduceKernels& hostReduceKernels(collDataType_t type, collRedOp_t op) {
  static const std::array<std::array<ReduceKernels, collNumOps>, collNumTypes> kTable = {
      row<int8_t>(), row<uint8_t>(), row<int32_t>(), row<uint32_t>(),
      row<int64_t>(), row<uint64_t>(), row<Half>(), row<float>(),
      row<double>(), row<Bf16>(), row<E4M3>(), row<E5M2>()};
  return kTable[type][op];
}

void hostCopy(void* dst, const void* src, size_t bytes) {
  if (dst != src) std::memcpy(dst, src, bytes);
}

}  // namespace coll

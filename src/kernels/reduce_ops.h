// Element types and reduction operators shared by the host kernels (host_reduce.cc) and
// the device kernels (device_reduce.cu): one definition, so both compute alike, bit for
// bit. Narrow floats are combined in fp32 and rounded once to nearest even; integers wrap.
#pragma once

#include <cstdint>
#include <type_traits>

#include "collectives/collectives.h"
#include "kernels/float_conv.h"

namespace coll {

// Storage type T and how it maps to the computing type C.
template <typename T>
struct Elem {
  using C = T;
  COLL_HD static C load(T v) { return v; }
  COLL_HD static T store(C v) { return v; }
};

struct Half {
  uint16_t v;
};
struct Bf16 {
  uint16_t v;
};
struct E4M3 {
  uint8_t v;
};
struct E5M2 {
  uint8_t v;
};

template <>
struct Elem<Half> {
  using C = float;
  COLL_HD static C load(Half h) { return halfToFloat(h.v); }
  COLL_HD static Half store(C f) { return {floatToHalf(f)}; }
};
template <>
struct Elem<Bf16> {
  using C = float;
  COLL_HD static C load(Bf16 h) { return bf16ToFloat(h.v); }
  COLL_HD static Bf16 store(C f) { return {floatToBf16(f)}; }
};
template <>
struct Elem<E4M3> {
  using C = float;
  COLL_HD static C load(E4M3 h) { return Fp8E4M3::toFloat(h.v); }
  COLL_HD static E4M3 store(C f) { return {Fp8E4M3::fromFloat(f)}; }
};
template <>
struct Elem<E5M2> {
  using C = float;
  COLL_HD static C load(E5M2 h) { return Fp8E5M2::toFloat(h.v); }
  COLL_HD static E5M2 store(C f) { return {Fp8E5M2::fromFloat(f)}; }
};

// Integer arithmetic that wraps: do it in the unsigned type of the same width, so signed
// overflow is defined, and small types do not promote past their width.
template <typename C>
COLL_HD inline C wrapAdd(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <typename C>
COLL_HD inline C wrapMul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // Promote to at least unsigned int so uint16-style promotion to int cannot overflow.
    using U = std::make_unsigned_t<C>;
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<C>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
  } else {
    return a * b;
  }
}

// Which NaN an arithmetic operation returns is the hardware's choice: x86 returns the
// first NaN operand, quieted, and for inf*0 or inf-inf the negative "indefinite"
// 0xffc00000; NVIDIA GPUs return 0x7fffffff. Sums, products and averages therefore store
// one quiet NaN (quietNaNFloat/Double) whenever their result is NaN, so the host, the
// device and every CPU give the same bits. (An fp16 prod that overflowed to infinity
// and then met a zero differed between an H100 and the host at 4 and 8 ranks.) Max and
// min select an operand, which is the same choice everywhere.
template <typename C>
COLL_HD inline C canonicalNaN(C r) {
  if constexpr (std::is_same_v<C, float>) return r != r ? quietNaNFloat() : r;
  else if constexpr (std::is_same_v<C, double>) return r != r ? quietNaNDouble() : r;
  else return r;
}

struct OpSum {
  template <typename C>
  COLL_HD static C apply(C a, C b) {
    return canonicalNaN(wrapAdd(a, b));
  }
};
struct OpProd {
  template <typename C>
  COLL_HD static C apply(C a, C b) {
    return canonicalNaN(wrapMul(a, b));
  }
};
struct OpMax {
  template <typename C>
  COLL_HD static C apply(C a, C b) {
    return b > a ? b : a;
  }
};
struct OpMin {
  template <typename C>
  COLL_HD static C apply(C a, C b) {
    return b < a ? b : a;
  }
};

template <typename T>
COLL_HD inline typename Elem<T>::C avgOf(typename Elem<T>::C sum, int nranks) {
  using C = typename Elem<T>::C;
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(sum / static_cast<C>(nranks));  // C++ truncates toward zero
  } else {
    return canonicalNaN(sum * (static_cast<C>(1) / static_cast<C>(nranks)));
  }
}

// Calls f(Op{}, avg) with Op the functor combining two values under collRedOp_t `op` and avg a
// std::bool_constant: whether the final step divides by the rank count (Avg combines as a
// sum). False for a value that is no reduction operator: every caller then fails or does
// nothing (the API refused such an op already); none takes it for a sum. One place maps ops.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename F>
COLL_HD inline bool withRedOp(int op, F&& f) {
  switch (op) {
    case collSum: f(OpSum{}, std::false_type{}); return true;
    case collProd: f(OpProd{}, std::false_type{}); return true;
    case collMax: f(OpMax{}, std::false_type{}); return true;
    case collMin: f(OpMin{}, std::false_type{}); return true;
    case collAvg: f(OpSum{}, std::true_type{}); return true;
    default: return false;
  }
}
COLL_HD inline bool knownRedOp(int op) {
  return withRedOp(op, [](auto, auto) {});
}

// Calls f(T{}) with T the storage type of collDataType_t `type` (one place maps types for
// the host and device kernels); false for a value that is no data type.
// (Instantiated with host-only callables too: nvcc's check of the device side is off.)
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <typename F>
COLL_HD inline bool withElemType(int type, F&& f) {
  switch (type) {
    case collInt8: f(int8_t{}); return true;
    case collUint8: f(uint8_t{}); return true;
    case collInt32: f(int32_t{}); return true;
    case collUint32: f(uint32_t{}); return true;
    case collInt64: f(int64_t{}); return true;
    case collUint64: f(uint64_t{}); return true;
    case collFloat16: f(Half{}); return true;
    case collFloat32: f(float{}); return true;
    case collFloat64: f(double{}); return true;
    case collBfloat16: f(Bf16{}); return true;
    case collFloat8e4m3: f(E4M3{}); return true;
    case collFloat8e5m2: f(E5M2{}); return true;
    default: return false;
  }
}

}  // namespace coll

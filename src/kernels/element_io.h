// Reading and writing single elements of any collDataType_t as double (floating types)
// or 64-bit integers: for verification in tests and perf_tests, never on a hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "collectives/collectives.h"
#include "base/datatype.h"
#include "kernels/float_conv.h"

namespace coll {

inline bool isIntegerType(collDataType_t t) { return t <= collUint64; }

// Element i of a buffer of U, at any alignment (perf_tests runs buffers at odd page
// offsets; a U access at a misaligned address is undefined).
template <typename U>
U elementAt(const void* buf, size_t i) {
  U v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(U), sizeof(U));
  return v;
}
template <typename U>
void setElement(void* buf, size_t i, U v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(U), &v, sizeof(U));
}

// Floating types: stores v rounded to nearest even into element i.
inline void storeFloatElement(void* buf, size_t i, collDataType_t t, double v) {
  switch (t) {
    case collFloat16: setElement(buf, i, floatToHalf(static_cast<float>(v))); break;
    case collFloat32: setElement(buf, i, static_cast<float>(v)); break;
    case collFloat64: setElement(buf, i, v); break;
    case collBfloat16: setElement(buf, i, floatToBf16(static_cast<float>(v))); break;
    case collFloat8e4m3: setElement(buf, i, Fp8E4M3::fromFloat(static_cast<float>(v))); break;
    case collFloat8e5m2: setElement(buf, i, Fp8E5M2::fromFloat(static_cast<float>(v))); break;
    default: break;
  }
}

inline double loadFloatElement(const void* buf, size_t i, collDataType_t t) {
  switch (t) {
    case collFloat16: return halfToFloat(elementAt<uint16_t>(buf, i));
    case collFloat32: return elementAt<float>(buf, i);
    case collFloat64: return elementAt<double>(buf, i);
    case collBfloat16: return bf16ToFloat(elementAt<uint16_t>(buf, i));
    case collFloat8e4m3: return Fp8E4M3::toFloat(elementAt<uint8_t>(buf, i));
    case collFloat8e5m2: return Fp8E5M2::toFloat(elementAt<uint8_t>(buf, i));
    default: return 0;
  }
}

// Integer types: the low bytes of v (two's complement), i.e. v modulo 2^width.
inline void storeIntElement(void* buf, size_t i, collDataType_t t, uint64_t v) {
  size_t es = dataTypeSize(t);
  std::memcpy(static_cast<char*>(buf) + i * es, &v, es);  // little-endian
}

}  // namespace coll

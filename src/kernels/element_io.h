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

// Floating types: stores v rounded to nearest even into element i.
inline void storeFloatElement(void* buf, size_t i, collDataType_t t, double v) {
  switch (t) {
    case collFloat16: static_cast<uint16_t*>(buf)[i] = floatToHalf(static_cast<float>(v)); break;
    case collFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case collFloat64: static_cast<double*>(buf)[i] = v; break;
    case collBfloat16: static_cast<uint16_t*>(buf)[i] = floatToBf16(static_cast<float>(v)); break;
    case collFloat8e4m3: static_cast<uint8_t*>(buf)[i] = Fp8E4M3::fromFloat(static_cast<float>(v)); break;
    case collFloat8e5m2: static_cast<uint8_t*>(buf)[i] = Fp8E5M2::fromFloat(static_cast<float>(v)); break;
    default: break;
  }
}

inline double loadFloatElement(const void* buf, size_t i, collDataType_t t) {
  switch (t) {
    case collFloat16: return halfToFloat(static_cast<const uint16_t*>(buf)[i]);
    case collFloat32: return static_cast<const float*>(buf)[i];
    case collFloat64: return static_cast<const double*>(buf)[i];
    case collBfloat16: return bf16ToFloat(static_cast<const uint16_t*>(buf)[i]);
    case collFloat8e4m3: return Fp8E4M3::toFloat(static_cast<const uint8_t*>(buf)[i]);
    case collFloat8e5m2: return Fp8E5M2::toFloat(static_cast<const uint8_t*>(buf)[i]);
    default: return 0;
  }
}

// Integer types: the low bytes of v (two's complement), i.e. v modulo 2^width.
inline void storeIntElement(void* buf, size_t i, collDataType_t t, uint64_t v) {
  size_t es = dataTypeSize(t);
  std::memcpy(static_cast<char*>(buf) + i * es, &v, es);  // little-endian
}

}  // namespace coll

// Element sizes and names of the public data types and reduction operations.
#pragma once

#include <cstddef>

#include "collectives/collectives.h"

namespace coll {

inline bool validDataType(int t) { return t >= 0 && t < collNumTypes; }
inline bool validRedOp(int op) { return op >= 0 && op < collNumOps; }

inline size_t dataTypeSize(collDataType_t t) {
  switch (t) {
    case collInt8:
    case collUint8:
    case collFloat8e4m3:
    case collFloat8e5m2: return 1;
    case collFloat16:
    case collBfloat16: return 2;
    case collInt32:
    case collUint32:
    case collFloat32: return 4;
    case collInt64:
    case collUint64:
    case collFloat64: return 8;
    default: return 0;
  }
}

inline const char* dataTypeName(collDataType_t t) {
  static const char* kNames[] = {"int8",    "uint8",   "int32",   "uint32",   "int64",    "uint64",
                                 "float16", "float32", "float64", "bfloat16", "fp8_e4m3", "fp8_e5m2"};
  return validDataType(t) ? kNames[t] : "invalid";
}

inline const char* redOpName(collRedOp_t op) {
  static const char* kNames[] = {"sum", "prod", "max", "min", "avg"};
  return validRedOp(op) ? kNames[op] : "invalid";
}

}  // namespace coll

// Host reduce and copy primitives used by the host executor.
//
// A ReduceFn computes dst[i] = op(a[i], b[i]) for i < n elements; dst may alias a or b.
// A FinalFn does the same and then applies the op's post-step: for Avg, the sum divided
// by nranks (integers, truncating toward zero) or scaled by 1/nranks (floating types,
// in fp32 for the narrow types, one rounding). For every other op FinalFn == ReduceFn.
// Narrow floats (fp16, bf16, fp8) are widened to fp32, combined, and rounded to nearest
// even; integers wrap.
#pragma once

#include <cstddef>

#include "collectives/collectives.h"

namespace coll {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t n);
using FinalFn = void (*)(void* dst, const void* a, const void* b, size_t n, int nranks);
using ScaleFn = void (*)(void* dst, const void* src, size_t n, int nranks);

struct ReduceKernels {
  ReduceFn reduce;
  FinalFn final;
  ScaleFn scale;  // dst = postop(src): Avg of one contribution (single rank); else copy
};

// Kernels for (datatype, op); both must be valid.
const ReduceKernels& hostReduceKernels(collDataType_t type, collRedOp_t op);

// Whether op(a, b) and op(b, a) have the same bits for every a and b of type: sums,
// products and averages (NaN results are one canonical NaN), and every built-in op on
// integers; not floating min and max (-0 against +0, and which NaN comes out).
inline bool orderFree(collDataType_t type, collRedOp_t op) {
  switch (op) {
    case collSum:
    case collProd:
    case collAvg: return true;
    case collMin:
    case collMax: return type <= collUint64;  // the integer types come first
    default: return false;
  }
}

// Which implementation serves `type` on this CPU ("f16c", "portable"): for tests/logs.
const char* hostReduceVariant(collDataType_t type);

}  // namespace coll

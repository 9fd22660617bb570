// How a torch reduction (dtype x ReduceOp) runs on the library, which knows fewer types
// and ops than c10d:
//   native       the dtype is a library type (bool as uint8 0/1: SUM/BOR are MAX,
//                PRODUCT/BAND are MIN, as ProcessGroupNCCL maps them)
//   widen int16  no 16-bit integer type: reduced as int32 and narrowed back (sums and
//                products wrap exactly as in int16; AVG divides the unwrapped sum)
//   complex      SUM, AVG and PREMUL_SUM with a real factor act on real and imaginary
//                parts alone: the tensor is reduced as pairs of reals
//   bitwise      BAND/BOR/BXOR on integers (bool BXOR too): the library has no bitwise
//                ops, so every rank's tensor is gathered and combined here
// Anything else (MIN on complex, BAND on floats, AVG on bool, PREMUL_SUM on integers)
// is a RuntimeError naming the operation, the op and the dtype.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "collectives/collectives.h"

namespace torch_collectives {

enum class Path { kNative, kWidenInt16, kComplex, kBitwise };

struct Reduction {
  Path path = Path::kNative;
  collDataType_t type = collFloat;                           // the library type of the lowered tensor
  collRedOp_t op = collSum;                                  // the built-in op (collSum for PREMUL_SUM)
  c10d::ReduceOp::RedOpType bitwise = c10d::ReduceOp::BAND;  // for Path::kBitwise
  bool preMulSum = false;
  double factor = 1.0;      // PREMUL_SUM with a number
  at::Tensor factorTensor;  // PREMUL_SUM with a one-element tensor, read when the op runs
};

// Throws c10::Error (RuntimeError in Python) naming opName, the op and the dtype when
// this combination cannot run.
Reduction planReduction(const char* opName, at::ScalarType dtype, const c10d::ReduceOp& op);

// The tensor the library reduces, made from a contiguous tensor of the caller's dtype
// (a view, or for kWidenInt16 a widened copy), and the way back.
at::Tensor lowered(const at::Tensor& contiguous, const Reduction& r);
void raise(const at::Tensor& loweredResult, at::Tensor& contiguous, const Reduction& r);

// Combines gathered[i] (rank i's tensor along dim 0) with a bitwise op: BAND, BOR, BXOR.
at::Tensor combineBitwise(const at::Tensor& gathered, c10d::ReduceOp::RedOpType op);

// The PreMulSum scalar of r in the library type (written to `scalar`, 8 bytes).
void preMulSumScalar(const Reduction& r, void* scalar);

const char* redOpName(c10d::ReduceOp::RedOpType op);
std::string dtypeName(at::ScalarType dtype);

}  // namespace torch_collectives

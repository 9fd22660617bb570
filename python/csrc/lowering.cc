#include "lowering.h"

#include <cstring>

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace torch_collectives {

using RedOp = c10d::ReduceOp;

namespace {

[[noreturn]] void unsupported(const char* opName, RedOp::RedOpType op, at::ScalarType dtype, const char* why) {
  TORCH_CHECK(false, "torch_collectives: ", opName, ": ", redOpName(op), " on ", dtypeName(dtype),
              " tensors is not supported (", why, ")");
}

bool isInteger(at::ScalarType t) { return at::isIntegralType(t, /*includeBool=*/false); }

// The library type holding dtype's values unchanged; false if there is none.
bool libraryType(at::ScalarType dtype, collDataType_t* out) {
  switch (dtype) {
    case at::kFloat: *out = collFloat32; return true;
    case at::kDouble: *out = collFloat64; return true;
    case at::kHalf: *out = collFloat16; return true;
    case at::kBFloat16: *out = collBfloat16; return true;
    case at::kChar: *out = collInt8; return true;
    case at::kByte: *out = collUint8; return true;
    case at::kBool: *out = collUint8; return true;
    case at::kInt: *out = collInt32; return true;
    case at::kLong: *out = collInt64; return true;
    default: return false;
  }
}

collRedOp_t builtIn(RedOp::RedOpType op) {
  switch (op) {
    case RedOp::PRODUCT: return collProd;
    case RedOp::MIN: return collMin;
    case RedOp::MAX: return collMax;
    case RedOp::AVG: return collAvg;
    default: return collSum;
  }
}

Reduction planBool(const char* opName, RedOp::RedOpType op) {
  Reduction r;
  r.type = collUint8;
  switch (op) {
    case RedOp::SUM:
    case RedOp::BOR:
    case RedOp::MAX: r.op = collMax; return r;
    case RedOp::PRODUCT:
    case RedOp::BAND:
    case RedOp::MIN: r.op = collMin; return r;
    case RedOp::BXOR:
      r.path = Path::kBitwise;
      r.bitwise = op;
      return r;
    default: unsupported(opName, op, at::kBool, "bool tensors take SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR");
  }
}

void planPreMulSum(const char* opName, at::ScalarType dtype, const RedOp& op, Reduction* r) {
  if (!at::isFloatingType(dtype) && !at::isComplexType(dtype))
    unsupported(opName, op.op_, dtype, "PREMUL_SUM scales floating-point tensors");
  auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(sup, "torch_collectives: ", opName,
              ": PREMUL_SUM without its factor (make it with "
              "torch.distributed._make_nccl_premul_sum)");
  r->preMulSum = true;
  r->op = collSum;
  if (!sup->tensor_factor.defined()) {
    r->factor = sup->double_factor;
    return;
  }
  const at::Tensor& f = sup->tensor_factor;
  TORCH_CHECK(f.numel() == 1 && !f.is_complex(), "torch_collectives: ", opName,
              ": the PREMUL_SUM factor must be one real number, got a tensor of ", f.numel(), " elements of ",
              dtypeName(f.scalar_type()));
  r->factorTensor = f;
}

}  // namespace

const char* redOpName(RedOp::RedOpType op) {
  switch (op) {
    case RedOp::SUM: return "SUM";
    case RedOp::AVG: return "AVG";
    case RedOp::PRODUCT: return "PRODUCT";
    case RedOp::MIN: return "MIN";
    case RedOp::MAX: return "MAX";
    case RedOp::BAND: return "BAND";
    case RedOp::BOR: return "BOR";
    case RedOp::BXOR: return "BXOR";
    case RedOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNKNOWN";
  }
}

std::string dtypeName(at::ScalarType dtype) {
  if (dtype == at::kFloat) return "float32";
  if (dtype == at::kDouble) return "float64";
  if (dtype == at::kHalf) return "float16";
  if (dtype == at::kBFloat16) return "bfloat16";
  if (dtype == at::kChar) return "int8";
  if (dtype == at::kShort) return "int16";
  if (dtype == at::kInt) return "int32";
  if (dtype == at::kLong) return "int64";
  if (dtype == at::kByte) return "uint8";
  if (dtype == at::kBool) return "bool";
  if (dtype == at::kComplexFloat) return "complex64";
  if (dtype == at::kComplexDouble) return "complex128";
  return c10::toString(dtype);  // the others under torch's C++ name
}

Reduction planReduction(const char* opName, at::ScalarType dtype, const RedOp& op) {
  const RedOp::RedOpType t = op.op_;
  if (dtype == at::kBool) return planBool(opName, t);
  Reduction r;
  const bool bitwise = t == RedOp::BAND || t == RedOp::BOR || t == RedOp::BXOR;
  if (bitwise) {
    if (!isInteger(dtype)) unsupported(opName, t, dtype, "bitwise ops take integer or bool tensors");
    r.path = Path::kBitwise;
    r.bitwise = t;
    return r;
  }
  if (t == RedOp::PREMUL_SUM) planPreMulSum(opName, dtype, op, &r);
  else if (t > RedOp::PREMUL_SUM) unsupported(opName, t, dtype, "not a reduction op");
  else r.op = builtIn(t);
  if (at::isComplexType(dtype)) {
    if (t != RedOp::SUM && t != RedOp::AVG && t != RedOp::PREMUL_SUM)
      unsupported(opName, t, dtype, "complex tensors take SUM, AVG and PREMUL_SUM");
    if (dtype != at::kComplexFloat && dtype != at::kComplexDouble)
      unsupported(opName, t, dtype, "no matching library type");
    r.path = Path::kComplex;
    r.type = dtype == at::kComplexFloat ? collFloat32 : collFloat64;
    return r;
  }
  if (dtype == at::kShort) {
    r.path = Path::kWidenInt16;
    r.type = collInt32;
    return r;
  }
  if (!libraryType(dtype, &r.type)) unsupported(opName, t, dtype, "no matching library type");
  return r;
}

at::Tensor lowered(const at::Tensor& contiguous, const Reduction& r) {
  switch (r.path) {
    case Path::kComplex: return at::view_as_real(contiguous);
    case Path::kWidenInt16: return contiguous.to(at::kInt);
    default: return contiguous;
  }
}

void raise(const at::Tensor& loweredResult, at::Tensor& contiguous, const Reduction& r) {
  if (r.path == Path::kWidenInt16) contiguous.copy_(loweredResult);  // narrows, keeping the low 16 bits
}

at::Tensor combineBitwise(const at::Tensor& gathered, RedOp::RedOpType op) {
  at::Tensor acc = gathered[0].clone();
  for (int64_t i = 1; i < gathered.size(0); ++i) {
    if (op == RedOp::BAND) acc.bitwise_and_(gathered[i]);
    else if (op == RedOp::BOR) acc.bitwise_or_(gathered[i]);
    else acc.bitwise_xor_(gathered[i]);
  }
  return acc;
}

void preMulSumScalar(const Reduction& r, void* scalar) {
  const double f = r.factorTensor.defined() ? r.factorTensor.item<double>() : r.factor;
  std::memset(scalar, 0, 8);
  switch (r.type) {
    case collFloat64: std::memcpy(scalar, &f, sizeof f); break;
    case collFloat16: {
      c10::Half h(static_cast<float>(f));
      std::memcpy(scalar, &h, sizeof h);
      break;
    }
    case collBfloat16: {
      c10::BFloat16 b(static_cast<float>(f));
      std::memcpy(scalar, &b, sizeof b);
      break;
    }
    default: {
      float x = static_cast<float>(f);
      std::memcpy(scalar, &x, sizeof x);
      break;
    }
  }
}

}  // namespace torch_collectives

// A CUDA runtime result as a Status naming what failed (for the .cu files only).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace coll {

inline Status cudaStatus(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return okStatus();
  return Status(Code::kSystem, what + ": " + cudaGetErrorString(e));
}

}  // namespace coll

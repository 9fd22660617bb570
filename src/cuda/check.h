// A CUDA runtime result as a Status (Code::kCuda, CUDA's message, the call that failed),
// for the files that include CUDA's headers (src/cuda/*.cc, the .cu kernels).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "base/status.h"

namespace coll::gpu {

inline Status check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return okStatus();
  cudaGetLastError();  // a non-sticky error must not fail the next call
  return Status(Code::kCuda, what + ": " + cudaGetErrorString(e));
}

// Runs f with dev current on the calling thread, then restores the previous device.
template <typename F>
auto onDevice(int dev, F f) {
  int before = -1;
  cudaGetDevice(&before);
  cudaGetLastError();
  if (before != dev) cudaSetDevice(dev);
  auto r = f();
  if (before >= 0 && before != dev) cudaSetDevice(before);
  return r;
}

}  // namespace coll::gpu

// The device executor kernel whose plan travels in its parameters (dev_lane.h
// DevParamPlan), compiled apart from device_kernel.cu (block_backend.cuh says why).
// Built only when COLL_HAVE_CUDA.
#pragma once

#include <cuda_runtime.h>

#include "device/dev_lane.h"

namespace coll {

// Queues one block per lane of `plan` on `stream`; errors as cudaGetLastError reports them.
void launchParamKernel(const DevParamPlan& plan, unsigned nlanes, cudaStream_t stream);
// The kernel, for occupancy queries.
const void* paramKernel();

}  // namespace coll

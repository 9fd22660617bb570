// The device executor kernel. It is the build's only kernel and its plan always travels
// in its parameters (device_lane.h DeviceParamPlan): the lanes and steps themselves where they
// fit the image, else the address of lanes copied to device memory. A second kernel for
// the second form (a pointer parameter) doubled the CUDA compile time (each copy ~100 s
// of nvcc per architecture on 2 cores), and beside it in one translation unit ptxas
// spilled more in both; a launch whose plan is in memory now passes the whole 8 KiB
// image unused.
// Built only when COLL_HAVE_CUDA.
#pragma once

#include <cuda_runtime.h>

#include "device/device_lane.h"

namespace coll {

// Queues one block per lane of `plan` on `stream`; errors as cudaGetLastError reports them.
void launchParamKernel(const DeviceParamPlan& plan, unsigned nlanes, cudaStream_t stream);
// The same kernel for `nlanes` lanes in device memory (their steps there too).
void launchLanesKernel(const DeviceLane* lanes, unsigned nlanes, cudaStream_t stream);
// Blocks of the kernel that fit on one multiprocessor at once.
cudaError_t kernelBlocksPerSm(int* perSm);

}  // namespace coll

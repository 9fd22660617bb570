// The executor kernel for plans in its parameters: as device_kernel.cu's, but each block
// copies its lane out of the parameter image and reads its steps there.
#include "device/param_kernel.h"

#include "device/block_backend.cuh"

namespace coll {

namespace {

__global__ void __launch_bounds__(kThreads) devExecParamKernel(const __grid_constant__ DevParamPlan plan) {
  __shared__ DevSliceCtl ctl;
  __shared__ DevAddr table[kDevMaxDirect];  // a direct operation's buffers (dev_lane.h)
  __shared__ DevLane lane;
  __shared__ uint64_t scratch[kDevMaxConns];  // a batch of tokens' results (dev_lane.h)
  const uint32_t* from = devParamLaneWords(plan, blockIdx.x);
  auto* to = reinterpret_cast<uint32_t*>(&lane);
  for (unsigned i = threadIdx.x; i < sizeof(DevLane) / 4; i += blockDim.x) to[i] = from[i];
  __syncthreads();
  if (threadIdx.x == 0) lane.steps = devParamSteps(plan, lane);
  __syncthreads();
  BlockBackend b(&ctl, table, scratch);
  devRunLane(lane, b);
}

}  // namespace

void launchParamKernel(const DevParamPlan& plan, unsigned nlanes, cudaStream_t stream) {
  devExecParamKernel<<<nlanes, kThreads, 0, stream>>>(plan);
}

const void* paramKernel() { return reinterpret_cast<const void*>(devExecParamKernel); }

}  // namespace coll

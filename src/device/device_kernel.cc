// The device executor kernel's launch (the kernel: param_kernel.cu): its plan in the
// parameters or copied to launch memory from the pool of src/cuda/, events joining the
// group's streams. Host code only.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "collectives/collectives.h"
#include "cuda/check.h"
#include "device/device_lane.h"
#include "device/device_kernel.h"
#include "device/param_kernel.h"

namespace coll {

namespace {

// Launch memory for results only (the plan travels in parameters), or for lanes, steps
// and results, the plan copied to the device block on the stream. Every part 64-byte aligned.
Status placePlan(DeviceLaunch& h, std::vector<DeviceLane>& lanes, const std::vector<DeviceStep>& steps, void* stream,
                 bool inParams) {
  auto up = [](size_t x) { return (x + 63) & ~size_t{63}; };
  const bool image = inParams && deviceParamBytes(lanes.size(), steps.size()) <= kDeviceParamBytes;
  const size_t laneBytes = image ? 0 : up(lanes.size() * sizeof(DeviceLane));
  const size_t stepBytes = image ? 0 : up(steps.size() * sizeof(DeviceStep));
  const size_t resBytes = up(lanes.size() * sizeof(DeviceLaneResult));
  COLL_ASSIGN(h.memory, gpu::LaunchBuffer::take(laneBytes + stepBytes + resBytes, stream));
  char* host = h.memory.host();
  char* dev = h.memory.device();
  // Results are written to the pinned block, where the proxy reads them.
  auto* deviceResults = reinterpret_cast<DeviceLaneResult*>(h.memory.hostMappedOnDevice() + laneBytes + stepBytes);
  h.results = reinterpret_cast<DeviceLaneResult*>(host + laneBytes + stepBytes);
  std::memset(h.results, 0, lanes.size() * sizeof(DeviceLaneResult));
  for (size_t i = 0; i < lanes.size(); ++i) lanes[i].result = deviceResults + i;
  if (image) {
    auto plan = std::shared_ptr<DeviceParamPlan>(new DeviceParamPlan);  // not zeroed: only packed bytes are read
    if (!devicePackPlan(*plan, lanes.data(), static_cast<uint32_t>(lanes.size()), steps.data(), steps.size()))
      return internalError("a device plan of " + std::to_string(lanes.size()) + " lanes did not fit its image");
    h.image = std::move(plan);
    return okStatus();
  }
  auto* deviceSteps = reinterpret_cast<const DeviceStep*>(dev + laneBytes);
  for (DeviceLane& lane : lanes) lane.steps = deviceSteps + reinterpret_cast<uintptr_t>(lane.steps);
  std::memcpy(host, lanes.data(), lanes.size() * sizeof(DeviceLane));
  if (!steps.empty()) std::memcpy(host + laneBytes, steps.data(), steps.size() * sizeof(DeviceStep));
  // The pinned source makes the copy asynchronous: the call never waits for the stream.
  COLL_CHECK(gpu::check(cudaMemcpyAsync(dev, host, laneBytes + stepBytes, cudaMemcpyHostToDevice,
                                        static_cast<cudaStream_t>(stream)),
                        "cudaMemcpyAsync of a device launch's plan"));
  h.lanes = reinterpret_cast<const DeviceLane*>(dev);
  return okStatus();
}

}  // namespace

Result<DeviceLaunch> launchLanes(std::vector<DeviceLane> lanes, const std::vector<DeviceStep>& steps, void* stream,
                                 const std::vector<void*>& join, bool inParams) {
  DeviceLaunch h;
  if (lanes.empty()) return h;
  // Join: the kernel starts after the work queued on every stream of the group.
  for (void* other : join) {
    COLL_ASSIGN(gpu::Event queued, gpu::Event::record(other));
    COLL_CHECK(queued.waitOn(stream));
  }
  COLL_CHECK(placePlan(h, lanes, steps, stream, inParams));
  h.nlanes = static_cast<unsigned>(lanes.size());
  h.stream = stream;
  COLL_CHECK(relaunchLanes(h));
  for (void* other : join) COLL_CHECK(h.done.waitOn(other));
  return h;
}

Status relaunchLanes(DeviceLaunch& h) {
  auto s = static_cast<cudaStream_t>(h.stream);
  if (h.image) launchParamKernel(*h.image, h.nlanes, s);
  else launchLanesKernel(h.lanes, h.nlanes, s);
  COLL_CHECK(gpu::check(cudaGetLastError(), "device executor kernel launch"));
  COLL_ASSIGN(h.done, gpu::Event::record(h.stream));
  return okStatus();
}

int residentLanes(int dev) {
  int perSm = 0;
  const cudaError_t e = gpu::onDevice(dev, [&] { return kernelBlocksPerSm(&perSm); });
  if (e != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return gpu::multiprocessors(dev) * perSm;
}

}  // namespace coll

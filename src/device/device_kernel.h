// The device executor kernel (param_kernel.cu) as the host side launches it, behind a
// header without CUDA types. Built only when COLL_HAVE_CUDA.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "cuda/gpu.h"
#include "device/device_lane.h"

namespace coll {

// A launched kernel: the event recorded after it, the launch memory holding its lanes,
// steps and results (kept until the event completes), and the results' host view.
struct DeviceLaunch {
  gpu::Event done;
  gpu::LaunchBuffer memory;
  DeviceLaneResult* results = nullptr;  // one per lane, in the order given
  const DeviceLane* lanes = nullptr;    // in the device block (a plan not in parameters)
  unsigned nlanes = 0;
  void* stream = nullptr;
  std::shared_ptr<const DeviceParamPlan> image;  // the plan in parameters (device_lane.h), or null
};

// Launches one block per lane on `stream`, after the work already queued on every stream
// of `join`, which then waits for the kernel. The lanes and their steps (host arrays;
// each lane's `steps` holds the index of its first step) go in the kernel's parameters
// where `inParams` and they fit an image (device_lane.h DeviceParamPlan), else in launch memory
// from the pool, copied to the device on the stream first. Results are always in launch
// memory (no allocation in steady state: an allocation between two ranks' launches could
// keep their kernels from running together).
Result<DeviceLaunch> launchLanes(std::vector<DeviceLane> lanes, const std::vector<DeviceStep>& steps, void* stream,
                                 const std::vector<void*>& join, bool inParams);

// Lanes (blocks of the executor kernel) a device keeps resident at once: its
// multiprocessors times the kernel's occupancy, the least of its forms (0 when unknown).
int residentLanes(int dev);

// Runs a launch's lanes again on its stream, from where they yielded (kDeviceYielded; lanes
// done already end at once), and records h.done after it. The caller's device must be
// the stream's.
Status relaunchLanes(DeviceLaunch& h);

}  // namespace coll

// The device executor kernel (device_kernel.cu) as the host side launches it, behind a
// header without CUDA types. Built only when COLL_HAVE_CUDA.
#pragma once

#include <vector>

#include "base/status.h"
#include "cuda/gpu.h"
#include "device/dev_lane.h"

namespace coll {

// A launched kernel: the event recorded after it, the launch memory holding its lanes,
// steps and results (kept until the event completes), and the results' host view.
struct DevLaunch {
  gpu::Event done;
  gpu::LaunchBlock memory;
  DevLaneResult* results = nullptr;  // one per lane, in the order given
  const DevLane* lanes = nullptr;    // in the device block
  unsigned nlanes = 0;
  void* stream = nullptr;
};

// Places the lanes and their steps (host arrays; each lane's `steps` holds the index of
// its first step) in launch memory from the pool (no allocation in steady state: an
// allocation between two ranks' launches could keep their kernels from running
// together), and launches one block per lane on `stream`, after the work already queued
// on every stream of `join`, which then waits for the kernel.
Result<DevLaunch> launchLanes(std::vector<DevLane> lanes, const std::vector<DevStep>& steps, void* stream,
                              const std::vector<void*>& join);

// Lanes (blocks of the executor kernel) a device keeps resident at once: its
// multiprocessors times the kernel's occupancy (0 when unknown).
int residentLanes(int dev);

// Runs a launch's lanes again on its stream, from where they yielded (kDevYielded; lanes
// done already end at once), and records h.done after it. The caller's device must be
// the stream's.
Status relaunchLanes(DevLaunch& h);

}  // namespace coll

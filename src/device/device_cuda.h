// What the device executor needs from CUDA (kernels/device_exec.cu), behind a header
// without CUDA types so the rest of the library builds with or without the toolkit.
// Streams and events travel as void*. Built only when COLL_HAVE_CUDA.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "device/dev_lane.h"

namespace coll {

// Host memory (a FIFO) made reachable by kernels: registered once per process (mapped,
// portable), its device address returned for `p` inside [base, base + bytes).
Result<char*> cudaMapHost(void* base, size_t bytes, const void* p);
// Before host memory registered by cudaMapHost is freed; no-op for memory never mapped.
void cudaUnmapHost(void* base);

// Pinned host memory the device can write (abort words, lane results).
Result<void*> cudaAllocMapped(size_t bytes);
void cudaFreeMapped(void* p);
// Device address of memory from cudaAllocMapped.
Result<char*> cudaMappedDevicePtr(void* p);

// A launched kernel: the event recorded after it, the pinned memory holding its lanes,
// steps and results (kept until the event completes), and the results' host view.
struct DevLaunchHandle {
  void* event = nullptr;
  std::shared_ptr<void> memory;
  DevLaneResult* results = nullptr;  // one per lane, in the order given
};
// Places the lanes and their steps (host arrays; each lane's `steps` holds the index of
// its first step) in pinned mapped memory from a pool (no allocation in steady state: an
// allocation between two ranks' launches could keep their kernels from running
// together), and launches one block per lane on `stream`, after the work already queued
// on every stream of `join`, which then waits for the kernel.
Result<DevLaunchHandle> cudaLaunchLanes(std::vector<DevLane> lanes, const std::vector<DevStep>& steps,
                                        void* stream, const std::vector<void*>& join);
// At init, before any kernel runs: fills the launch pool and creates the current
// device's side stream (non-blocking, for the library's own fills).
Status cudaWarmLaunchPool();
// Device memory for p2p FIFOs (zeroed on the side stream, never the legacy default
// stream, which would wait for kernels of other ranks on the GPU), on device dev; freed
// with cudaFreeDevice.
Result<void*> cudaAllocDevice(int dev, size_t bytes);
void cudaFreeDevice(void* p);
// CUDA IPC of such an allocation (64-byte handles).
Status cudaIpcExport(void* p, unsigned char handle[64]);
Result<void*> cudaIpcImport(const unsigned char handle[64], int selfDev);
void cudaIpcClose(void* p);
// Peer access from device `from` to memory on device `to` (local ordinals).
bool cudaCanAccess(int from, int to);
Status cudaEnablePeer(int from, int to);
// Lanes (blocks of the executor kernel) a device keeps resident at once: its
// multiprocessors times the kernel's occupancy (0 when unknown).
int cudaResidentLanes(int dev);
// PCI bus id of a device, and the local ordinal of a bus id (-1: not visible here).
std::string cudaBusIdOf(int dev);
int cudaDeviceByBusId(const char* busId);

// Whether the work before ev has finished; an error of the device (a faulted kernel)
// ends it too, returned in *err.
bool cudaEventDone(void* ev, Status* err);
void cudaEventFree(void* ev);

}  // namespace coll

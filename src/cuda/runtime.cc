// Devices and the memory callers own (src/cuda/gpu.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>

#include "cuda/check.h"
#include "cuda/gpu.h"

namespace coll::gpu {

namespace {

// Ranks of one process sharing a GPU each launch a kernel that waits for the others'; with
// more of them than hardware queues, one can sit queued behind a kernel that waits for it
// (the H100 run hung at 8 and 16 ranks as threads, and passed with 32 queues). So, unless
// the user chose, ask for the most before the process creates its CUDA context.
__attribute__((constructor)) void askForHardwareQueues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }

}  // namespace

int hardwareQueues() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int n = v ? std::atoi(v) : 0;
  return n >= 1 ? std::min(n, 32) : 8;
}

bool usable(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    cudaGetLastError();  // clear the non-sticky error so later calls start clean
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device is visible";
    return false;
  }
  return true;
}

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int currentDevice() {
  if (!usable(nullptr)) return -1;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

bool started(int dev) {
  // Driver calls through the runtime's entry points (cudart is static; libcuda is the
  // driver's own): cuDeviceGet(CUdevice*, int), cuDevicePrimaryCtxGetState(CUdevice,
  // unsigned*, int*); CUdevice is an int, CUresult 0 is success.
  using DeviceGet = int (*)(int*, int);
  using PrimaryState = int (*)(int, unsigned*, int*);
  void* get = nullptr;
  void* state = nullptr;
  cudaDriverEntryPointQueryResult q1{}, q2{};
  if (cudaGetDriverEntryPointByVersion("cuDeviceGet", &get, 12000, cudaEnableDefault, &q1) != cudaSuccess ||
      cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &state, 12000, cudaEnableDefault, &q2) !=
          cudaSuccess ||
      q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess || !get || !state) {
    cudaGetLastError();
    return true;
  }
  int device = 0, active = 0;
  unsigned flags = 0;
  if (reinterpret_cast<DeviceGet>(get)(&device, dev) != 0) return true;
  if (reinterpret_cast<PrimaryState>(state)(device, &flags, &active) != 0) return true;
  return active != 0;
}

Status setDevice(int dev) { return check(cudaSetDevice(dev), "cudaSetDevice(" + std::to_string(dev) + ")"); }

bool isDeviceMemory(const void* p) {
  static const bool canUse = usable(nullptr);
  if (!canUse || !p) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice;
}

std::string busIdOf(int dev) {
  char id[16] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof(id), dev) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

int deviceByBusId(const char* busId) {
  int dev = -1;
  if (!busId[0] || cudaDeviceGetByPCIBusId(&dev, busId) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return dev;
}

bool canAccessPeer(int from, int to) {
  if (from == to) return true;
  int ok = 0;
  if (cudaDeviceCanAccessPeer(&ok, from, to) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return ok != 0;
}

Status enablePeerAccess(int from, int to) {
  if (from == to) return okStatus();
  return onDevice(from, [&]() -> Status {
    cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();
      return okStatus();
    }
    return check(e, "cudaDeviceEnablePeerAccess(" + std::to_string(from) + " -> " + std::to_string(to) + ")");
  });
}

int multiprocessors(int dev) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms;
}

bool mpsEnabled(int dev) {
  int on = 0;
  if (cudaDeviceGetAttribute(&on, cudaDevAttrMpsEnabled, dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return on != 0;
}

bool isCapturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

Result<void*> allocate(size_t bytes) {
  void* p = nullptr;
  COLL_CHECK(check(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + ")"));
  return p;
}

Status release(void* p) { return check(cudaFree(p), "cudaFree"); }

Result<void*> allocateOnStream(size_t bytes, void* stream) {
  void* p = nullptr;
  COLL_CHECK(check(cudaMallocAsync(&p, bytes, static_cast<cudaStream_t>(stream)), "cudaMallocAsync (scratch)"));
  return p;
}

void releaseOnStream(void* p, void* stream) {
  if (cudaFreeAsync(p, static_cast<cudaStream_t>(stream)) != cudaSuccess) cudaGetLastError();
}

Status copyOnStream(void* dst, const void* src, size_t bytes, void* stream) {
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
               "cudaMemcpyAsync (" + std::to_string(bytes) + " bytes)");
}

Status syncStream(void* stream) {
  return check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

Status copyToHost(void* dst, const void* src, size_t bytes) {
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy (to host)");
}

}  // namespace coll::gpu

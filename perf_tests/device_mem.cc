#include "device_mem.h"

#include "collectives/config.h"
#if COLL_HAVE_CUDA
#include <cuda_runtime.h>

#include "cuda/gpu.h"
#endif

namespace perf {

#if COLL_HAVE_CUDA
namespace {
std::string err(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return "";
  return std::string(what) + ": " + cudaGetErrorString(e);
}
}  // namespace

bool deviceUsable(std::string* why) { return coll::gpu::usable(why); }

int deviceCount() { return coll::gpu::deviceCount(); }

DeviceBuffers::~DeviceBuffers() {
  if (send_) cudaFree(send_);
  if (recv_) cudaFree(recv_);
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

std::string DeviceBuffers::init(int dev) {
  std::string e = err(cudaSetDevice(dev), "cudaSetDevice");
  if (!e.empty()) return e;
  cudaStream_t s;
  e = err(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  if (e.empty()) stream_ = s;
  return e;
}

std::string DeviceBuffers::resize(size_t sendBytes, size_t recvBytes) {
  auto grow = [](char** p, size_t* cap, size_t want) -> std::string {
    if (want <= *cap && *p) return "";
    if (*p) cudaFree(*p);
    *p = nullptr;
    *cap = 0;
    std::string e = err(cudaMalloc(reinterpret_cast<void**>(p), want ? want : 1), "cudaMalloc");
    if (e.empty()) *cap = want;
    return e;
  };
  std::string e = grow(&send_, &sendCap_, sendBytes);
  return e.empty() ? grow(&recv_, &recvCap_, recvBytes) : e;
}

// On the rank's stream, waited for: a plain cudaMemcpy runs on the legacy default stream,
// which a non-blocking stream does not wait for, and from pageable memory it may return
// before its DMA has landed (a collective that copies its input at once, as a staged one
// does, then read the old contents).
std::string DeviceBuffers::toDevice(char* dst, const void* src, size_t bytes) {
  const std::string e = err(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                            static_cast<cudaStream_t>(stream_)),
                            "cudaMemcpyAsync to device");
  return e.empty() ? sync() : e;
}

std::string DeviceBuffers::toHost(void* dst, const char* src, size_t bytes) {
  const std::string e = err(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                            static_cast<cudaStream_t>(stream_)),
                            "cudaMemcpyAsync to host");
  return e.empty() ? sync() : e;
}

std::string DeviceBuffers::sync() {
  return err(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "cudaStreamSynchronize");
}
#else
namespace {
const char* kNone = "this build has no CUDA support";
}

bool deviceUsable(std::string* why) {
  if (why) *why = kNone;
  return false;
}
int deviceCount() { return 0; }
DeviceBuffers::~DeviceBuffers() = default;
std::string DeviceBuffers::init(int) { return kNone; }
std::string DeviceBuffers::resize(size_t, size_t) { return kNone; }
std::string DeviceBuffers::toDevice(char*, const void*, size_t) { return kNone; }
std::string DeviceBuffers::toHost(void*, const char*, size_t) { return kNone; }
std::string DeviceBuffers::sync() { return kNone; }
#endif

}  // namespace perf

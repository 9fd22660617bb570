// Host registration, mapped host memory, device buffers and IPC, side streams, events
// (src/cuda/gpu.h).
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>

#include "cuda/check.h"
#include "cuda/gpu.h"

namespace coll::gpu {

namespace {

// Host memory registered for kernels: base -> (bytes, device address of base).
std::mutex gMapMu;
std::map<char*, std::pair<size_t, char*>> gMapped;

std::mutex gSideMu;
std::map<int, cudaStream_t> gSide;

}  // namespace

Result<char*> mapHost(void* base, size_t bytes, const void* p) {
  char* b = static_cast<char*>(base);
  std::lock_guard<std::mutex> lock(gMapMu);
  auto it = gMapped.find(b);
  if (it == gMapped.end()) {
    cudaError_t e = cudaHostRegister(base, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
    if (e == cudaErrorHostMemoryAlreadyRegistered) {
      cudaGetLastError();
    } else if (e != cudaSuccess) {
      return check(e, "cudaHostRegister of a " + std::to_string(bytes) + "-byte FIFO");
    }
    void* d = nullptr;
    COLL_CHECK(check(cudaHostGetDevicePointer(&d, base, 0), "cudaHostGetDevicePointer of a FIFO"));
    it = gMapped.emplace(b, std::make_pair(bytes, static_cast<char*>(d))).first;
  }
  const char* q = static_cast<const char*>(p);
  if (q < b || q >= b + it->second.first) return internalError("address outside its mapped FIFO");
  return it->second.second + (q - b);
}

void unmapHost(void* base) {
  std::lock_guard<std::mutex> lock(gMapMu);
  auto it = gMapped.find(static_cast<char*>(base));
  if (it == gMapped.end()) return;
  cudaHostUnregister(base);
  cudaGetLastError();
  gMapped.erase(it);
}

Result<MappedHostBuffer> MappedHostBuffer::allocate(size_t bytes) {
  void* p = nullptr;
  COLL_CHECK(check(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                   "cudaHostAlloc(" + std::to_string(bytes) + " bytes)"));
  MappedHostBuffer b;
  b.host_ = std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
  std::memset(p, 0, bytes);
  void* d = nullptr;
  COLL_CHECK(check(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer"));
  b.device_ = static_cast<char*>(d);
  return b;
}

Result<DeviceBuffer> DeviceBuffer::allocateZeroed(int dev, size_t bytes) {
  return onDevice(dev, [&]() -> Result<DeviceBuffer> {
    COLL_ASSIGN(void* side, sideStream(dev));
    void* p = nullptr;
    COLL_CHECK(check(cudaMalloc(&p, bytes), "cudaMalloc(" + std::to_string(bytes) + ") of a p2p FIFO"));
    DeviceBuffer b;
    b.p_ = std::shared_ptr<void>(p, [](void* q) {
      cudaFree(q);
      cudaGetLastError();
    });
    auto s = static_cast<cudaStream_t>(side);
    COLL_CHECK(check(cudaMemsetAsync(p, 0, bytes, s), "cudaMemsetAsync of a p2p FIFO"));
    COLL_CHECK(check(cudaStreamSynchronize(s), "zeroing a p2p FIFO"));
    return b;
  });
}

Result<IpcHandle> DeviceBuffer::exportHandle() const {
  static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle), "IPC handles travel as 64 bytes");
  cudaIpcMemHandle_t h;
  COLL_CHECK(check(cudaIpcGetMemHandle(&h, p_.get()), "cudaIpcGetMemHandle of a p2p FIFO"));
  IpcHandle out;
  std::memcpy(out.bytes, &h, sizeof(h));
  return out;
}

Result<IpcMapping> IpcMapping::open(const IpcHandle& handle, int selfDev) {
  return onDevice(selfDev, [&]() -> Result<IpcMapping> {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    void* p = nullptr;
    COLL_CHECK(check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                     "cudaIpcOpenMemHandle of a peer's p2p FIFO"));
    IpcMapping m;
    m.p_ = std::shared_ptr<void>(p, [](void* q) {
      cudaIpcCloseMemHandle(q);
      cudaGetLastError();
    });
    return m;
  });
}

Result<void*> sideStream(int dev) {
  std::lock_guard<std::mutex> lock(gSideMu);
  auto it = gSide.find(dev);
  if (it != gSide.end()) return static_cast<void*>(it->second);
  cudaStream_t s = nullptr;
  COLL_CHECK(onDevice(dev,
                      [&] { return check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }));
  gSide.emplace(dev, s);
  return static_cast<void*>(s);
}

Result<Event> Event::record(void* stream) {
  cudaEvent_t e;
  COLL_CHECK(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
  Event ev;
  ev.ev_ = std::shared_ptr<void>(e, [](void* q) { cudaEventDestroy(static_cast<cudaEvent_t>(q)); });
  COLL_CHECK(check(cudaEventRecord(e, static_cast<cudaStream_t>(stream)), "cudaEventRecord"));
  return ev;
}

Status Event::waitOn(void* stream) const {
  return check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), static_cast<cudaEvent_t>(ev_.get()), 0),
               "cudaStreamWaitEvent");
}

bool Event::done(Status* err, const char* what) const {
  if (!ev_) return true;
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(ev_.get()));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  if (e != cudaSuccess) (void)(*err = check(e, what));
  return true;
}

}  // namespace coll::gpu

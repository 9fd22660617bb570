// Host registration, mapped host memory, device buffers and IPC, side streams, events
// (src/cuda/gpu.h).
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "cuda/check.h"
#include "cuda/gpu.h"

namespace coll::gpu {

namespace {

// Host memory registered for kernels: base -> (bytes, device address of base).
std::mutex gMapMu;
std::map<char*, std::pair<size_t, char*>> gMapped;

std::mutex gSideMu;
std::map<int, cudaStream_t> gSide;

// Events no Event holds any more, by device: a launch records two or more, and making and
// destroying them was part of the 20-35 us a launch's call took on the H100.
std::mutex gEventMu;
std::map<int, std::vector<cudaEvent_t>> gFreeEvents;

Result<cudaEvent_t> takeEvent(int dev) {
  {
    std::lock_guard<std::mutex> lock(gEventMu);
    auto& free = gFreeEvents[dev];
    if (!free.empty()) {
      cudaEvent_t e = free.back();
      free.pop_back();
      return e;
    }
  }
  cudaEvent_t e;
  COLL_CHECK(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
  return e;
}

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

Result<IpcMapping> IpcMapping::open(const IpcHandle& handle, int selfDev, const char* what) {
  return onDevice(selfDev, [&]() -> Result<IpcMapping> {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    void* p = nullptr;
    COLL_CHECK(check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                     std::string("cudaIpcOpenMemHandle of ") + what));
    IpcMapping m;
    m.p_ = std::shared_ptr<void>(p, [](void* q) {
      cudaIpcCloseMemHandle(q);
      cudaGetLastError();
    });
    return m;
  });
}

namespace {

// The driver's functions, through the runtime's entry points (libcuda is the driver's);
// nullptr where the driver lacks one.
void* driverFn(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return fn;
}

// cuMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr) and
// cuPointerGetAttribute(void* data, CUpointer_attribute, CUdeviceptr).
using GetAddressRange = int (*)(unsigned long long*, size_t*, unsigned long long);
using GetPointerAttribute = int (*)(void*, int, unsigned long long);
constexpr int kPointerBufferId = 7;  // CU_POINTER_ATTRIBUTE_BUFFER_ID

}  // namespace

Result<Allocation> allocationOf(const void* p) {
  static const auto range = reinterpret_cast<GetAddressRange>(driverFn("cuMemGetAddressRange", 12000));
  static const auto attr = reinterpret_cast<GetPointerAttribute>(driverFn("cuPointerGetAttribute", 12000));
  if (!range || !attr) return Status(Code::kCuda, "the CUDA driver has no cuMemGetAddressRange/cuPointerGetAttribute");
  const auto dptr = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p));
  unsigned long long base = 0, id = 0;
  size_t bytes = 0;
  int rc = range(&base, &bytes, dptr);
  if (rc == 0) rc = attr(&id, kPointerBufferId, dptr);
  if (rc != 0)
    return Status(Code::kCuda, "no device allocation holds the pointer (cuMemGetAddressRange/cuPointerGetAttribute: "
                               "CUresult " +
                                   std::to_string(rc) + ")");
  return Allocation{static_cast<uintptr_t>(base), bytes, id};
}

Result<IpcHandle> ipcHandleOf(uintptr_t base) {
  cudaIpcMemHandle_t h;
  COLL_CHECK(check(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)), "cudaIpcGetMemHandle of a caller's buffer"));
  IpcHandle out;
  std::memcpy(out.bytes, &h, sizeof(h));
  return out;
}

namespace {

// cuMemGetHandleForAddressRange(void* handle, CUdeviceptr, size_t, CUmemRangeHandleType,
// unsigned long long flags), through the runtime's entry points (libcuda is the driver's).
using GetRangeHandle = int (*)(void*, unsigned long long, size_t, int, unsigned long long);
constexpr int kDmaBufFdHandle = 1;     // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
constexpr int kDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED

GetRangeHandle rangeHandleFn() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 11070, cudaEnableDefault, &q) !=
          cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<GetRangeHandle>(fn);
}

}  // namespace

bool dmaBufSupported(int dev) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, static_cast<cudaDeviceAttr>(kDmaBufSupported), dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return v != 0 && rangeHandleFn() != nullptr;
}

Result<NicBuffer> NicBuffer::allocate(int dev, size_t bytes, bool wantDmaBuf) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const size_t whole = (bytes + page - 1) / page * page;
  NicBuffer b;
  COLL_ASSIGN(b.mem_, DeviceBuffer::allocateZeroed(dev, whole + page));
  const uintptr_t at = reinterpret_cast<uintptr_t>(b.mem_.get());
  b.data_ = reinterpret_cast<char*>((at + page - 1) / page * page);
  if (!wantDmaBuf) return b;
  GetRangeHandle get = rangeHandleFn();
  if (!get) return Status(Code::kCuda, "the CUDA driver has no cuMemGetHandleForAddressRange");
  int fd = -1;
  const int rc = get(&fd, reinterpret_cast<uintptr_t>(b.data_), whole, kDmaBufFdHandle, 0);
  if (rc != 0 || fd < 0)
    return Status(Code::kCuda, "cuMemGetHandleForAddressRange (dma-buf of " + std::to_string(whole) +
                                   " bytes of GPU memory) failed with CUresult " + std::to_string(rc));
  b.fd_ = std::shared_ptr<int>(new int(fd), [](int* f) {
    ::close(*f);
    delete f;
  });
  return b;
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
  int dev = -1;
  COLL_CHECK(check(cudaGetDevice(&dev), "cudaGetDevice"));
  COLL_ASSIGN(cudaEvent_t e, takeEvent(dev));
  Event ev;
  // Back to the pool when the last holder drops it: re-recording it later does not touch
  // the waits made on this recording (cudaStreamWaitEvent takes the event as it is then).
  ev.ev_ = std::shared_ptr<void>(e, [dev](void* q) {
    std::lock_guard<std::mutex> lock(gEventMu);
    gFreeEvents[dev].push_back(static_cast<cudaEvent_t>(q));
  });
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

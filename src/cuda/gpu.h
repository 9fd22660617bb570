// The CUDA runtime as the library uses it, behind a header without CUDA types so every
// layer builds with or without the toolkit: streams travel as void* (a cudaStream_t).
// Everything here is namespace coll::gpu, so a reader never mistakes our wrappers for the
// runtime's own cuda* functions. A failing runtime call comes back as Code::kCuda
// (collUnhandledCudaError) with CUDA's message and the call that failed.
//
// Compiled only when COLL_HAVE_CUDA (src/cuda/*.cc); callers guard their calls the same
// way, except unmapHost, which is a no-op without CUDA.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "collectives/config.h"

namespace coll::gpu {

// ---- Devices -----------------------------------------------------------------------------

// Whether this process can use a CUDA device; the reason in *why when not.
bool usable(std::string* why);
// How many CUDA devices this process sees (0 without a usable one).
int deviceCount();
// The calling thread's current device, or -1 without a usable one.
int currentDevice();
// Whether the application has started CUDA on device dev: its primary context is active
// (cudaSetDevice, an allocation or a launch made it). True when the driver cannot say.
bool started(int dev);
// Makes dev the calling thread's current device.
Status setDevice(int dev);
// Whether p points into CUDA device memory (not managed or host memory). False without a
// usable device, at the cost of one branch after the first call.
bool isDeviceMemory(const void* p);
// PCI bus id of a device, and the local ordinal of a bus id (-1: not visible here).
std::string busIdOf(int dev);
int deviceByBusId(const char* busId);
// Peer access from device `from` to memory on device `to` (local ordinals).
bool canAccessPeer(int from, int to);
Status enablePeerAccess(int from, int to);
// Multiprocessors of a device (0 when unknown).
int multiprocessors(int dev);
// Whether contexts on the device are shared through MPS (kernels of different processes
// run at once); false when unknown.
bool mpsEnabled(int dev);
// Whether work queued on `stream` now is captured into a CUDA graph rather than run.
bool isCapturing(void* stream);
// Kernels of different streams run together only over the device's hardware queues:
// CUDA_DEVICE_MAX_CONNECTIONS, read when the process creates its CUDA context (8 unless
// set, 32 at most). Loading this library asks for 32 where the variable is unset
// (runtime.cc), which counts only if no CUDA context exists yet. The count in effect, as
// far as the environment says.
int hardwareQueues();

// ---- Memory a caller owns ------------------------------------------------------------------

// Device memory handed to the application (collMemAlloc): cudaMalloc / cudaFree.
Result<void*> allocate(size_t bytes);
Status release(void* p);
// Stream-ordered scratch memory for one operation (cudaMallocAsync / cudaFreeAsync).
Result<void*> allocateOnStream(size_t bytes, void* stream);
void releaseOnStream(void* p, void* stream);
// Copies bytes from device (or any) memory to host memory, synchronously.
Status copyToHost(void* dst, const void* src, size_t bytes);
// Copies bytes between any memories in stream order (cudaMemcpyAsync, cudaMemcpyDefault),
// and waits for everything queued on a stream.
Status copyOnStream(void* dst, const void* src, size_t bytes, void* stream);
Status syncStream(void* stream);

// ---- Host memory the device reaches ----------------------------------------------------------

// Host memory (a FIFO) made reachable by kernels: registered once per process (mapped,
// portable; communicators of one process share FIFOs), its device address returned for
// `p` inside [base, base + bytes). unmapHost before that memory is freed; a no-op for
// memory never mapped.
Result<char*> mapHost(void* base, size_t bytes, const void* p);
#if COLL_HAVE_CUDA
void unmapHost(void* base);
#else
inline void unmapHost(void*) {}
#endif

// Pinned host memory the device can write (abort words), zeroed; freed with the object.
class MappedHostBuffer {
 public:
  static Result<MappedHostBuffer> allocate(size_t bytes);
  MappedHostBuffer() = default;
  void* host() const { return host_.get(); }
  char* device() const { return device_; }

 private:
  std::shared_ptr<void> host_;
  char* device_ = nullptr;
};

// ---- Device memory shared between processes ----------------------------------------------

// A CUDA IPC handle, as it travels between processes.
struct IpcHandle {
  unsigned char bytes[64];
};

// Zeroed device memory on device dev (a p2p FIFO), freed with the object; its IPC handle.
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> allocateZeroed(int dev, size_t bytes);
  DeviceBuffer() = default;
  void* get() const { return p_.get(); }
  Result<IpcHandle> exportHandle() const;

 private:
  std::shared_ptr<void> p_;
};

// The allocation holding device pointer p (cuMemGetAddressRange) and its process-wide
// unique id (CU_POINTER_ATTRIBUTE_BUFFER_ID: a new allocation at a freed one's address has
// another).
struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;
  uint64_t id = 0;
};
Result<Allocation> allocationOf(const void* p);
// The IPC handle of the allocation starting at base (a caller's cudaMalloc'd buffer).
Result<IpcHandle> ipcHandleOf(uintptr_t base);

// A peer process's allocation (a DeviceBuffer, or a buffer of ipcHandleOf) opened in this
// process on device selfDev; closed with the object. `what` names it in errors.
class IpcMapping {
 public:
  static Result<IpcMapping> open(const IpcHandle& h, int selfDev, const char* what = "a peer's p2p FIFO");
  IpcMapping() = default;
  void* get() const { return p_.get(); }

 private:
  std::shared_ptr<void> p_;
};

// ---- GPU memory a NIC reaches (GPUDirect RDMA) ------------------------------------------------

// Whether device dev exports its memory as dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
// and the driver entry point present).
bool dmaBufSupported(int dev);

// Zeroed device memory on dev that a NIC reads and writes (net connectors' slots): the
// range starts and ends on host pages, and with wantDmaBuf it comes with its dma-buf
// (cuMemGetHandleForAddressRange), which registers it with an RDMA device. Freed, and the
// fd closed, with the last copy.
class NicBuffer {
 public:
  static Result<NicBuffer> allocate(int dev, size_t bytes, bool wantDmaBuf);
  NicBuffer() = default;
  char* get() const { return data_; }
  int dmaBufFd() const { return fd_ ? *fd_ : -1; }

 private:
  DeviceBuffer mem_;
  char* data_ = nullptr;
  std::shared_ptr<int> fd_;
};

// ---- Streams and events ---------------------------------------------------------------------

// One non-blocking stream per device for the library's own copies and fills. Plain
// cudaMemset runs on the legacy default stream, which waits for every blocking stream of
// the device: when ranks share a GPU and one makes a connection on first use while
// another's kernel waits for it, that wait never ends. Made at init (creating a stream
// may itself wait for running kernels).
Result<void*> sideStream(int dev);

// An event recorded on a stream: whether the work before it finished; destroyed with the
// object.
class Event {
 public:
  static Result<Event> record(void* stream);
  Event() = default;
  // Makes `stream` wait for the work before this event.
  Status waitOn(void* stream) const;
  // An error of the device (a faulted kernel) ends the wait too, returned in *err with
  // `what` naming the work.
  bool done(Status* err, const char* what) const;

 private:
  std::shared_ptr<void> ev_;
};

// ---- Launch memory ----------------------------------------------------------------------------

// Memory for one kernel launch, recycled so steady state allocates nothing: a pinned
// mapped host buffer (the launch is written there, results read back from there) and a
// device buffer of the same size on the current device (the launch is copied there in
// stream order, so a kernel reads it from device memory rather than across PCIe). Goes
// back to the pool when the last copy of the object is dropped (after the launch's
// kernel has ended).
class LaunchBuffer {
 public:
  // A buffer of at least `bytes` for a launch on `stream` (on the current device). When
  // none is free, allocating one may wait for kernels on the GPU, one of which may wait
  // for this launch: while earlier launches on the same stream hold buffers, this waits
  // for one of them to end instead, and allocates only when the stream holds none.
  static Result<LaunchBuffer> take(size_t bytes, void* stream);
  // At init, before any kernel runs: buffers for a queue of launches of every rank on the
  // current device, and its side stream.
  static Status warmPool();
  LaunchBuffer() = default;
  char* host() const;
  char* device() const;
  char* hostMappedOnDevice() const;  // host() as kernels address it
  struct Allocation;                 // the pool's record (launch_pool.cc)

 private:
  std::shared_ptr<Allocation> alloc_;
};

}  // namespace coll::gpu

// Launch memory recycled between kernel launches (gpu::LaunchBuffer, src/cuda/gpu.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "cuda/check.h"
#include "cuda/gpu.h"

namespace coll::gpu {

struct LaunchBuffer::Allocation {
  void* host = nullptr;
  void* dev = nullptr;
  void* mapped = nullptr;  // host as kernels address it (asked once, when made)
  size_t bytes = 0;
  int device = -1;
  void* stream = nullptr;  // of the launch holding it
};

namespace {

using Allocation = LaunchBuffer::Allocation;

std::mutex gPoolMu;
std::condition_variable gPoolCv;
std::multimap<std::pair<int, size_t>, Allocation> gPool;  // free buffers by (device, size)
std::map<std::pair<int, void*>, int> gInFlight;           // buffers held, by (device, stream)
std::map<int, int> gBuffers, gWarmTarget;                 // buffers made / wanted, by device

// Returns a buffer: one a launch held (`held`), or a new one.
void poolPut(const Allocation& b, bool held = true) {
  {
    std::lock_guard<std::mutex> lock(gPoolMu);
    auto it = held ? gInFlight.find(std::make_pair(b.device, b.stream)) : gInFlight.end();
    if (it != gInFlight.end() && --it->second == 0) gInFlight.erase(it);
    gPool.emplace(std::make_pair(b.device, b.bytes), b);
  }
  gPoolCv.notify_all();
}

Result<Allocation> newAllocation(int device, size_t bytes) {
  Allocation b;
  b.device = device;
  b.bytes = 64 << 10;
  while (b.bytes < bytes) b.bytes *= 2;
  COLL_CHECK(check(cudaHostAlloc(&b.host, b.bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                   "cudaHostAlloc(" + std::to_string(b.bytes) + " bytes) for a device launch"));
  Status st = check(cudaMalloc(&b.dev, b.bytes), "cudaMalloc(" + std::to_string(b.bytes) + ") for a device launch");
  if (st.ok()) st = check(cudaHostGetDevicePointer(&b.mapped, b.host, 0), "cudaHostGetDevicePointer of a launch block");
  if (!st.ok()) {
    if (b.dev) cudaFree(b.dev);
    cudaFreeHost(b.host);
    return st;
  }
  std::lock_guard<std::mutex> lock(gPoolMu);
  ++gBuffers[device];
  return b;
}

// A free buffer of the device, or the wait described at LaunchBuffer::take.
Result<Allocation> poolGet(size_t bytes, void* stream) {
  int device = -1;
  COLL_CHECK(check(cudaGetDevice(&device), "cudaGetDevice"));
  const auto key = std::make_pair(device, stream);
  std::unique_lock<std::mutex> lock(gPoolMu);
  for (;;) {
    auto it = gPool.lower_bound(std::make_pair(device, bytes));
    if (it != gPool.end() && it->first.first == device) {
      Allocation b = it->second;
      gPool.erase(it);
      b.stream = stream;
      ++gInFlight[key];
      return b;
    }
    if (gInFlight.count(key) == 0) break;
    gPoolCv.wait_for(lock, std::chrono::milliseconds(100));
  }
  lock.unlock();
  COLL_ASSIGN(Allocation b, newAllocation(device, bytes));
  b.stream = stream;
  lock.lock();
  ++gInFlight[key];
  return b;
}

}  // namespace

Result<LaunchBuffer> LaunchBuffer::take(size_t bytes, void* stream) {
  COLL_ASSIGN(Allocation b, poolGet(bytes, stream));
  LaunchBuffer out;
  out.alloc_ = std::shared_ptr<Allocation>(new Allocation(b), [](Allocation* p) {
    poolPut(*p);
    delete p;
  });
  return out;
}

Status LaunchBuffer::warmPool() {
  // Buffers for a queue of launches of every rank on the device (a benchmark enqueues
  // many before it waits), so that a stream's first launches rarely find none free
  // while other ranks' kernels run (take: later ones wait for their own stream).
  // 16: the H100 run queued 20 launches per rank; a buffer comes back only when the proxy
  // has seen its launch end, hundreds of microseconds later.
  constexpr int kWarmPerRank = 16;
  int device = -1;
  COLL_CHECK(check(cudaGetDevice(&device), "cudaGetDevice"));
  COLL_ASSIGN(void* side, sideStream(device));  // made now, used on first-use connecting
  (void)side;
  int missing;
  {
    std::lock_guard<std::mutex> lock(gPoolMu);
    int& target = gWarmTarget[device];
    target = std::max(target + kWarmPerRank, 2 * kWarmPerRank);
    missing = target - gBuffers[device];
  }
  std::vector<Allocation> made;
  for (int i = 0; i < missing; ++i) {
    COLL_ASSIGN(Allocation b, newAllocation(device, 1));
    made.push_back(b);
  }
  for (const Allocation& b : made) poolPut(b, false);
  return okStatus();
}

char* LaunchBuffer::host() const { return static_cast<char*>(alloc_->host); }
char* LaunchBuffer::device() const { return static_cast<char*>(alloc_->dev); }

char* LaunchBuffer::hostMappedOnDevice() const { return static_cast<char*>(alloc_->mapped); }

}  // namespace coll::gpu

// What one step of the device executor costs on the GPU, without the library: the
// leader's fence and release store after a slice, and a round trip between two kernels on
// two streams of one GPU (two ranks as threads) through flags in device memory or in
// mapped host memory, at system or GPU scope. The H100 run of 2026-11-26 found ~4-8 us
// per step of a lane even where nothing waited (docs/PERFORMANCE.md); this says which part.
// Then what the host pays per call for what a device launch queues: a kernel launch with
// 64 bytes of parameters and with the executor's 8 KiB image (also from two threads at
// once, as two thread ranks launch), an event record, an 8 KiB pinned copy (the timing
// log's "to queued" held 9.5-14.8 us of an 8-byte allreduce).
//
//   handshake_perf [-n rounds]      exits 2 without a usable GPU
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr int kThreads = 512;

template <bool kSys>
__device__ void fence() {
  if (kSys) __threadfence_system();
  else __threadfence();
}
template <bool kSys>
__device__ void release(uint32_t* p, uint32_t v) {
  if (kSys) asm volatile("st.release.sys.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
template <bool kSys>
__device__ uint32_t acquire(const uint32_t* p) {
  uint32_t v;
  if (kSys) asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// A step that waits for nothing: the block's barrier, the leader's fence and release
// store, the barrier again (device_lane.h's order).
template <bool kSys>
__global__ void steps(uint32_t* word, int n) {
  for (int i = 1; i <= n; ++i) {
    __syncthreads();
    if (threadIdx.x == 0) {
      fence<kSys>();
      release<kSys>(word, static_cast<uint32_t>(i));
    }
    __syncthreads();
  }
}

// A slice's end as the executor publishes it: the counters of a slot received and one
// sent (head, size, tail), all in device memory; kNote first writes the step to mapped
// host memory, as the lane's progress note does. kOld: the fence, then three release
// stores (each a fence of its own); else the size before the fence and the counters as
// relaxed stores after it (one fence).
template <bool kOld, bool kNote>
__global__ void publish(uint32_t* word, uint32_t* note, int n) {
  for (int i = 1; i <= n; ++i) {
    __syncthreads();
    if (threadIdx.x == 0) {
      const auto v = static_cast<uint32_t>(i);
      if (kNote) asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(note), "r"(v) : "memory");
      if (kOld) {
        __threadfence_system();
        release<true>(word, v);
        release<true>(word + 16, v);
        release<true>(word + 32, v);
      } else {
        asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(word + 16), "r"(v) : "memory");
        __threadfence_system();
        asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(word), "r"(v) : "memory");
        asm volatile("st.relaxed.sys.u32 [%0], %1;" ::"l"(word + 32), "r"(v) : "memory");
      }
    }
    __syncthreads();
  }
}

// One side of a ping-pong: side 0 posts round i on mine, waits for it on theirs; side 1
// waits first. The leader polls (optionally sleeping 100 ns a turn, as the executor).
template <bool kSys, bool kSleep>
__global__ void pingPong(uint32_t* mine, const uint32_t* theirs, int n, int side) {
  __shared__ int go;
  for (int i = 1; i <= n; ++i) {
    if (threadIdx.x == 0) {
      if (side == 0) {
        fence<kSys>();
        release<kSys>(mine, static_cast<uint32_t>(i));
      }
      while (acquire<kSys>(theirs) < static_cast<uint32_t>(i))
        if (kSleep) __nanosleep(100);
      if (side == 1) {
        fence<kSys>();
        release<kSys>(mine, static_cast<uint32_t>(i));
      }
      go = i;
    }
    __syncthreads();
    (void)go;
    __syncthreads();
  }
}

// Empty kernels taking 64 bytes and 8 KiB (the executor's plan image, device_lane.h
// kDeviceParamBytes) of parameters: the driver copies all of them per launch.
template <int kBytes>
struct Params {
  uint64_t w[kBytes / 8];
};
template <int kBytes>
__global__ void empty(const __grid_constant__ Params<kBytes> p) {
  if (p.w[0] == 1 && threadIdx.x == 1024) asm volatile("trap;");  // reads the parameters
}

// Host microseconds per call of f, n calls in a row, then the stream drained.
template <typename F>
double hostUs(cudaStream_t s, int n, F f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  const auto t1 = std::chrono::steady_clock::now();
  cudaStreamSynchronize(s);
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
}

template <int kBytes>
double launchUs(cudaStream_t s, int n) {
  Params<kBytes> p{};
  return hostUs(s, n, [&] { empty<kBytes><<<1, 32, 0, s>>>(p); });
}

// The same from two threads at once, each on its own stream: the mean of their figures.
template <int kBytes>
double launchUsTwoThreads(cudaStream_t s0, cudaStream_t s1, int n) {
  double a = 0, b = 0;
  std::thread other([&] { b = launchUs<kBytes>(s1, n); });
  a = launchUs<kBytes>(s0, n);
  other.join();
  return (a + b) / 2;
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "handshake_perf: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Microseconds per step (or round trip) of one variant, timed with events on s0.
template <typename Launch>
double timed(cudaStream_t s0, cudaStream_t s1, int n, Launch launch) {
  cudaEvent_t a, b, c;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventCreate(&c);
  cudaEventRecord(a, s0);
  cudaStreamWaitEvent(s1, a, 0);
  launch(s0, s1);
  cudaEventRecord(c, s1);
  cudaStreamWaitEvent(s0, c, 0);
  cudaEventRecord(b, s0);
  float ms = -1;
  if (ok(cudaEventSynchronize(b), "run") && ok(cudaGetLastError(), "launch")) cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaEventDestroy(c);
  return ms < 0 ? -1 : ms * 1000.0 / n;
}

// Flags: 2 words (one per side), zeroed, in device or mapped host memory.
uint32_t* flags(bool host) {
  void* p = nullptr;
  if (host) {
    if (!ok(cudaHostAlloc(&p, 256, cudaHostAllocMapped), "cudaHostAlloc")) return nullptr;
    std::memset(p, 0, 256);
    void* d = nullptr;
    if (!ok(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer")) return nullptr;
    return static_cast<uint32_t*>(d);
  }
  if (!ok(cudaMalloc(&p, 256), "cudaMalloc") || !ok(cudaMemset(p, 0, 256), "cudaMemset")) return nullptr;
  return static_cast<uint32_t*>(p);
}

template <bool kOld, bool kNote>
double publishCost(cudaStream_t s0, cudaStream_t s1, int n) {
  uint32_t* f = flags(false);
  uint32_t* h = flags(true);
  if (!f || !h) return -1;
  return timed(s0, s1, n, [&](cudaStream_t a, cudaStream_t) { publish<kOld, kNote><<<1, kThreads, 0, a>>>(f, h, n); });
}

template <bool kSys, bool kSleep>
double roundTrip(bool host, cudaStream_t s0, cudaStream_t s1, int n) {
  uint32_t* f = flags(host);
  if (!f) return -1;
  return timed(s0, s1, n, [&](cudaStream_t a, cudaStream_t b) {
    pingPong<kSys, kSleep><<<1, kThreads, 0, a>>>(f, f + 32, n, 0);
    pingPong<kSys, kSleep><<<1, kThreads, 0, b>>>(f + 32, f, n, 1);
  });
}

template <bool kSys>
double stepCost(bool host, cudaStream_t s0, cudaStream_t s1, int n) {
  uint32_t* f = flags(host);
  if (!f) return -1;
  return timed(s0, s1, n, [&](cudaStream_t a, cudaStream_t) { steps<kSys><<<1, kThreads, 0, a>>>(f, n); });
}

}  // namespace

int main(int argc, char** argv) {
  int n = 20000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "-n") == 0) n = std::atoi(argv[i + 1]);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "handshake_perf: no usable CUDA device\n");
    return 2;
  }
  cudaStream_t s0, s1;
  cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  (void)roundTrip<true, true>(false, s0, s1, 100);  // warm-up: module load
  std::printf("# %d rounds each; us per step (one block, nothing awaited) or per round trip (two kernels)\n", n);
  std::printf("%-50s %10s\n", "variant", "us");
  auto row = [](const char* what, double us) { std::printf("%-50s %10.3f\n", what, us); };
  row("step, device word, sys fence + release", stepCost<true>(false, s0, s1, n));
  row("step, device word, gpu fence + release", stepCost<false>(false, s0, s1, n));
  row("step, host word, sys fence + release", stepCost<true>(true, s0, s1, n));
  row("slice end, fence + 3 release stores", publishCost<true, false>(s0, s1, n));
  row("slice end, one fence, relaxed counters", publishCost<false, false>(s0, s1, n));
  row("slice end after a host note, fence + 3 release", publishCost<true, true>(s0, s1, n));
  row("slice end after a host note, one fence", publishCost<false, true>(s0, s1, n));
  row("round trip, device flags, sys, nanosleep", roundTrip<true, true>(false, s0, s1, n));
  row("round trip, device flags, sys, spin", roundTrip<true, false>(false, s0, s1, n));
  row("round trip, device flags, gpu, nanosleep", roundTrip<false, true>(false, s0, s1, n));
  row("round trip, device flags, gpu, spin", roundTrip<false, false>(false, s0, s1, n));
  row("round trip, host flags, sys, nanosleep", roundTrip<true, true>(true, s0, s1, n));
  const int calls = std::min(n, 2000);
  (void)launchUs<8192>(s0, 10);  // warm-up
  row("host: launch, 64 B of parameters", launchUs<64>(s0, calls));
  row("host: launch, 8 KiB of parameters", launchUs<8192>(s0, calls));
  row("host: launch, 64 B, two threads at once", launchUsTwoThreads<64>(s0, s1, calls));
  row("host: launch, 8 KiB, two threads at once", launchUsTwoThreads<8192>(s0, s1, calls));
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  row("host: cudaEventRecord", hostUs(s0, calls, [&] { cudaEventRecord(e, s0); }));
  cudaEventDestroy(e);
  void *pinned = nullptr, *dev = nullptr;
  if (ok(cudaHostAlloc(&pinned, 8192, 0), "cudaHostAlloc") && ok(cudaMalloc(&dev, 8192), "cudaMalloc"))
    row("host: cudaMemcpyAsync, 8 KiB pinned to device",
        hostUs(s0, calls, [&] { cudaMemcpyAsync(dev, pinned, 8192, cudaMemcpyHostToDevice, s0); }));
  return ok(cudaGetLastError(), "the host-cost rows") ? 0 : 1;
}

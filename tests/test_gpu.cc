// [gpu] tests: the device kernels against the host kernels, every type x op, bit for bit;
// every collective on device buffers against the host executor, bit for bit.
// Without a usable CUDA device (no driver, no GPU) they print why and pass without
// checking, so CI (no GPU) stays green; run them on a GPU machine.
#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <algorithm>
#include <cstdlib>

#include <catch2/catch.hpp>

#include "collectives/collectives.h"
#include "base/datatype.h"
#include "cuda/gpu.h"
#include "kernels/device_reduce.h"
#include "kernels/element_io.h"
#include "kernels/host_reduce.h"

using namespace coll;

namespace {

void fillRandom(std::vector<unsigned char>& buf, size_t n, collDataType_t t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    if (isIntegerType(t)) storeIntElement(buf.data(), i, t, rng());
    else storeFloatElement(buf.data(), i, t, static_cast<double>(static_cast<int64_t>(rng() % 4001) - 2000) / 37.0);
  }
}

}  // namespace

TEST_CASE("device reduction kernels equal the host kernels bit for bit", "[gpu][kernels]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  const size_t n = 100003;  // odd: vector body and scalar tail
  for (int t = 0; t < collNumTypes; ++t)
    for (int o = 0; o < collNumOps; ++o)
      for (bool final : {false, true})
        for (size_t off : {size_t{0}, size_t{1}}) {  // aligned (vectors) and not (scalar)
          auto type = static_cast<collDataType_t>(t);
          auto op = static_cast<collRedOp_t>(o);
          const size_t es = dataTypeSize(type), bytes = (n + off) * es;
          INFO(dataTypeName(type) << " " << redOpName(op) << (final ? " final" : "") << " offset " << off);
          std::vector<unsigned char> a(bytes), b(bytes), want(bytes), got(bytes);
          fillRandom(a, n + off, type, 1 + t * 10 + o);
          fillRandom(b, n + off, type, 1000 + t * 10 + o);
          const ReduceKernels& k = hostReduceKernels(type, op);
          if (final) k.final(want.data() + off * es, a.data() + off * es, b.data() + off * es, n, 3);
          else k.reduce(want.data() + off * es, a.data() + off * es, b.data() + off * es, n);
          char *da = nullptr, *db = nullptr, *dd = nullptr;
          REQUIRE(cudaMalloc(&da, bytes) == cudaSuccess);
          REQUIRE(cudaMalloc(&db, bytes) == cudaSuccess);
          REQUIRE(cudaMalloc(&dd, bytes) == cudaSuccess);
          REQUIRE(cudaMemcpy(da, a.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
          REQUIRE(cudaMemcpy(db, b.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
          Status st = deviceReduce(dd + off * es, da + off * es, db + off * es, n, type, op, final, 3, nullptr);
          INFO(st.message());
          REQUIRE(st.ok());
          REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
          REQUIRE(cudaMemcpy(got.data(), dd, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
          cudaFree(da);
          cudaFree(db);
          cudaFree(dd);
          size_t bad = n;
          for (size_t i = 0; i < n && bad == n; ++i)
            if (std::memcmp(got.data() + (off + i) * es, want.data() + (off + i) * es, es) != 0) bad = i;
          INFO("first difference at element " << bad);
          CHECK(bad == n);
        }
}

TEST_CASE("device kernels without a usable device fail with the driver's reason", "[gpu]") {
  std::string why;
  if (gpu::usable(&why)) {
    WARN("skipped: a CUDA device is usable here");
    return;
  }
  std::vector<float> a(16, 1.0f), d(16);
  Status st = deviceReduce(d.data(), a.data(), a.data(), a.size(), collFloat32, collSum, false, 1, nullptr);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("reduction kernel launch"));
  CHECK_FALSE(why.empty());
}

namespace {

#define CUDA_OK(call) REQUIRE((call) == cudaSuccess)

enum class GColl { kAllReduce, kReduceScatter, kReduce, kBroadcast, kAllGather, kSendRecv };
const char* gcollName(GColl c) {
  static const char* k[] = {"allreduce", "reducescatter", "reduce", "broadcast", "allgather", "sendrecv"};
  return k[static_cast<int>(c)];
}

// Elements a rank sends and receives for one call of count elements.
void gsizes(GColl c, size_t count, int n, size_t* in, size_t* out) {
  *in = c == GColl::kReduceScatter ? count * n : count;
  *out = c == GColl::kAllGather ? count * n : count;
}

// A rank's stream and device buffers, made and freed by the main thread while no
// collective runs.
struct RankDevice {
  cudaStream_t stream = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  char* host = nullptr;  // pinned, as large as each device buffer
  int dev = 0;
  RankDevice() = default;
  RankDevice(const RankDevice&) = delete;
  RankDevice& operator=(const RankDevice&) = delete;
  std::string init(int device, size_t bytes, bool nonBlocking) {
    dev = device;
    if (cudaSetDevice(dev) != cudaSuccess) return "cudaSetDevice failed";
    cudaError_t err = nonBlocking ? cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)
                                  : cudaStreamCreate(&stream);
    if (err != cudaSuccess) return std::string("cudaStreamCreate: ") + cudaGetErrorString(err);
    if (cudaMalloc(&send, bytes) != cudaSuccess || cudaMalloc(&recv, bytes) != cudaSuccess) return "cudaMalloc failed";
    if (cudaMallocHost(&host, bytes) != cudaSuccess) return "cudaMallocHost failed";
    return "";
  }
  ~RankDevice() {
    cudaSetDevice(dev);
    if (send) cudaFree(send);
    if (recv) cudaFree(recv);
    if (host) cudaFreeHost(host);
    if (stream) cudaStreamDestroy(stream);
  }
};

// One call; buffers may be host or device (the library decides), `stream` for device.
collResult_t gcall(GColl c, const char* sb, char* rb, size_t count, collDataType_t t, collRedOp_t op, int rank, int n,
                   bool inPlace, collComm_t comm, cudaStream_t stream) {
  const size_t es = dataTypeSize(t);
  const char* in = inPlace ? rb : sb;
  switch (c) {
    case GColl::kAllReduce: return collAllReduce(in, rb, count, t, op, comm, stream);
    case GColl::kReduce: return collReduce(in, rb, count, t, op, n - 1, comm, stream);
    case GColl::kBroadcast: return collBroadcast(in, rb, count, t, 0, comm, stream);
    case GColl::kAllGather: return collAllGather(inPlace ? rb + rank * count * es : sb, rb, count, t, comm, stream);
    case GColl::kReduceScatter:
      return collReduceScatter(sb, inPlace ? const_cast<char*>(sb) + rank * count * es : rb, count, t, op, comm,
                               stream);
    case GColl::kSendRecv: {
      collGroupStart();
      collSend(sb, count, t, (rank + 1) % n, comm, stream);
      collRecv(rb, count, t, (rank + n - 1) % n, comm, stream);
      return collGroupEnd();
    }
  }
  return collInternalError;
}

// Runs every case on n threads-as-ranks twice: on device buffers (ranks bound to
// devlist) and on host buffers with the host executor's ring (one-shot and direct reads
// off, so both reduce in the same order), and compares the results bitwise.
std::string compareWithHost(int n, const std::vector<int>& devlist) {
  // Streams and the largest buffers, made before any rank runs a collective: cudaMalloc,
  // cudaFree and stream creation may wait for the kernels running on the GPU, one of
  // which may be waiting for the calling rank (a deadlock the library cannot see).
  const size_t maxBytes = size_t{262147} * 8 * static_cast<size_t>(n);
  std::vector<RankDevice> rd(n);
  for (int rank = 0; rank < n; ++rank) {
    std::string e = rd[rank].init(devlist[rank], maxBytes, true);
    if (!e.empty()) return "rank " + std::to_string(rank) + ": " + e;
  }
  std::vector<collComm_t> dcomms(n), hcomms(n);
  if (collCommInitAll(dcomms.data(), n, devlist.data()) != collSuccess) return collGetLastError(nullptr);
  if (collCommInitAll(hcomms.data(), n, nullptr) != collSuccess) return collGetLastError(nullptr);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank)
    threads.emplace_back([&, rank] {
      std::string& e = errors[rank];
      cudaSetDevice(devlist[rank]);
      cudaStream_t stream = rd[rank].stream;
      char* const dsb = rd[rank].send;
      char* const drb = rd[rank].recv;
      uint64_t seed = 1;
      for (GColl c : {GColl::kAllReduce, GColl::kReduceScatter, GColl::kReduce, GColl::kBroadcast, GColl::kAllGather,
                      GColl::kSendRecv})
        for (collDataType_t t : {collFloat32, collFloat16, collBfloat16, collInt32, collFloat8e4m3, collFloat64})
          for (collRedOp_t op : {collSum, collProd, collMax, collMin, collAvg})
            for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{262147}})
              for (bool inPlace : {false, true}) {
                const bool reduces = c == GColl::kAllReduce || c == GColl::kReduceScatter || c == GColl::kReduce;
                if ((!reduces && op != collSum) || (c == GColl::kSendRecv && inPlace) || !e.empty()) continue;
                const size_t es = dataTypeSize(t);
                size_t nin, nout;
                gsizes(c, count, n, &nin, &nout);
                const size_t sbytes = std::max(nin, nout) * es, rbytes = nout * es;
                std::vector<unsigned char> hs(sbytes), hr(rbytes, 0x5c), ds(sbytes), dr(rbytes);
                fillRandom(hs, sbytes / es, t, seed++ * 131 + rank);
                if (inPlace) {  // the input where the call reads it
                  if (c == GColl::kAllGather) std::memcpy(hr.data() + rank * count * es, hs.data(), count * es);
                  else if (c != GColl::kReduceScatter) std::memcpy(hr.data(), hs.data(), nin * es);
                }
                // On the rank's own (non-blocking) stream: a cudaMemcpy from pageable memory
                // may return before its DMA lands, and a non-blocking stream does not wait
                // for the legacy one (the H100 run: a 1-rank copy kernel read the buffer
                // before the input arrived).
                cudaMemcpyAsync(dsb, hs.data(), sbytes, cudaMemcpyHostToDevice, stream);
                cudaMemcpyAsync(drb, hr.data(), rbytes, cudaMemcpyHostToDevice, stream);
                if (cudaStreamSynchronize(stream) != cudaSuccess) e = "input copies failed";
                std::string what = std::string(gcollName(c)) + " " + dataTypeName(t) + " " + redOpName(op) + " count " +
                                   std::to_string(count) + (inPlace ? " in-place" : "") + " rank " +
                                   std::to_string(rank) + " of " + std::to_string(n);
                collResult_t rd = gcall(c, dsb, drb, count, t, op, rank, n, inPlace, dcomms[rank], stream);
                collResult_t rh = gcall(c, reinterpret_cast<const char*>(hs.data()), reinterpret_cast<char*>(hr.data()),
                                        count, t, op, rank, n, inPlace, hcomms[rank], nullptr);
                if (rd != collSuccess) e = what + ": device call: " + collGetLastError(dcomms[rank]);
                else if (rh != collSuccess) e = what + ": host call: " + collGetLastError(hcomms[rank]);
                else if (cudaStreamSynchronize(stream) != cudaSuccess) e = what + ": stream failed";
                if (e.empty()) {
                  collResult_t async = collSuccess;
                  collCommGetAsyncError(dcomms[rank], &async);
                  if (async != collSuccess) e = what + ": async error: " + collGetLastError(dcomms[rank]);
                }
                cudaMemcpy(ds.data(), dsb, sbytes, cudaMemcpyDeviceToHost);
                cudaMemcpy(dr.data(), drb, rbytes, cudaMemcpyDeviceToHost);
                if (!e.empty()) continue;
                const bool rootOnly = c == GColl::kReduce && rank != n - 1;
                if (c == GColl::kReduceScatter && inPlace) {
                  if (std::memcmp(ds.data() + rank * count * es, hs.data() + rank * count * es, count * es) != 0)
                    e = what + ": differs from the host executor";
                } else if (!rootOnly && std::memcmp(dr.data(), hr.data(), rbytes) != 0) {
                  e = what + ": differs from the host executor";
                }
              }
    });
  for (auto& th : threads) th.join();
  for (int r = 0; r < n; ++r) {
    collCommDestroy(dcomms[r]);
    collCommDestroy(hcomms[r]);
  }
  std::string all;
  for (auto& e : errors)
    if (!e.empty()) all += e + "\n";
  return all;
}

// For the scope: the host executor runs every size on its ring (no one-shots, no direct
// reads of peers' host buffers), the reference compareWithHost checks against.
struct HostCompareEnv {
  HostCompareEnv() {
    setenv("COLL_ONESHOT_BYTES", "0", 1);
    setenv("COLL_NET_ONESHOT_BYTES", "0", 1);
    setenv("COLL_DIRECT", "0", 1);
  }
  ~HostCompareEnv() {
    unsetenv("COLL_ONESHOT_BYTES");
    unsetenv("COLL_NET_ONESHOT_BYTES");
    unsetenv("COLL_DIRECT");
  }
};

}  // namespace

TEST_CASE("every collective on device buffers equals the host executor, ranks as threads", "[gpu][collectives]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  HostCompareEnv env;
  int ndev = 0;
  CUDA_OK(cudaGetDeviceCount(&ndev));
  for (int n : {1, 2, 4, 8}) {
    std::vector<int> oneGpu(n, 0), spread(n);
    for (int i = 0; i < n; ++i) spread[i] = i % ndev;
    INFO(n << " ranks on GPU 0");
    CHECK(compareWithHost(n, oneGpu) == "");  // == "": a failure prints the message
    if (ndev > 1) {
      INFO(n << " ranks over " << ndev << " GPUs");
      CHECK(compareWithHost(n, spread) == "");
    }
  }
}

// The direct route (algorithms.h buildDirectAllReduce: thread ranks on one GPU read each
// other's buffers) at every size, in place and not: the same bits as the host's ring.
TEST_CASE("direct allreduces of thread ranks on one GPU equal the host executor", "[gpu][collectives][direct]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  HostCompareEnv env;
  setenv("COLL_DEVICE_DIRECT_MIN_BYTES", "1", 1);
  for (int n : {2, 3, 8}) {
    INFO(n << " ranks on GPU 0, every allreduce direct");
    CHECK(compareWithHost(n, std::vector<int>(n, 0)) == "");
  }
  unsetenv("COLL_DEVICE_DIRECT_MIN_BYTES");
}

// Send/recv peers are wired on first use, while other ranks' kernels may already run and
// wait for this rank. Users' streams are often blocking ones (plain cudaStreamCreate), and
// the legacy default stream waits for those: the library must not touch it (it zeroed
// p2p FIFOs with cudaMemset, which would then wait forever). Ranks start their first
// all-to-all 150 ms apart, so the later ones wire while the first ones' kernels run.
TEST_CASE("ranks on one GPU with blocking streams wire send/recv peers while others' kernels run",
          "[gpu][collectives][p2p]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  const int n = 4;
  const size_t count = 4099;
  std::vector<int> devlist(n, 0);
  std::vector<RankDevice> rd(n);
  for (int r = 0; r < n; ++r) REQUIRE(rd[r].init(0, count * n * sizeof(float), false).empty());
  std::vector<collComm_t> comms(n);
  REQUIRE(collCommInitAll(comms.data(), n, devlist.data()) == collSuccess);
  std::vector<std::string> errors(n);
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank)
    threads.emplace_back([&, rank] {
      std::string& e = errors[rank];
      cudaSetDevice(0);
      float* sb = reinterpret_cast<float*>(rd[rank].send);
      float* rb = reinterpret_cast<float*>(rd[rank].recv);
      // Copies through pinned memory on the rank's own stream: a plain cudaMemcpy would
      // run on the legacy default stream and wait for the other ranks' kernels.
      float* h = reinterpret_cast<float*>(rd[rank].host);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i)
          h[p * count + i] = static_cast<float>(rank * 100 + p) + static_cast<float>(i % 7);
      cudaMemcpyAsync(sb, h, count * n * sizeof(float), cudaMemcpyHostToDevice, rd[rank].stream);
      cudaStreamSynchronize(rd[rank].stream);
      std::this_thread::sleep_for(std::chrono::milliseconds(150 * rank));
      collGroupStart();
      for (int p = 0; p < n; ++p) {
        collSend(sb + p * count, count, collFloat, p, comms[rank], rd[rank].stream);
        collRecv(rb + p * count, count, collFloat, p, comms[rank], rd[rank].stream);
      }
      if (collGroupEnd() != collSuccess) e = std::string("all-to-all: ") + collGetLastError(comms[rank]);
      if (e.empty() && cudaStreamSynchronize(rd[rank].stream) != cudaSuccess) e = "stream failed";
      if (e.empty()) {
        cudaMemcpyAsync(h, rb, count * n * sizeof(float), cudaMemcpyDeviceToHost, rd[rank].stream);
        if (cudaStreamSynchronize(rd[rank].stream) != cudaSuccess) e = "copy back failed";
        for (int p = 0; p < n && e.empty(); ++p)
          for (size_t i = 0; i < count; ++i)
            if (h[p * count + i] != static_cast<float>(p * 100 + rank) + static_cast<float>(i % 7)) {
              e = "rank " + std::to_string(rank) + ": element " + std::to_string(i) + " from rank " +
                  std::to_string(p) + " wrong";
              break;
            }
      }
      ++finished;
    });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (finished.load() < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (finished.load() < n) {  // threads stuck in CUDA calls cannot be joined: report and stop
    std::fprintf(stderr, "FAILED: first-use wiring on one GPU with blocking streams hung (%d of %d ranks done)\n",
                 finished.load(), n);
    std::_Exit(1);
  }
  for (auto& th : threads) th.join();
  for (auto& e : errors) CHECK(e == "");
  for (int r = 0; r < n; ++r) collCommDestroy(comms[r]);
}

TEST_CASE("one thread drives device collectives of all ranks in a group", "[gpu][collectives][group]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  const int n = 4;
  const size_t count = 1 << 20;
  std::vector<int> devlist(n, 0);
  collComm_t comms[n];
  REQUIRE(collCommInitAll(comms, n, devlist.data()) == collSuccess);
  // Every rank on one stream: the group's ranks must run in one kernel, or the first
  // rank's kernel would wait forever for ranks queued behind it.
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<float*> buf(n);
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaMalloc(&buf[r], count * sizeof(float)));
    std::vector<float> h(count, static_cast<float>(r + 1));
    CUDA_OK(cudaMemcpy(buf[r], h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  }
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collAllReduce(buf[r], buf[r], count, collFloat, collSum, comms[r], stream) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  CUDA_OK(cudaStreamSynchronize(stream));
  for (int r = 0; r < n; ++r) {
    std::vector<float> h(count);
    CUDA_OK(cudaMemcpy(h.data(), buf[r], count * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(h[0] == 10.0f);
    CHECK(h[count - 1] == 10.0f);
    cudaFree(buf[r]);
    collCommDestroy(comms[r]);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("device and host buffers in one call, or device buffers on a host rank, are refused by name", "[gpu][api]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  float* d = nullptr;
  REQUIRE(cudaMalloc(&d, 64 * sizeof(float)) == cudaSuccess);
  std::vector<float> h(64);
  int dev0 = 0;
  collComm_t comm = nullptr;
  REQUIRE(collCommInitAll(&comm, 1, &dev0) == collSuccess);
  CHECK(collAllReduce(d, h.data(), 64, collFloat, collSum, comm, nullptr) == collInvalidArgument);
  CHECK_THAT(std::string(collGetLastError(comm)),
             Catch::Contains("sendbuff is CUDA device memory but recvbuff is host"));
  collCommDestroy(comm);
  // Two ranks of this process on one device, each on the legacy default stream: refused
  // (their kernels would serialise and wait for each other forever).
  {
    int both[2] = {0, 0};
    collComm_t two[2];
    REQUIRE(collCommInitAll(two, 2, both) == collSuccess);
    collResult_t res[2];
    std::vector<std::thread> ts;
    for (int r = 0; r < 2; ++r)
      ts.emplace_back([&, r] {
        cudaSetDevice(0);
        res[r] = collAllReduce(d, d, 64, collFloat, collSum, two[r], nullptr);
      });
    for (auto& t : ts) t.join();
    for (int r = 0; r < 2; ++r) {
      CHECK(res[r] == collInvalidUsage);
      CHECK_THAT(std::string(collGetLastError(two[r])), Catch::Contains("legacy default stream"));
      collCommDestroy(two[r]);
    }
  }
  // A host-memory rank (no devlist) given device buffers.
  REQUIRE(collCommInitAll(&comm, 1, nullptr) == collSuccess);
  CHECK(collAllReduce(d, d, 64, collFloat, collSum, comm, nullptr) == collInvalidUsage);
  CHECK_THAT(std::string(collGetLastError(comm)), Catch::Contains("not bound to a CUDA device"));
  collCommDestroy(comm);
  cudaFree(d);
}

TEST_CASE("collCommInitAll binds rank i to devlist[i], several ranks per device allowed", "[gpu][api]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    int dl[2] = {0, 0};
    collComm_t comms[2] = {nullptr, nullptr};
    CHECK(collCommInitAll(comms, 2, dl) == collInvalidArgument);
    CHECK_THAT(std::string(collGetLastError(nullptr)), Catch::Contains("no CUDA device is usable"));
    return;
  }
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  int dl[2] = {0, count - 1};
  collComm_t comms[2] = {nullptr, nullptr};
  REQUIRE(collCommInitAll(comms, 2, dl) == collSuccess);
  for (int i = 0; i < 2; ++i) {
    int dev = -2;
    REQUIRE(collCommCuDevice(comms[i], &dev) == collSuccess);
    CHECK(dev == dl[i]);
    collCommDestroy(comms[i]);
  }
  int bad[1] = {count};
  CHECK(collCommInitAll(comms, 1, bad) == collInvalidArgument);
  CHECK_THAT(std::string(collGetLastError(nullptr)), Catch::Contains("is not a CUDA device"));
}

TEST_CASE("collCommInitRank binds the current device once the process has used CUDA there", "[gpu][api]") {
  std::string why;
  if (!gpu::usable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  const int want = count - 1;
  std::string err;
  int got = -2;
  std::thread t([&] {
    if (cudaSetDevice(want) != cudaSuccess) {
      err = "cudaSetDevice failed";
      return;
    }
    if (!gpu::started(want)) err = "gpu::started(" + std::to_string(want) + ") is false after cudaSetDevice";
    collUniqueId id;
    collComm_t comm = nullptr;
    if (collGetUniqueId(&id) != collSuccess || collCommInitRank(&comm, 1, id, 0) != collSuccess) {
      err = std::string("init: ") + collGetLastError(nullptr);
      return;
    }
    collCommCuDevice(comm, &got);
    collCommDestroy(comm);
  });
  t.join();
  REQUIRE(err.empty());
  CHECK(got == want);
}

// [gpu] tests: the device kernels against the host kernels, every type x op, bit for bit.
// Without a usable CUDA device (no driver, no GPU) they print why and pass without
// checking, so CI (no GPU) stays green; run them on a GPU machine.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/collectives.h"
#include "core/datatype.h"
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
  if (!cudaDeviceUsable(&why)) {
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
  if (cudaDeviceUsable(&why)) {
    WARN("skipped: a CUDA device is usable here");
    return;
  }
  std::vector<float> a(16, 1.0f), d(16);
  Status st = deviceReduce(d.data(), a.data(), a.data(), a.size(), collFloat32, collSum, false, 1, nullptr);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("reduction kernel launch"));
  CHECK_FALSE(why.empty());
}

TEST_CASE("device buffers are refused by name until the device path exists", "[gpu][api]") {
  std::string why;
  if (!cudaDeviceUsable(&why)) {
    WARN("skipped: no usable CUDA device (" << why << ")");
    return;
  }
  collComm_t comm = nullptr;
  REQUIRE(collCommInitAll(&comm, 1, nullptr) == collSuccess);
  float* d = nullptr;
  REQUIRE(cudaMalloc(&d, 64 * sizeof(float)) == cudaSuccess);
  CHECK(collAllReduce(d, d, 64, collFloat, collSum, comm, nullptr) == collInvalidUsage);
  CHECK_THAT(std::string(collGetLastError(comm)), Catch::Contains("sendbuff is CUDA device memory"));
  cudaFree(d);
  collCommDestroy(comm);
}

TEST_CASE("collCommInitAll binds rank i to devlist[i], several ranks per device allowed", "[gpu][api]") {
  std::string why;
  if (!cudaDeviceUsable(&why)) {
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

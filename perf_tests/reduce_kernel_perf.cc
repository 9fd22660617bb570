// reduce_kernel_perf: the device reduction kernel's bandwidth as a fraction of the
// device-to-device copy bandwidth, both measured in this run on the same buffers.
//
//   reduce_kernel_perf [-b 1M] [-e 256M] [-d float] [-o sum] [-n 20]
//
// Bandwidth counts bytes moved through memory: a copy of N bytes reads N and writes N
// (2N); a reduction of N-byte inputs reads 2N and writes N (3N). The fraction is the
// reduction's GB/s over the copy's. Exits 2 with the reason when no CUDA device is usable.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "base/datatype.h"
#include "base/param.h"
#include "cuda/gpu.h"
#include "kernels/device_reduce.h"
#include "perf.h"

using namespace coll;
using perf::parseType;
using perf::parseOp;

int main(int argc, char** argv) {
  CLI::App app{"reduce_kernel_perf: device reduction kernel vs device-to-device copy bandwidth"};
  std::string b = "1M", e = "256M", dt = "float", opName = "sum";
  int iters = 20;
  app.add_option("-b,--minbytes", b, "smallest input size");
  app.add_option("-e,--maxbytes", e, "largest input size");
  app.add_option("-d,--datatype", dt, "data type (as perf_tests)");
  app.add_option("-o,--op", opName, "sum prod max min avg");
  app.add_option("-n,--iters", iters, "timed iterations per size")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  collDataType_t type;
  collRedOp_t op;
  if (!parseType(dt, &type)) return std::fprintf(stderr, "-d %s: not a data type\n", dt.c_str()), 1;
  if (!parseOp(opName, &op)) return std::fprintf(stderr, "-o %s: not an operator\n", opName.c_str()), 1;
  int64_t lo64 = 0, hi64 = 0;
  if (!parseSize(b, &lo64) || lo64 < 1) return std::fprintf(stderr, "-b %s: not a size (4K, 1M, ...)\n", b.c_str()), 1;
  if (!parseSize(e, &hi64) || hi64 < lo64)
    return std::fprintf(stderr, "-e %s: not a size of at least -b\n", e.c_str()), 1;
  size_t lo = static_cast<size_t>(lo64), hi = static_cast<size_t>(hi64), es = dataTypeSize(type);
  std::string why;
  if (!gpu::usable(&why)) {
    std::fprintf(stderr, "reduce_kernel_perf: no usable CUDA device (%s)\n", why.c_str());
    return 2;
  }
  int dev = 0;
  cudaDeviceProp prop{};
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  char *x = nullptr, *y = nullptr, *z = nullptr;
  if (cudaMalloc(&x, hi) != cudaSuccess || cudaMalloc(&y, hi) != cudaSuccess || cudaMalloc(&z, hi) != cudaSuccess)
    return std::fprintf(stderr, "cudaMalloc of 3 x %zu bytes failed\n", hi), 1;
  cudaMemset(x, 0, hi);
  cudaMemset(y, 0, hi);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  std::printf("# %s, %s %s\n#%13s %12s %12s %12s %9s\n", prop.name, dataTypeName(type), redOpName(op), "bytes",
              "copy GB/s", "reduce GB/s", "reduce us", "fraction");
  for (size_t bytes = lo; bytes <= hi; bytes *= 2) {
    size_t n = bytes / es;
    auto timeIt = [&](auto&& body) {
      body();  // warm-up
      cudaEventRecord(t0);
      for (int i = 0; i < iters; ++i) body();
      cudaEventRecord(t1);
      cudaEventSynchronize(t1);
      float ms = 0;
      cudaEventElapsedTime(&ms, t0, t1);
      return static_cast<double>(ms) * 1e3 / iters;  // us per call
    };
    double copyUs = timeIt([&] { (void)deviceCopy(z, x, n * es, nullptr); });
    double redUs = timeIt([&] { (void)deviceReduce(z, x, y, n, type, op, false, 1, nullptr); });
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err)), 1;
    double copyBw = 2.0 * n * es / copyUs / 1e3, redBw = 3.0 * n * es / redUs / 1e3;
    std::printf("%14zu %12.1f %12.1f %12.2f %9.3f\n", n * es, copyBw, redBw, redUs, redBw / copyBw);
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
  return 0;
}

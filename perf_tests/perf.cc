#include "perf.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "base/datatype.h"
#include "base/param.h"
#include "device_mem.h"
#include "kernels/element_io.h"
#include "launch.h"
#include "transport_info.h"

namespace perf {

// ---------------------------------------------------------------- names and options

static const char* kTypeNames[] = {"int8", "uint8", "int32",  "uint32",   "int64",    "uint64",
                                   "half", "float", "double", "bfloat16", "fp8_e4m3", "fp8_e5m2"};
// nccl-tests' names, in its order: "mulsum" (kMulSum) follows the built-in ops.
static const char* kOpNames[] = {"sum", "prod", "max", "min", "avg", "mulsum"};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == kMulSum + 1);

const char* typeName(collDataType_t t) { return coll::validDataType(t) ? kTypeNames[t] : "?"; }
const char* opName(collRedOp_t op) { return op >= 0 && op <= kMulSum ? kOpNames[op] : "?"; }

bool parseType(const std::string& s, collDataType_t* t) {
  static const struct {
    const char* n;
    collDataType_t t;
  } kAliases[] = {{"char", collInt8},         {"int", collInt32},       {"float16", collFloat16},
                  {"fp16", collFloat16},      {"float32", collFloat32}, {"fp32", collFloat32},
                  {"float64", collFloat64},   {"bf16", collBfloat16},   {"f8e4m3", collFloat8e4m3},
                  {"f8e5m2", collFloat8e5m2}, {"e4m3", collFloat8e4m3}, {"e5m2", collFloat8e5m2}};
  for (int i = 0; i < collNumTypes; ++i)
    if (s == kTypeNames[i]) {
      *t = static_cast<collDataType_t>(i);
      return true;
    }
  for (auto& a : kAliases)
    if (s == a.n) {
      *t = a.t;
      return true;
    }
  return false;
}

bool parseOp(const std::string& s, collRedOp_t* op) {
  for (int i = 0; i <= kMulSum; ++i)
    if (s == kOpNames[i]) {
      *op = static_cast<collRedOp_t>(i);
      return true;
    }
  return false;
}

// ncclVerifiablePremulScalar(rank) of nccl-tests' verifiable/verifiable.h.
static int preMulScalarValue(int rank) { return rank % 2 == 0 ? 1 : 2; }

void preMulScalar(collDataType_t t, int rank, void* out) {
  const int v = preMulScalarValue(rank);
  if (coll::isIntegerType(t)) coll::storeIntElement(out, 0, t, static_cast<uint64_t>(v));
  else coll::storeFloatElement(out, 0, t, v);
}

static bool parseBytes(const std::string& s, size_t* out) {
  int64_t v;
  if (!coll::parseSize(s, &v) || v < 0) return false;
  *out = static_cast<size_t>(v);
  return true;
}

static const char* collProgram(Coll c) {
  static const char* k[] = {"all_reduce_perf", "all_gather_perf",     "broadcast_perf",
                            "reduce_perf",     "reduce_scatter_perf", "sendrecv_perf",
                            "alltoall_perf",   "gather_perf",         "scatter_perf"};
  return k[static_cast<int>(c)];
}
static bool hasOp(Coll c) { return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter; }
static bool hasRoot(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}
// The library stages an in-place alltoall's input on host buffers only (collectives.h).
static bool hasInPlace(Coll c, const std::string& mem) {
  return c != Coll::kSendRecv && (c != Coll::kAllToAll || mem == "host");
}

bool hasCompressed(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kAllGather || c == Coll::kBroadcast ||
         c == Coll::kReduce;
}

// --wire W: the wire type, for float buffers and the ops compressed collectives take
// (-o all: those four). "" or what is wrong; the data type and op come parsed (dt, op:
// as given).
static std::string applyWire(Coll coll, const std::string& wire, const std::string& dt, const std::string& op,
                             Options* o) {
  const std::string w = "--wire " + wire + ": ";
  if (!hasCompressed(coll))
    return w + collProgram(coll) + " has no compressed form (allreduce, reduce-scatter, allgather, broadcast, reduce)";
  collDataType_t t;
  if (!parseType(wire, &t) || (t != collFloat16 && t != collBfloat16))
    return w + "expected half (fp16) or bfloat16 (bf16)";
  if (o->types != std::vector<collDataType_t>{collFloat32})
    return w + "compressed collectives take float buffers, not -d " + dt;
  if (hasOp(coll) && op == "all") o->ops = {collSum, collMax, collMin, collAvg};
  if (o->ops[0] == collProd || o->ops[0] == kMulSum)
    return w + "compressed collectives reduce with sum, avg, max or min, not -o " + op;
  o->wire = t;
  return "";
}

int parseOptions(Coll coll, int argc, char** argv, Options* o, bool* stop) {
  *stop = false;
  CLI::App app{std::string(collProgram(coll)) + ": nccl-tests compatible benchmark of libcollectives (host buffers)"};
  std::string b = "32M", e = "32M", i = "1M", op = "sum", dt = "float", root = "0", wire;
  app.add_option("-b,--minbytes", b, "minimum size in bytes (K/M/G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", e, "maximum size in bytes")->capture_default_str();
  app.add_option("-i,--stepbytes", i, "size increment when no step factor is given")->capture_default_str();
  app.add_option("-f,--stepfactor", o->stepFactor, "size multiplication factor (> 1 enables it)")
      ->capture_default_str();
  app.add_option("-n,--iters", o->iters, "timed iterations")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  app.add_option("-w,--warmup_iters", o->warmupIters, "warmup iterations")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("-m,--agg_iters", o->aggIters, "operations grouped per iteration")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-c,--check", o->check, "verify results on fresh data (0/1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  app.add_option("-o,--op", op, "sum, prod, min, max, avg, mulsum (PreMulSum) or all")->capture_default_str();
  app.add_option("-d,--datatype", dt,
                 "int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 fp8_e4m3 fp8_e5m2, or all")
      ->capture_default_str();
  app.add_option("-r,--root", root, "root rank, or all")->capture_default_str();
  app.add_option("-z,--blocking", o->blocking, "blocking collectives (host buffers always block)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1));
  app.add_option("-a,--average", o->average, "time reported: 0 rank 0, 1 average, 2 min, 3 max over ranks")
      ->capture_default_str()
      ->check(CLI::Range(0, 3));
  app.add_option("-t,--nthreads", o->nthreads, "ranks as threads of this process")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("-g,--ngpus", o->ngpus, "GPUs per thread (host buffers: 1)")->capture_default_str();
  app.add_option("-J,--output_file", o->outputFile, "also write every row and the environment as JSON");
  app.add_option("--mem", o->mem, "buffer memory: host, device (CUDA), or auto: device where a GPU is usable")
      ->capture_default_str();
  app.add_option("--offset", o->offset,
                 "host buffers start this many bytes past a page boundary (0-4095; -1: where the "
                 "allocator puts them). Pinned and mmap'd buffers are page-aligned")
      ->capture_default_str()
      ->check(CLI::Range(-1, 4095));
  app.add_option("-R,--local_register", o->registerMode,
                 "host buffers from collMemAlloc, registered for the whole sweep: 0 no, 1 collCommRegister, "
                 "2 symmetric windows (processes of one host then read each other's buffers directly)")
      ->capture_default_str()
      ->check(CLI::Range(0, 2));
  app.add_flag("--copy_bound", o->copyBound,
               "all_reduce_perf: first time this machine's memcpy on as many threads as ranks (up to the "
               "cores) and print the busbw that memory traffic allows an allreduce of host buffers");
  app.add_option("--wire", wire,
                 "time the compressed call: half (fp16, block-scaled; also fp16) or bfloat16 (also bf16) between "
                 "ranks, float buffers; -c checks the documented error bound and prints maxerr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& ex) {
    *stop = true;
    return app.exit(ex);
  } catch (const CLI::ParseError& ex) {
    *stop = true;
    int code = app.exit(ex);
    return code == 0 ? 2 : code;
  }
  auto bad = [&](const std::string& what) {
    std::fprintf(stderr, "%s: %s\n", collProgram(coll), what.c_str());
    *stop = true;
    return 2;
  };
  if (!parseBytes(b, &o->minBytes)) return bad("-b/--minbytes \"" + b + "\" is not a size");
  if (!parseBytes(e, &o->maxBytes)) return bad("-e/--maxbytes \"" + e + "\" is not a size");
  if (!parseBytes(i, &o->stepBytes)) return bad("-i/--stepbytes \"" + i + "\" is not a size");
  if (o->maxBytes < o->minBytes) return bad("-e/--maxbytes " + e + " is smaller than -b/--minbytes " + b);
  if (o->stepFactor <= 1 && o->stepBytes == 0) return bad("-i/--stepbytes 0 with no -f factor would never end");
  o->ops.clear();
  if (op == "all")
    for (int k = 0; k <= kMulSum; ++k) o->ops.push_back(static_cast<collRedOp_t>(k));
  else {
    collRedOp_t x;
    if (!parseOp(op, &x)) return bad("-o/--op \"" + op + "\": expected sum, prod, min, max, avg, mulsum or all");
    o->ops.push_back(x);
  }
  if (!hasOp(coll)) o->ops = {collSum};
  o->types.clear();
  if (dt == "all")
    for (int k = 0; k < collNumTypes; ++k) o->types.push_back(static_cast<collDataType_t>(k));
  else {
    collDataType_t x;
    if (!parseType(dt, &x)) return bad("-d/--datatype \"" + dt + "\" is not a data type (try -d all)");
    o->types.push_back(x);
  }
  if (!wire.empty()) {
    std::string why = applyWire(coll, wire, dt, op, o);
    if (!why.empty()) return bad(why);
  }
  if (root == "all") o->root = -1;
  else {
    char* end;
    long r = std::strtol(root.c_str(), &end, 10);
    if (root.empty() || *end || r < 0) return bad("-r/--root \"" + root + "\": expected a rank or all");
    o->root = static_cast<int>(r);
  }
  if (o->ngpus != 1)
    return bad("-g/--ngpus " + std::to_string(o->ngpus) +
               ": host buffers use one rank per thread; use -t for more ranks");
  if (o->mem == "auto") o->mem = deviceUsable(nullptr) ? "device" : "host";
  std::string why;
  if (o->mem == "device" && !deviceUsable(&why)) return bad("--mem device: no usable CUDA device (" + why + ")");
  if (o->mem != "host" && o->mem != "device") return bad("--mem " + o->mem + ": expected host, device or auto");
  if (o->copyBound && (coll != Coll::kAllReduce || o->mem != "host"))
    return bad("--copy_bound is implemented for all_reduce_perf with --mem host");
  if (o->registerMode != 0 && o->mem != "host")
    return bad("-R/--local_register " + std::to_string(o->registerMode) + " is implemented for --mem host only");
  return 0;
}

double wireBound(collDataType_t wire, int rounds, double s) {
  const double n = rounds;
  if (wire == collBfloat16) return n * std::ldexp(s, -8) * (1 + n * 0x1p-7) + n * 0x1p-133;
  return n * std::ldexp(s, -11) * (1 + n * 0x1p-10) + n * 0x1p-149;
}

double busBwFactor(Coll coll, int n) {
  switch (coll) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

std::vector<size_t> sizeList(const Options& o) {
  std::vector<size_t> v;
  for (size_t s = o.minBytes; s <= o.maxBytes;) {
    v.push_back(s);
    size_t next = o.stepFactor > 1 ? static_cast<size_t>(static_cast<double>(s) * o.stepFactor) : s + o.stepBytes;
    if (next <= s) next = s + 1;
    s = next;
  }
  return v;
}

void bufferBytes(Coll coll, const Shape& s, size_t es, int n, size_t* sendBytes, size_t* recvBytes) {
  const size_t c = s.callCount * es, all = c * static_cast<size_t>(n);
  // nccl-tests allocates gather's output and scatter's input on every rank, roots or not.
  const bool multi = coll == Coll::kReduceScatter || coll == Coll::kAllToAll || coll == Coll::kScatter;
  const bool gathers = coll == Coll::kAllGather || coll == Coll::kAllToAll || coll == Coll::kGather;
  *sendBytes = multi ? all : c;
  *recvBytes = gathers ? all : c;
}

Shape shapeFor(Coll coll, size_t bytes, size_t es, int n) {
  size_t count = bytes / es;
  switch (coll) {
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter: {
      size_t per = count / static_cast<size_t>(n);
      return {per, per * n, per * n * es};
    }
    default: return {count, count, count * es};
  }
}

// ---------------------------------------------------------------- data and checks

namespace {

uint64_t hashOf(int rank, size_t i, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(rank) * 0xbf58476d1ce4e5b9ull + i;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 32);
}

// Float inputs chosen so every partial result is exact in the type, whatever the order
// the library combines ranks in: the check is exact, with no tolerance. Sums are of
// integers that add up to at most the largest integer up to which the type holds every
// one (fp8 e5m2: 8), so any partial sum is exact; mulsum's budget is halved for the
// scalar 2. With more ranks than the budget (e5m2: 9 ranks), only `budget` of them,
// a window rotating with the element, contribute 1s and the others 0: all ones would
// round at the 9th (8 + 1 is 8 in e5m2) and the result would depend on the order.
double floatInput(collDataType_t t, collRedOp_t op, int nranks, int rank, size_t i, uint64_t seed) {
  uint64_t h = hashOf(rank, i, seed);
  if (op == collProd) return (h & 1) ? 1.0 : -1.0;
  if (op == collMax || op == collMin) return static_cast<double>(h % 17) - 8.0;
  uint64_t budget = t == collFloat16      ? 2048
                    : t == collBfloat16   ? 256
                    : t == collFloat8e4m3 ? 16
                    : t == collFloat8e5m2 ? 8
                                          : 1 << 20;
  if (op == kMulSum) budget /= 2;
  const uint64_t n = static_cast<uint64_t>(nranks), contributors = std::min(n, budget);
  if ((static_cast<uint64_t>(rank) + i) % n >= contributors) return 0;
  return static_cast<double>(1 + h % (budget / contributors));
}

// What the library makes of rank r's float input x before summing: x times the scalar,
// rounded to the type (a Prod step). Other ops take x as it is.
double preOp(collDataType_t t, collRedOp_t op, int r, double x) {
  if (op != kMulSum) return x;
  unsigned char s[8], y[8];
  preMulScalar(t, r, s);
  coll::storeFloatElement(y, 0, t, x * coll::loadFloatElement(s, 0, t));
  return coll::loadFloatElement(y, 0, t);
}

void fill(void* buf, size_t count, collDataType_t t, collRedOp_t op, int nranks, int rank, size_t offset,
          uint64_t seed) {
  for (size_t i = 0; i < count; ++i) {
    if (coll::isIntegerType(t)) coll::storeIntElement(buf, i, t, hashOf(rank, offset + i, seed) | 1);
    else coll::storeFloatElement(buf, i, t, floatInput(t, op, nranks, rank, offset + i, seed));
  }
}

template <typename I>
I intReduce(collRedOp_t op, int n, size_t i, uint64_t seed) {
  using U = std::make_unsigned_t<I>;
  // mulsum: each input times its rank's scalar, wrapping in the type, then summed.
  auto input = [&](int r) {
    U x = static_cast<U>(hashOf(r, i, seed) | 1);
    return op == kMulSum ? static_cast<U>(static_cast<uint64_t>(x) * static_cast<uint64_t>(preMulScalarValue(r))) : x;
  };
  U acc = input(0);
  for (int r = 1; r < n; ++r) {
    U x = input(r);
    switch (op) {
      case collProd: acc = static_cast<U>(static_cast<uint64_t>(acc) * x); break;
      case collMax: acc = static_cast<U>(std::max(static_cast<I>(acc), static_cast<I>(x))); break;
      case collMin: acc = static_cast<U>(std::min(static_cast<I>(acc), static_cast<I>(x))); break;
      default: acc = static_cast<U>(acc + x);
    }
  }
  I v = static_cast<I>(acc);
  if (op == collAvg) v = static_cast<I>(v / static_cast<I>(n));
  return v;
}

// Expected reduction over all ranks of input element i, stored as element j of out.
void expectReduce(void* out, size_t j, collDataType_t t, collRedOp_t op, int n, size_t i, uint64_t seed) {
  switch (t) {
    case collInt8: static_cast<int8_t*>(out)[j] = intReduce<int8_t>(op, n, i, seed); return;
    case collUint8: static_cast<uint8_t*>(out)[j] = intReduce<uint8_t>(op, n, i, seed); return;
    case collInt32: static_cast<int32_t*>(out)[j] = intReduce<int32_t>(op, n, i, seed); return;
    case collUint32: static_cast<uint32_t*>(out)[j] = intReduce<uint32_t>(op, n, i, seed); return;
    case collInt64: static_cast<int64_t*>(out)[j] = intReduce<int64_t>(op, n, i, seed); return;
    case collUint64: static_cast<uint64_t*>(out)[j] = intReduce<uint64_t>(op, n, i, seed); return;
    default: break;
  }
  double acc = 0;
  for (int r = 0; r < n; ++r) {
    double x = preOp(t, op, r, floatInput(t, op, n, r, i, seed));
    if (r == 0) acc = x;
    else if (op == collProd) acc *= x;
    else if (op == collMax) acc = std::max(acc, x);
    else if (op == collMin) acc = std::min(acc, x);
    else acc += x;
  }
  if (op == collAvg)
    acc = t == collFloat64 ? acc * (1.0 / n)
                           : static_cast<double>(static_cast<float>(acc) * (1.0f / static_cast<float>(n)));
  coll::storeFloatElement(out, j, t, acc);
}

// Elements of `got` that differ (bitwise) from `want`.
int64_t countWrong(const void* got, const void* want, size_t count, size_t es) {
  if (count == 0 || std::memcmp(got, want, count * es) == 0) return 0;
  int64_t w = 0;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(static_cast<const char*>(got) + i * es, static_cast<const char*>(want) + i * es, es) != 0) ++w;
  return w;
}

// Under --wire: the elements beyond the error bound and the largest absolute error.
struct Verdict {
  int64_t wrong = 0;
  double maxErr = 0;  // NaN once a result is NaN
  void add(const Verdict& v) {
    wrong += v.wrong;
    if (std::isnan(v.maxErr) || v.maxErr > maxErr) maxErr = v.maxErr;
  }
};

// For each i, the largest s[j] with |i - j| < 256: S_b of the 256-element block holding
// i, wherever it starts (the library's blocks start with its slices, not at multiples of
// 256 of the buffer).
std::vector<double> blockMax(const std::vector<double>& s) {
  const size_t w = 255;
  std::vector<double> out(s.size());
  std::deque<size_t> q;  // indices of s within reach, their values decreasing
  size_t next = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (; next < s.size() && next <= i + w; ++next) {
      while (!q.empty() && s[q.back()] <= s[next]) q.pop_back();
      q.push_back(next);
    }
    while (q.front() + w < i) q.pop_front();
    out[i] = s[q.front()];
  }
  return out;
}

// The float results got[i] (unaligned bytes) against exact[i] within the bound of
// `rounds` roundings of S = mag[i] (fp16: S_b), divided by div (avg: the ranks).
Verdict verify(const char* got, const std::vector<double>& exact, std::vector<double> mag, collDataType_t wire,
               int rounds, int div) {
  if (wire == collFloat16) mag = blockMax(mag);
  Verdict v;
  for (size_t i = 0; i < exact.size(); ++i) {
    float g;
    std::memcpy(&g, got + i * sizeof(float), sizeof(float));
    const double err = std::fabs(static_cast<double>(g) - exact[i]);
    if (!(err <= wireBound(wire, rounds, mag[i]) / div)) ++v.wrong;
    v.add({0, err});
  }
  return v;
}

// got: elements base + i, i < count, of the reduction (op) of every rank's float input;
// the reference is that reduction in fp64.
Verdict verifyReduced(const char* got, size_t count, collDataType_t wire, collRedOp_t op, int n, size_t base,
                      uint64_t seed) {
  std::vector<double> exact(count), mag(count);
  for (size_t i = 0; i < count; ++i)
    for (int r = 0; r < n; ++r) {
      const double x = floatInput(collFloat32, op, n, r, base + i, seed), e = exact[i];
      mag[i] += std::fabs(x);
      exact[i] = r == 0 ? x : op == collMax ? std::max(e, x) : op == collMin ? std::min(e, x) : e + x;
    }
  if (op == collAvg)
    for (double& e : exact) e /= n;
  return verify(got, exact, std::move(mag), wire, n, op == collAvg ? n : 1);
}

// got: count elements of rank owner's float input, rounded once (broadcast, allgather).
Verdict verifyCopied(const char* got, size_t count, collDataType_t wire, collRedOp_t op, int n, int owner,
                     uint64_t seed) {
  std::vector<double> exact(count), mag(count);
  for (size_t i = 0; i < count; ++i) {
    exact[i] = floatInput(collFloat32, op, n, owner, i, seed);
    mag[i] = std::fabs(exact[i]);
  }
  return verify(got, exact, std::move(mag), wire, 1, 1);
}

// Host bytes that start `offset` bytes past a page boundary (-1: wherever the allocator
// puts them), since where a buffer sits in its page can change the speed of the kernel's
// copies (docs/PERFORMANCE.md).
class HostBuffer {
 public:
  explicit HostBuffer(int offset = -1) : offset_(offset) {}
  // Bytes that stay put for the whole sweep (registered memory, -R): assign() uses them.
  void useFixed(char* mem, size_t cap) {
    fixed_ = mem;
    fixedCap_ = cap;
  }
  // The bytes a fixed buffer needs to hold n at any offset.
  static size_t fixedBytes(size_t n) { return n + 4096; }
  void assign(size_t n, char v) {
    size_ = n;
    if (fixed_) {
      data_ = fixed_ + (offset_ < 0 ? 0 : static_cast<size_t>(offset_));
      if (n > 0) std::memset(data_, v, std::min(n, fixedCap_));
      return;
    }
    const size_t pad = offset_ < 0 ? 0 : 4096 + static_cast<size_t>(offset_);
    mem_.assign(n + pad, v);
    data_ = mem_.data();
    if (offset_ >= 0) {
      auto a = reinterpret_cast<uintptr_t>(data_);
      data_ += ((a + 4095) & ~uintptr_t{4095}) + static_cast<uintptr_t>(offset_) - a;
    }
  }
  char* data() { return data_; }
  size_t size() const { return size_; }

 private:
  int offset_;
  std::vector<char> mem_;
  char* fixed_ = nullptr;
  size_t fixedCap_ = 0;
  char* data_ = nullptr;
  size_t size_ = 0;
};

struct Buffers {
  explicit Buffers(int offset) : send(offset), recv(offset) {}
  HostBuffer send, recv;
  std::vector<char> want;
};

// One rank's operations. With device buffers (--mem device) the host vectors stage the
// inputs and results of checked calls, and every call is enqueued on the rank's stream.
class Rank {
 public:
  Rank(Coll coll, int rank, int n, collComm_t comm, DeviceBuffers* dev, int offset, collDataType_t wire)
      : coll_(coll), rank_(rank), n_(n), comm_(comm), dev_(dev), wire_(wire), b_(offset) {}

  // -R: send and recv buffers of the sweep's largest sizes from collMemAlloc, registered
  // with the communicator (mode 1) or as symmetric windows (mode 2; collective).
  std::string registerBuffers(int mode, size_t maxSend, size_t maxRecv) {
    const size_t bytes[2] = {HostBuffer::fixedBytes(maxSend), HostBuffer::fixedBytes(maxRecv)};
    HostBuffer* bufs[2] = {&b_.send, &b_.recv};
    for (int k = 0; k < 2; ++k) {
      if (collMemAlloc(&reg_[k].mem, bytes[k]) != collSuccess)
        return "collMemAlloc(" + std::to_string(bytes[k]) + "): " + collGetLastError(nullptr);
      collResult_t r = mode == 1 ? collCommRegister(comm_, reg_[k].mem, bytes[k], &reg_[k].handle)
                                 : collCommWindowRegister(comm_, reg_[k].mem, bytes[k], &reg_[k].win,
                                                          COLL_WIN_COLL_SYMMETRIC);
      if (r != collSuccess) return std::string("registering a buffer: ") + collGetLastError(comm_);
      bufs[k]->useFixed(static_cast<char*>(reg_[k].mem), bytes[k]);
    }
    return "";
  }
  // Undoes registerBuffers; before the communicator goes.
  void releaseBuffers() {
    for (Registered& g : reg_) {
      if (g.handle) collCommDeregister(comm_, g.handle);
      if (g.win) collCommWindowDeregister(comm_, g.win);
      if (g.mem) collMemFree(g.mem);
      g = {};
    }
  }

  // This rank's PreMulSum op for each of types, with nccl-tests' scalar for the rank.
  // Made once, before anything is timed (nccl-tests makes and destroys one around every
  // call): the timed loop measures the operation, not the op's bookkeeping.
  std::string makeMulSumOps(const std::vector<collDataType_t>& types) {
    for (collDataType_t t : types) {
      if (mulSum_.count(t)) continue;
      unsigned char scalar[8] = {};
      preMulScalar(t, rank_, scalar);
      collRedOp_t op;
      collResult_t r = collRedOpCreatePreMulSum(&op, scalar, t, collScalarHostImmediate, comm_);
      if (r != collSuccess)
        return std::string("collRedOpCreatePreMulSum(") + typeName(t) + "): " + collGetErrorString(r) + ": " +
               collGetLastError(comm_);
      mulSum_[t] = op;
    }
    return "";
  }
  // Frees them; before the communicator goes.
  std::string destroyMulSumOps() {
    std::string e;
    for (auto& [t, op] : mulSum_) {
      collResult_t r = collRedOpDestroy(op, comm_);
      if (r != collSuccess && e.empty())
        e = std::string("collRedOpDestroy(") + typeName(t) + "): " + collGetErrorString(r) + ": " +
            collGetLastError(comm_);
    }
    mulSum_.clear();
    return e;
  }

  // One operation with the given buffers. inPlace picks NCCL's in-place layout; kMulSum
  // becomes this rank's PreMulSum op for t. Under --wire, the compressed call.
  collResult_t run(const Shape& s, collDataType_t t, collRedOp_t op, int root, bool inPlace) {
    if (op == kMulSum) {
      auto it = mulSum_.find(t);
      if (it == mulSum_.end()) return collInternalError;  // makeMulSumOps() not called for t
      op = it->second;
    }
    size_t es = coll::dataTypeSize(t), c = s.callCount;
    char* sb = dev_ ? dev_->send() : b_.send.data();
    char* rb = dev_ ? dev_->recv() : b_.recv.data();
    auto st = static_cast<collStream_t>(dev_ ? dev_->stream() : nullptr);
    if (wire_ != kNoWire) return runCompressed(sb, rb, c, t, op, root, inPlace, st);
    switch (coll_) {
      case Coll::kAllReduce: return collAllReduce(inPlace ? rb : sb, rb, c, t, op, comm_, st);
      case Coll::kBroadcast: return collBroadcast(inPlace ? rb : sb, rb, c, t, root, comm_, st);
      case Coll::kReduce: return collReduce(inPlace ? rb : sb, rb, c, t, op, root, comm_, st);
      case Coll::kAllGather: return collAllGather(inPlace ? rb + rank_ * c * es : sb, rb, c, t, comm_, st);
      case Coll::kReduceScatter: return collReduceScatter(sb, inPlace ? sb + rank_ * c * es : rb, c, t, op, comm_, st);
      case Coll::kSendRecv: {
        collGroupStart();
        collSend(sb, c, t, (rank_ + 1) % n_, comm_, st);
        collRecv(rb, c, t, (rank_ + n_ - 1) % n_, comm_, st);
        return collGroupEnd();
      }
      case Coll::kAllToAll: return collAlltoAll(inPlace ? rb : sb, rb, c, t, comm_, st);
      case Coll::kGather: return collGather(inPlace ? rb + rank_ * c * es : sb, rb, c, t, root, comm_, st);
      case Coll::kScatter: return collScatter(sb, inPlace ? sb + rank_ * c * es : rb, c, t, root, comm_, st);
    }
    return collInternalError;
  }

  // run() under --wire (float buffers: t is collFloat32).
  collResult_t runCompressed(char* sb, char* rb, size_t c, collDataType_t t, collRedOp_t op, int root, bool inPlace,
                             collStream_t st) {
    const size_t cb = c * sizeof(float);
    const collDataType_t w = wire_;
    switch (coll_) {
      case Coll::kAllReduce: return collAllReduceCompressed(inPlace ? rb : sb, rb, c, t, w, op, comm_, st);
      case Coll::kBroadcast: return collBroadcastCompressed(inPlace ? rb : sb, rb, c, t, w, root, comm_, st);
      case Coll::kReduce: return collReduceCompressed(inPlace ? rb : sb, rb, c, t, w, op, root, comm_, st);
      case Coll::kAllGather: return collAllGatherCompressed(inPlace ? rb + rank_ * cb : sb, rb, c, t, w, comm_, st);
      case Coll::kReduceScatter:
        return collReduceScatterCompressed(sb, inPlace ? sb + rank_ * cb : rb, c, t, w, op, comm_, st);
      default: return collInternalError;  // parseOptions refuses --wire here
    }
  }

  std::string allocate(const Shape& s, size_t es) {
    size_t sendBytes, recvBytes;
    bufferBytes(coll_, s, es, n_, &sendBytes, &recvBytes);
    b_.send.assign(sendBytes, 0);
    b_.recv.assign(recvBytes, 0);
    return dev_ ? dev_->resize(b_.send.size(), b_.recv.size()) : "";
  }

  // Device buffers: host staging <-> device (no-ops for host buffers).
  std::string stageIn() {
    if (!dev_) return "";
    std::string e = dev_->toDevice(dev_->send(), b_.send.data(), b_.send.size());
    return e.empty() ? dev_->toDevice(dev_->recv(), b_.recv.data(), b_.recv.size()) : e;
  }
  std::string stageOut() {
    if (!dev_) return "";
    std::string e = dev_->sync();
    if (e.empty()) e = dev_->toHost(b_.send.data(), dev_->send(), b_.send.size());
    return e.empty() ? dev_->toHost(b_.recv.data(), dev_->recv(), b_.recv.size()) : e;
  }
  std::string sync() { return dev_ ? dev_->sync() : ""; }

  // Fresh inputs, one checked call; returns the wrong elements on this rank (under --wire:
  // those beyond the error bound, and *maxErr the largest error).
  int64_t check(const Shape& s, collDataType_t t, collRedOp_t op, int root, bool inPlace, uint64_t seed, double* maxErr,
                std::string* err) {
    size_t es = coll::dataTypeSize(t), c = s.callCount;
    *err = allocate(s, es);
    if (!err->empty()) return static_cast<int64_t>(c);
    // memset/memcmp take no null pointer even for 0 bytes, and a 0-count size has empty
    // buffers (null data()): UBSan stops there.
    if (b_.recv.size() > 0) std::memset(b_.recv.data(), 0x5c, b_.recv.size());
    // Inputs where the call reads them.
    char* in = b_.send.data();
    size_t inCount = b_.send.size() / es;
    if (inPlace && (coll_ == Coll::kAllReduce || coll_ == Coll::kBroadcast || coll_ == Coll::kReduce))
      in = b_.recv.data();
    if (inPlace && coll_ == Coll::kAllToAll) {
      in = b_.recv.data();
      inCount = b_.recv.size() / es;
    }
    if (inPlace && (coll_ == Coll::kAllGather || coll_ == Coll::kGather)) {
      in = b_.recv.data() + rank_ * c * es;
      inCount = c;
    }
    // Only the root's input is read: other ranks' stays zero, so data sent from it shows.
    const bool rooted = coll_ == Coll::kBroadcast || coll_ == Coll::kScatter;
    if (!rooted || rank_ == root) fill(in, inCount, t, op, n_, rank_, 0, seed);
    *err = stageIn();
    if (!err->empty()) return static_cast<int64_t>(c);
    collResult_t r = run(s, t, op, root, inPlace);
    if (r != collSuccess) {
      *err = std::string(collGetErrorString(r)) + ": " + collGetLastError(comm_);
      return static_cast<int64_t>(c);
    }
    *err = stageOut();
    if (!err->empty()) return static_cast<int64_t>(c);
    if (wire_ != kNoWire) {
      Verdict v = checkWire(c, op, root, inPlace, seed);
      *maxErr = v.maxErr;
      return v.wrong;
    }
    // Expected output on this rank.
    const char* got = b_.recv.data();
    size_t gotCount = b_.recv.size() / es;
    b_.want.assign(b_.recv.size(), 0);
    switch (coll_) {
      case Coll::kAllReduce:
        for (size_t i = 0; i < c; ++i) expectReduce(b_.want.data(), i, t, op, n_, i, seed);
        break;
      case Coll::kReduce:
        if (rank_ != root) return 0;
        for (size_t i = 0; i < c; ++i) expectReduce(b_.want.data(), i, t, op, n_, i, seed);
        break;
      case Coll::kReduceScatter:
        if (inPlace) got = b_.send.data() + rank_ * c * es;
        gotCount = c;
        for (size_t i = 0; i < c; ++i) expectReduce(b_.want.data(), i, t, op, n_, rank_ * c + i, seed);
        break;
      case Coll::kBroadcast: fill(b_.want.data(), c, t, op, n_, root, 0, seed); break;
      case Coll::kAllGather:
        for (int p = 0; p < n_; ++p) fill(b_.want.data() + p * c * es, c, t, op, n_, p, 0, seed);
        break;
      case Coll::kSendRecv: fill(b_.want.data(), c, t, op, n_, (rank_ + n_ - 1) % n_, 0, seed); break;
      case Coll::kAllToAll:
        for (int p = 0; p < n_; ++p) fill(b_.want.data() + p * c * es, c, t, op, n_, p, rank_ * c, seed);
        break;
      case Coll::kGather:
        // Off the root, recvbuff must come back as it went in (nccl-tests checks this too).
        if (rank_ != root && b_.want.size() > 0) std::memset(b_.want.data(), 0x5c, b_.want.size());
        for (int p = 0; p < n_; ++p)
          if (rank_ == root || (inPlace && p == rank_)) fill(b_.want.data() + p * c * es, c, t, op, n_, p, 0, seed);
        break;
      case Coll::kScatter:
        if (inPlace) got = b_.send.data() + rank_ * c * es;
        gotCount = c;
        fill(b_.want.data(), c, t, op, n_, root, rank_ * c, seed);
        break;
    }
    return countWrong(got, b_.want.data(), gotCount, es);
  }

  // check() under --wire: this rank's results against fp64 within the error bound.
  Verdict checkWire(size_t c, collRedOp_t op, int root, bool inPlace, uint64_t seed) {
    const char* got = b_.recv.data();
    const size_t cb = c * sizeof(float);
    switch (coll_) {
      case Coll::kReduce:
        if (rank_ != root) return {};
        return verifyReduced(got, c, wire_, op, n_, 0, seed);
      case Coll::kAllReduce: return verifyReduced(got, c, wire_, op, n_, 0, seed);
      case Coll::kReduceScatter:
        if (inPlace) got = b_.send.data() + rank_ * cb;
        return verifyReduced(got, c, wire_, op, n_, rank_ * c, seed);
      case Coll::kBroadcast: return verifyCopied(got, c, wire_, op, n_, root, seed);
      case Coll::kAllGather: {
        Verdict v;
        for (int p = 0; p < n_; ++p) v.add(verifyCopied(got + p * cb, c, wire_, op, n_, p, seed));
        return v;
      }
      default: return {};
    }
  }

  // Mean microseconds per operation over iters x agg timed operations.
  double time(const Options& o, const Shape& s, collDataType_t t, collRedOp_t op, int root, bool inPlace,
              std::string* err) {
    *err = allocate(s, coll::dataTypeSize(t));
    if (!err->empty()) return -1;
    // Device buffers: operations are enqueued; -z 1 waits for each, otherwise the stream
    // is synchronised once after the timed ones (nccl-tests' rule).
    auto finished = [&]() {
      std::string e = sync();
      if (!e.empty() && err->empty()) *err = e;
      return e.empty();
    };
    auto once = [&]() {
      if (o.aggIters > 1) collGroupStart();
      collResult_t r = collSuccess;
      for (int a = 0; a < o.aggIters && r == collSuccess; ++a) r = run(s, t, op, root, inPlace);
      if (o.aggIters > 1) {
        collResult_t g = collGroupEnd();
        if (r == collSuccess) r = g;
      }
      if (r != collSuccess && err->empty()) *err = std::string(collGetErrorString(r)) + ": " + collGetLastError(comm_);
      return r == collSuccess && (!o.blocking || finished());
    };
    for (int w = 0; w < o.warmupIters; ++w)
      if (!once()) return -1;
    if (!finished()) return -1;
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < o.iters; ++it)
      if (!once()) return -1;
    if (!finished()) return -1;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return us / (static_cast<double>(o.iters) * o.aggIters);
  }

  collComm_t comm() const { return comm_; }

 private:
  Coll coll_;
  int rank_, n_;
  collComm_t comm_;
  DeviceBuffers* dev_;   // null: host buffers
  collDataType_t wire_;  // Options::wire
  Buffers b_;
  std::map<collDataType_t, collRedOp_t> mulSum_;  // made by makeMulSumOps()
  struct Registered {
    void* mem = nullptr;
    void* handle = nullptr;
    collWindow_t win = nullptr;
  };
  Registered reg_[2];  // -R: send, recv
};

// The largest send and recv buffers of the sweep.
void largestBuffers(Coll coll, const std::vector<size_t>& sizes, const Options& o, int nranks, size_t* maxSend,
                    size_t* maxRecv) {
  *maxSend = *maxRecv = 0;
  for (size_t bytes : sizes)
    for (collDataType_t type : o.types) {
      const size_t es = coll::dataTypeSize(type);
      size_t sb, rb;
      bufferBytes(coll, shapeFor(coll, bytes, es, nranks), es, nranks, &sb, &rb);
      *maxSend = std::max(*maxSend, sb);
      *maxRecv = std::max(*maxRecv, rb);
    }
}

std::string fmtTime(double us) {
  char buf[32];
  if (us < 0) return "    N/A";
  std::snprintf(buf, sizeof(buf), us < 1e4 ? "%7.2f" : us < 1e5 ? "%7.1f" : "%7.0f", us);
  return buf;
}

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      o += b;
    } else o += c;
  }
  return o;
}

struct Half {
  double timeUs = -1, algbw = 0, busbw = 0;
  int64_t wrong = -1;  // -1: not checked
  double maxErr = -1;  // --wire: the largest error over ranks (NaN: a NaN result); -1: not checked
};
struct Row {
  size_t bytes, count;
  collDataType_t type;
  collRedOp_t op;
  int root;
  Half oop, ip;
};

const char* compressedCall(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "collAllReduceCompressed";
    case Coll::kReduceScatter: return "collReduceScatterCompressed";
    case Coll::kAllGather: return "collAllGatherCompressed";
    case Coll::kBroadcast: return "collBroadcastCompressed";
    case Coll::kReduce: return "collReduceCompressed";
    default: return "?";
  }
}

// The "#" lines above the table: options, ranks, column titles (under --wire: the wire
// type, and a maxerr column in each half).
void printHeader(Coll coll, const Options& o, const std::vector<std::string>& rankLines) {
  std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d iters: %d agg iters: "
              "%d validation: %d graph: 0\n",
              o.nthreads, o.ngpus, o.minBytes, o.maxBytes,
              o.stepFactor > 1 ? o.stepFactor : static_cast<double>(o.stepBytes), o.stepFactor > 1 ? "factor" : "bytes",
              o.warmupIters, o.iters, o.aggIters, o.check);
  if (o.wire != kNoWire)
    std::printf("# wire: %s (%s): algbw/busbw count float bytes; #wrong: elements beyond collectives.h's error "
                "bound; maxerr: largest absolute error against fp64\n",
                typeName(o.wire), compressedCall(coll));
  std::printf("#\n# Using devices\n");
  for (auto& l : rankLines) std::printf("%s\n", l.c_str());
  if (o.wire != kNoWire) {
    const char* f = "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %8s  %7s  %6s  %6s  %6s  %8s\n";
    std::printf("#\n#%66s%s%33s%s\n", "", "out-of-place", "", "in-place");
    std::printf(f, "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "maxerr", "time",
                "algbw", "busbw", "#wrong", "maxerr");
    std::printf(f, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "", "(us)", "(GB/s)", "(GB/s)", "",
                "");
    return;
  }
  std::printf("#\n#%*s%s\n", 56, "", "          out-of-place                       in-place          ");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

// --copy_bound: `threads` threads each copy `bytes` between buffers of their own, at once,
// 5 times; returns their total copy rate in GB/s (bytes copied, not read plus written).
double copyRate(size_t bytes, int threads) {
  std::vector<std::vector<char>> src(threads), dst(threads);
  for (int t = 0; t < threads; ++t) {
    src[t].assign(bytes, 1);
    dst[t].assign(bytes, 2);
  }
  std::vector<std::thread> pool;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) std::memcpy(dst[t].data(), src[t].data(), bytes);
    });
  for (auto& th : pool) th.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile char sink = dst[0][bytes / 2];  // the copies are used
  (void)sink;
  return 5.0 * static_cast<double>(bytes) * threads / s / 1e9;
}

// The "# copy bound" line: an allreduce of S bytes over n ranks of one host reads every
// rank's input and writes every rank's output, 2nS bytes of memory traffic at least; at
// the machine's traffic rate T (twice its copy rate) that allows busbw (n-1) T / n^2.
std::string copyBoundLine(int nranks) {
  const int threads = std::max(1, std::min<int>(nranks, static_cast<int>(std::thread::hardware_concurrency())));
  const double copy = copyRate(size_t{128} << 20, threads), traffic = 2 * copy;
  const double n = nranks;
  char line[320];
  std::snprintf(line, sizeof(line),
                "# copy bound: %d thread(s) copy %.2f GB/s at 128 MiB each (%.2f GB/s of memory traffic); an "
                "allreduce of %d ranks moves at least 2nS bytes: busbw <= %.2f GB/s\n",
                threads, copy, traffic, nranks, (n - 1) * traffic / (n * n));
  return line;
}

// One half of a table row (out-of-place or in-place); --wire adds maxerr.
std::string halfText(const Half& h, bool wire) {
  char b[80];
  if (h.timeUs < 0) return std::string("      N/A     N/A     N/A     N/A") + (wire ? "       N/A" : "");
  std::snprintf(b, sizeof(b), "  %s  %6.2f  %6.2f  %6s", fmtTime(h.timeUs).c_str(), h.algbw, h.busbw,
                h.wrong < 0 ? "N/A" : std::to_string(h.wrong).c_str());
  std::string out = b;
  if (!wire) return out;
  if (h.maxErr < 0) std::snprintf(b, sizeof(b), "  %8s", "N/A");
  else std::snprintf(b, sizeof(b), "  %8.2e", h.maxErr);
  return out + b;
}

// Combines a per-rank value over all ranks (through the benchmarked communicator).
double combine(collComm_t comm, double v, int how, int n) {
  double out = v;
  switch (how) {
    case 0: collBroadcast(&v, &out, 1, collFloat64, 0, comm, nullptr); return out;
    case 2: collAllReduce(&v, &out, 1, collFloat64, collMin, comm, nullptr); return out;
    case 3: collAllReduce(&v, &out, 1, collFloat64, collMax, comm, nullptr); return out;
    default: collAllReduce(&v, &out, 1, collFloat64, collSum, comm, nullptr); return out / n;
  }
}

}  // namespace

// ---------------------------------------------------------------- the run

int runPerf(Coll coll, int argc, char** argv) {
  Options o;
  bool stop = false;
  int rc = parseOptions(coll, argc, argv, &o, &stop);
  if (stop) return rc;
  LaunchInfo L;
  std::string err;
  if (!detectLaunch(&L, &err)) {
    std::fprintf(stderr, "%s: %s\n", collProgram(coll), err.c_str());
    return 2;
  }
  if (L.size > 1) setenv("COLL_COMM_ID", L.rootAddr.c_str(), 1);  // every process, same id
  const int nranks = L.size * o.nthreads;
  if (hasRoot(coll) && o.root >= nranks) {
    std::fprintf(stderr, "%s: -r/--root %d is not a rank of %d\n", collProgram(coll), o.root, nranks);
    return 2;
  }
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess) {
    std::fprintf(stderr, "%s: collGetUniqueId: %s\n", collProgram(coll), collGetLastError(nullptr));
    return 1;
  }
  const bool printer = L.rank == 0;
  const auto sizes = sizeList(o);
  std::vector<Row> rows;
  std::mutex mu;
  std::atomic<int> failures{0};
  std::string firstError;
  std::vector<std::string> transports(nranks);
  std::vector<std::string> rankLines(nranks);
  // The first failure of any rank is the run's.
  auto fail = [&](int rank, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (firstError.empty()) firstError = "rank " + std::to_string(rank) + what;
    ++failures;
  };

  auto body = [&](int t) {
    int rank = L.rank * o.nthreads + t;
    collComm_t comm = nullptr;
    // Device buffers: this process's ranks spread over its devices, bound at init.
    std::unique_ptr<DeviceBuffers> dev;
    const int cudaDev = o.mem == "device" ? (L.localRank * o.nthreads + t) % std::max(1, deviceCount()) : -1;
    size_t maxSend = 0, maxRecv = 0;
    largestBuffers(coll, sizes, o, nranks, &maxSend, &maxRecv);
    if (o.mem == "device") {
      dev = std::make_unique<DeviceBuffers>();
      // The largest buffers of the sweep, allocated before init (which no rank leaves
      // before all reach it): cudaFree and cudaMalloc may wait for the kernels running
      // on the GPU, and with several ranks on it, once collectives run, one of those
      // kernels may be waiting for this rank.
      std::string e = dev->init(cudaDev);
      if (e.empty()) e = dev->resize(maxSend, maxRecv);
      if (!e.empty()) return fail(rank, ": " + e);
    }
    // Measured before init, while the other ranks wait there without spinning.
    const std::string boundLine = o.copyBound && rank == 0 && printer ? copyBoundLine(nranks) : "";
    if (collCommInitRank(&comm, nranks, id, rank) != collSuccess)
      return fail(rank, std::string(" init: ") + collGetLastError(nullptr));
    Rank R(coll, rank, nranks, comm, dev.get(), o.offset, o.wire);
    if (o.registerMode != 0) {
      std::string e = R.registerBuffers(o.registerMode, maxSend, maxRecv);
      if (!e.empty()) {
        fail(rank, ": " + e);
        R.releaseBuffers();
        collCommAbort(comm);
        return;
      }
    }
    // Who is where, and over what: every rank's line reaches rank 0.
    struct Info {
      char text[200];
    } mine{}, *all = new Info[nranks];
    char host[64] = {};
    gethostname(host, sizeof(host) - 1);
    const std::string memName = cudaDev >= 0 ? "device " + std::to_string(cudaDev) : "host memory";
    std::snprintf(mine.text, sizeof(mine.text), "%d|%s|%s, %s", static_cast<int>(getpid()), host, memName.c_str(),
                  transportSummary(comm).c_str());
    collAllGather(&mine, all, sizeof(Info), collUint8, comm, nullptr);
    if (rank == 0)
      for (int r = 0; r < nranks; ++r) {
        std::string s = all[r].text;
        size_t a = s.find('|'), b = s.find('|', a + 1);
        transports[r] = s.substr(s.find(", ", b) + 2);
        char line[320];
        std::snprintf(line, sizeof(line), "#  Rank %2d Group  0 Pid %6s on %10s %s", r, s.substr(0, a).c_str(),
                      s.substr(a + 1, b - a - 1).c_str(), transports[r].c_str());
        rankLines[r] = line;
      }
    delete[] all;
    if (hasOp(coll) && std::find(o.ops.begin(), o.ops.end(), kMulSum) != o.ops.end()) {
      std::string e = R.makeMulSumOps(o.types);
      if (!e.empty()) {
        fail(rank, ": " + e);
        R.releaseBuffers();
        collCommAbort(comm);
        return;
      }
    }
    if (rank == 0 && printer) {
      printHeader(coll, o, rankLines);
      std::printf("%s", boundLine.c_str());
      std::fflush(stdout);
    }
    uint64_t seed = 1;
    for (size_t bytes : sizes)
      for (collDataType_t type : o.types)
        for (collRedOp_t op : o.ops) {
          std::vector<int> roots;
          if (hasRoot(coll) && o.root < 0)
            for (int r = 0; r < nranks; ++r) roots.push_back(r);
          else roots.push_back(hasRoot(coll) ? o.root : -1);
          for (int root : roots) {
            Shape s = shapeFor(coll, bytes, coll::dataTypeSize(type), nranks);
            Row row{s.printBytes, s.printCount, type, op, root, {}, {}};
            for (bool inPlace : {false, true}) {
              Half& h = inPlace ? row.ip : row.oop;
              if (inPlace && !hasInPlace(coll, o.mem)) continue;
              std::string e;
              if (o.check) {
                double maxErr = 0;
                int64_t w = R.check(s, type, op, std::max(root, 0), inPlace, seed++, &maxErr, &e);
                int64_t total = 0;
                collAllReduce(&w, &total, 1, collInt64, collSum, comm, nullptr);
                h.wrong = total;
                if (o.wire != kNoWire) collAllReduce(&maxErr, &h.maxErr, 1, collFloat64, collMax, comm, nullptr);
              }
              double us = R.time(o, s, type, op, std::max(root, 0), inPlace, &e);
              if (!e.empty()) {
                fail(rank, ": " + e);
                R.releaseBuffers();
                collCommAbort(comm);
                return;
              }
              h.timeUs = combine(comm, us, o.average, nranks);
              h.algbw = h.timeUs > 0 ? static_cast<double>(s.printBytes) / h.timeUs / 1e3 : 0;
              h.busbw = h.algbw * busBwFactor(coll, nranks);
            }
            if (rank == 0) {
              rows.push_back(row);
              if (printer) {
                const bool wire = o.wire != kNoWire;
                std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", row.bytes, row.count, typeName(type),
                            hasOp(coll) ? opName(op) : "none", root, halfText(row.oop, wire).c_str(),
                            halfText(row.ip, wire).c_str());
                std::fflush(stdout);
              }
            }
          }
        }
    std::string e = R.destroyMulSumOps();
    if (!e.empty()) fail(rank, ": " + e);
    R.releaseBuffers();
    collCommDestroy(comm);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < o.nthreads; ++t) threads.emplace_back(body, t);
  for (auto& th : threads) th.join();

  int64_t wrong = 0;
  double sumBus = 0;
  int nBus = 0;
  for (auto& r : rows)
    for (const Half* h : {&r.oop, &r.ip}) {
      if (h->wrong > 0) wrong += h->wrong;
      if (h->timeUs >= 0) {
        sumBus += h->busbw;
        ++nBus;
      }
    }
  if (printer && failures == 0) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrong), wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g \n#\n", nBus ? sumBus / nBus : 0.0);
  }
  if (failures) std::fprintf(stderr, "%s: %s\n", collProgram(coll), firstError.c_str());
  if (printer && !o.outputFile.empty()) {
    std::ofstream f(o.outputFile);
    f.precision(12);
    int version = 0;
    collGetVersion(&version);
    char host[64] = {}, date[64];
    gethostname(host, sizeof(host) - 1);
    std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    f << "{\n  \"program\": \"" << collProgram(coll) << "\",\n  \"library_version\": " << version << ",\n  \"date\": \""
      << date << "\",\n  \"host\": \"" << jsonEscape(host) << "\",\n  \"nranks\": " << nranks
      << ",\n  \"nprocs\": " << L.size << ",\n  \"nthreads\": " << o.nthreads << ",\n  \"launcher\": \""
      << jsonEscape(L.launcher) << "\",\n  \"mem\": \"" << o.mem << "\",\n  \"transports\": [";
    for (int r = 0; r < nranks; ++r) f << (r ? ", " : "") << "\"" << jsonEscape(transports[r]) << "\"";
    f << "],\n  \"options\": {\"minbytes\": " << o.minBytes << ", \"maxbytes\": " << o.maxBytes
      << ", \"stepfactor\": " << o.stepFactor << ", \"stepbytes\": " << o.stepBytes << ", \"iters\": " << o.iters
      << ", \"warmup_iters\": " << o.warmupIters << ", \"agg_iters\": " << o.aggIters << ", \"check\": " << o.check
      << ", \"average\": " << o.average
      << (o.wire != kNoWire ? ", \"wire\": \"" + std::string(typeName(o.wire)) + "\"" : "")
      << "},\n  \"busbw_factor\": " << busBwFactor(coll, nranks) << ",\n  \"rows\": [";
    for (size_t k = 0; k < rows.size(); ++k) {
      const Row& r = rows[k];
      auto half = [&o](const Half& h) {
        std::ostringstream s;
        s.precision(12);
        if (h.timeUs < 0) return std::string("null");
        s << "{\"time_us\": " << h.timeUs << ", \"algbw_gbs\": " << h.algbw << ", \"busbw_gbs\": " << h.busbw
          << ", \"wrong\": " << (h.wrong < 0 ? std::string("null") : std::to_string(h.wrong));
        if (o.wire != kNoWire) {
          s << ", \"max_err\": ";
          if (h.maxErr < 0 || std::isnan(h.maxErr)) s << "null";
          else s << h.maxErr;
        }
        s << "}";
        return s.str();
      };
      f << (k ? "," : "") << "\n    {\"size\": " << r.bytes << ", \"count\": " << r.count << ", \"type\": \""
        << typeName(r.type) << "\", \"redop\": \"" << (hasOp(coll) ? opName(r.op) : "none")
        << "\", \"root\": " << r.root << ", \"out_of_place\": " << half(r.oop) << ", \"in_place\": " << half(r.ip)
        << "}";
    }
    f << "\n  ],\n  \"out_of_bounds\": " << wrong << ",\n  \"avg_busbw_gbs\": " << (nBus ? sumBus / nBus : 0.0)
      << ",\n  \"ok\": " << (failures == 0 && wrong == 0 ? "true" : "false") << "\n}\n";
  }
  return failures ? 1 : wrong ? 1 : 0;
}

}  // namespace perf

// Compressed collectives (collAllReduceCompressed and friends, COLL_COMPRESS): results
// against an fp64 reduction within the documented bound (collectives.h), bit-identical on
// every rank, on the ring and the tree, over shm and TCP, on the host executor and the
// emulated device executor, for 1-8 ranks and data of every kind; and the bad inputs.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/collectives.h"
#include "harness.h"
#include "kernels/float_conv.h"

using testing::ScopedEnv;

namespace {

enum class Pattern { kNormal, kSmall, kLarge, kMixed, kEqual, kZeros, kSubnormal, kSpecial };
const Pattern kPatterns[] = {Pattern::kNormal, Pattern::kSmall, Pattern::kLarge,     Pattern::kZeros,
                             Pattern::kMixed,  Pattern::kEqual, Pattern::kSubnormal, Pattern::kSpecial};

const char* patternName(Pattern p) {
  switch (p) {
    case Pattern::kNormal: return "normal";
    case Pattern::kSmall: return "normal x 1e-6";
    case Pattern::kLarge: return "normal x 1e5";
    case Pattern::kMixed: return "mixed 1e-8..1e8";
    case Pattern::kEqual: return "all equal";
    case Pattern::kZeros: return "signed zeros";
    case Pattern::kSubnormal: return "subnormals";
    case Pattern::kSpecial: return "NaN/Inf";
  }
  return "?";
}

// Input element i of rank r (the same on every call).
float inputOf(Pattern p, int r, size_t i) {
  std::mt19937 rng(static_cast<uint32_t>(i * 131 + static_cast<size_t>(r) * 7919 + 1));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  switch (p) {
    case Pattern::kNormal: return normal(rng);
    case Pattern::kSmall: return normal(rng) * 1e-6f;  // gradients below fp16's normal range
    case Pattern::kLarge: return normal(rng) * 1e5f;   // beyond fp16's largest value
    case Pattern::kMixed:                              // log-uniform magnitudes, random signs; blocks mix them
      return (unit(rng) < 0.5f ? -1.0f : 1.0f) * std::pow(10.0f, -8.0f + 16.0f * unit(rng));
    case Pattern::kEqual: return 0.1f;
    case Pattern::kZeros: return (i % 3 == 0 || (i % 3 == 1 && r == 0)) ? -0.0f : 0.0f;
    case Pattern::kSubnormal: return normal(rng) * 1e-40f;
    case Pattern::kSpecial:
      if (i % 97 == 5) return std::numeric_limits<float>::quiet_NaN();
      if (i % 89 == 7) return r == 0 ? std::numeric_limits<float>::infinity() : 1.0f;
      if (i % 83 == 3) return r % 2 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
      return normal(rng) * 1e3f;
  }
  return 0;
}

// What fp32 gives for element i of a sum over n ranks where NaN or an infinity enters:
// NaN, or the infinity. Finite inputs: false.
bool specialSum(Pattern p, int n, size_t i, float* out) {
  bool nan = false, pos = false, neg = false;
  for (int r = 0; r < n; ++r) {
    const float x = inputOf(p, r, i);
    nan |= std::isnan(x);
    pos |= x == std::numeric_limits<float>::infinity();
    neg |= x == -std::numeric_limits<float>::infinity();
  }
  if (!nan && !pos && !neg) return false;
  *out = nan || (pos && neg) ? std::numeric_limits<float>::quiet_NaN()
                             : (pos ? 1.0f : -1.0f) * std::numeric_limits<float>::infinity();
  return true;
}

struct Exact {
  double value;  // the sum, or max/min, in fp64
  double mag;    // sum of magnitudes over ranks
};

Exact exactOf(Pattern p, int n, size_t i, collRedOp_t op) {
  Exact e{op == collMax ? -INFINITY : op == collMin ? INFINITY : 0.0, 0.0};
  for (int r = 0; r < n; ++r) {
    const double x = inputOf(p, r, i);
    e.mag += std::fabs(x);
    if (op == collMax) e.value = std::max(e.value, x);
    else if (op == collMin) e.value = std::min(e.value, x);
    else e.value += x;
  }
  if (op == collAvg) e.value /= n, e.mag /= n;
  return e;
}

// The bound of collectives.h for element i: fp16 takes the largest magnitude of its block.
double boundOf(collDataType_t wire, int n, const std::vector<Exact>& ex, size_t i) {
  if (wire == collBfloat16) return n * std::ldexp(ex[i].mag, -8) * (1 + n * std::ldexp(1.0, -7)) + n * 0x1p-133;
  const size_t lo = i / 256 * 256, hi = std::min(ex.size(), lo + 256);
  double sb = 0;
  for (size_t j = lo; j < hi; ++j)
    if (std::isfinite(ex[j].mag)) sb = std::max(sb, ex[j].mag);
  return n * std::ldexp(sb, -11) * (1 + n * std::ldexp(1.0, -10)) + n * 0x1p-149;
}

// Checks `got` (count elements of a reduction over n ranks, op) against fp64 within the
// bound; "" or the first failure.
std::string checkReduced(const float* got, size_t count, Pattern p, int n, collRedOp_t op, collDataType_t wire,
                         size_t base = 0) {
  std::vector<Exact> ex(count);
  for (size_t i = 0; i < count; ++i) ex[i] = exactOf(p, n, base + i, op);
  for (size_t i = 0; i < count; ++i) {
    float special = 0;
    if ((op == collSum || op == collAvg) && specialSum(p, n, base + i, &special)) {
      if (std::isnan(special) ? std::isnan(got[i]) : got[i] == special) continue;
      return "element " + std::to_string(base + i) + ": " + std::to_string(got[i]) + " where fp32 gives " +
             std::to_string(special);
    }
    const double err = std::fabs(static_cast<double>(got[i]) - ex[i].value);
    const bool allNegZero = p == Pattern::kZeros && (base + i) % 3 == 0;
    if (!(err <= boundOf(wire, n, ex, i)) || (allNegZero && !std::signbit(got[i])))
      return "element " + std::to_string(base + i) + " (" + patternName(p) + "): " + std::to_string(got[i]) +
             ", exact " + std::to_string(ex[i].value) + ", error " + std::to_string(err) + " above the bound " +
             std::to_string(boundOf(wire, n, ex, i));
  }
  return "";
}

std::vector<float> inputs(Pattern p, int r, size_t count, size_t base = 0) {
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = inputOf(p, r, base + i);
  return x;
}

// Every rank's result, for the identity check.
struct Results {
  explicit Results(int n) : of(static_cast<size_t>(n)) {}
  std::vector<std::vector<float>> of;
  std::string identical() const {
    for (size_t r = 1; r < of.size(); ++r)
      if (of[r].size() != of[0].size() || std::memcmp(of[r].data(), of[0].data(), of[0].size() * 4) != 0)
        return "rank " + std::to_string(r) + "'s result differs from rank 0's";
    return "";
  }
};

std::string failed(collResult_t res, collComm_t comm, const char* what) {
  return std::string(what) + ": " + collGetErrorString(res) + " " + collGetLastError(comm);
}

constexpr size_t kCount = 3 * 256 + 77;  // several blocks and a partial one

// One rank's share of the allreduce checks: every pattern and op, both wire types.
// Under COLL_TEST_SHARE=N one check in N (testing::sampled with `salt`); a skipped one
// leaves its results empty on every rank.
std::string allReduceChecks(int rank, collComm_t comm, int n, size_t salt, std::vector<Results>& results) {
  size_t k = 0;
  for (collDataType_t wire : {collFloat16, collBfloat16})
    for (Pattern p : kPatterns)
      for (collRedOp_t op : {collSum, collAvg, collMax, collMin}) {
        if (p == Pattern::kSpecial && (op == collMax || op == collMin)) continue;  // NaN order: as in fp32
        if (!testing::sampled(k, salt)) {
          ++k;
          continue;
        }
        const std::vector<float> x = inputs(p, rank, kCount);
        std::vector<float> y(kCount, -1.0f);
        collResult_t res = collAllReduceCompressed(x.data(), y.data(), kCount, collFloat32, wire, op, comm, nullptr);
        if (res != collSuccess) return failed(res, comm, "collAllReduceCompressed");
        std::string bad = checkReduced(y.data(), kCount, p, n, op, wire);
        if (!bad.empty()) return std::string(wire == collFloat16 ? "fp16 " : "bf16 ") + bad;
        results[k++].of[static_cast<size_t>(rank)] = std::move(y);
      }
  return "";
}

constexpr size_t kAllReduceRuns = 2 * (std::size(kPatterns) * 4 - 2);  // NaN/Inf: not with max, min

void sweep(int n, const char* algo, bool net, bool emulate) {
  ScopedEnv a("COLL_ALGO", algo);
  ScopedEnv shm("COLL_SHM_DISABLE", net ? "1" : "0");
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv buff("COLL_BUFFSIZE", "8192");  // 1 KiB slots: an fp16 slice is one block
  ScopedEnv oneShot("COLL_ONESHOT_BYTES", "0");
  ScopedEnv netOneShot("COLL_NET_ONESHOT_BYTES", "0");
  ScopedEnv emu("COLL_DEVICE_EMULATE", emulate ? "1" : "0");
  std::vector<Results> results(kAllReduceRuns, Results(n));
  const size_t salt = static_cast<size_t>(n) + (algo[0] ? 3 : 0) + (net ? 5 : 0) + (emulate ? 7 : 0);
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) {
    return allReduceChecks(rank, comm, n, salt, results);
  });
  INFO(n << " ranks, " << (algo[0] ? algo : "ring") << (net ? ", TCP" : ", shm") << (emulate ? ", device" : ""));
  for (const std::string& e : errors) FAIL(e);
  for (const Results& r : results) REQUIRE(r.identical() == "");
}

}  // namespace

TEST_CASE("compressed allreduce: within the bound and identical on every rank, ring and tree, shm and TCP",
          "[compressed]") {
  for (int n : {1, 2, 3, 4, 8}) {
    sweep(n, "", false, false);
    if (n > 1) sweep(n, "allreduce:tree", false, false);
  }
  for (int n : {2, 3}) {
    sweep(n, "", true, false);
    sweep(n, "allreduce:tree", true, false);
  }
}

TEST_CASE("compressed allreduce on the emulated device executor", "[compressed][device]") {
  for (int n : {2, 4}) sweep(n, "", false, true);
  sweep(3, "allreduce:tree", false, true);
}

namespace {

// Runs call() expecting collInvalidArgument with `words` in the last error, and recv
// untouched; "" or what went wrong.
template <typename Call>
std::string refused(collComm_t comm, const char* words, const std::vector<float>& recv, Call call) {
  const std::vector<float> before = recv;
  const collResult_t res = call();
  const std::string why = collGetLastError(comm);
  if (res != collInvalidArgument)
    return std::string("expected collInvalidArgument for ") + words + ", got " + collGetErrorString(res) + " " + why;
  if (why.find(words) == std::string::npos) return "the error \"" + why + "\" does not name " + words;
  if (std::memcmp(before.data(), recv.data(), recv.size() * 4) != 0) return std::string("recvbuff written: ") + words;
  return "";
}

std::string badInputs(collComm_t comm) {
  std::vector<float> x(1024, 1.0f), y(1024, 7.0f);
  const size_t huge = std::numeric_limits<size_t>::max() / 2;
  collRedOp_t mulSum;
  float scalar = 2.0f;
  if (collRedOpCreatePreMulSum(&mulSum, &scalar, collFloat32, collScalarHostImmediate, comm) != collSuccess)
    return "collRedOpCreatePreMulSum failed";
  const std::string checks[] = {refused(
                                    comm, "datatype float16", y,
                                    [&] {
    return collAllReduceCompressed(x.data(), y.data(), 8, collFloat16, collFloat16, collSum, comm, nullptr);
                                    }),
                                refused(
                                    comm, "wiretype float32", y,
                                    [&] {
    return collAllReduceCompressed(x.data(), y.data(), 8, collFloat32, collFloat32, collSum, comm, nullptr);
                                    }),
                    refused(
                        comm, "wiretype 99", y,
                        [&] {
    return collAllGatherCompressed(x.data(), y.data(), 8, collFloat32, static_cast<collDataType_t>(99), comm, nullptr);
                        }),
      refused(
          comm, "op collProd", y,
          [&] {
    return collReduceScatterCompressed(x.data(), y.data(), 8, collFloat32, collBfloat16, collProd, comm, nullptr);
          }),
      refused(
          comm, "built-in", y,
          [&] {
    return collAllReduceCompressed(x.data(), y.data(), 8, collFloat32, collFloat16, mulSum, comm, nullptr);
          }),
      refused(
          comm, "count", y,
          [&] {
    return collAllReduceCompressed(x.data(), y.data(), huge, collFloat32, collFloat16, collSum, comm, nullptr);
          }),
      refused(
          comm, "root 5", y,
          [&] { return collBroadcastCompressed(x.data(), y.data(), 8, collFloat32, collFloat16, 5, comm, nullptr); }),
      refused(comm, "recvbuff is NULL", y, [&] {
        return collAllReduceCompressed(x.data(), nullptr, 8, collFloat32, collFloat16, collMax, comm, nullptr);
      })};
  collRedOpDestroy(mulSum, comm);
  for (const std::string& c : checks)
    if (!c.empty()) return c;
  return "";
}

}  // namespace

TEST_CASE("compressed collectives refuse bad input by name, writing nothing", "[compressed]") {
  auto errors = testing::runRanks(2, [](int, collComm_t comm) { return badInputs(comm); });
  for (const std::string& e : errors) FAIL(e);
}

namespace {

// Rank `rank`'s result of the five compressed calls (or, with `plain`, of the calls the
// communicator's default compresses), in one group, next to an int32 allreduce that must
// stay exact.
std::string fiveCalls(int rank, collComm_t comm, int n, bool plain, std::vector<float>* out) {
  const size_t c = 700;
  const std::vector<float> x = inputs(Pattern::kNormal, rank, c * n);
  std::vector<float> ar(c), rs(c), ag(c * n), bc(c);
  std::vector<int32_t> ix(c, rank + 1), iy(c, 0);
  collGroupStart();
  if (plain) {
    collAllReduce(x.data(), ar.data(), c, collFloat32, collSum, comm, nullptr);
    collReduceScatter(x.data(), rs.data(), c, collFloat32, collAvg, comm, nullptr);
    collAllGather(x.data(), ag.data(), c, collFloat32, comm, nullptr);
    collBroadcast(x.data(), bc.data(), c, collFloat32, 1, comm, nullptr);
  } else {
    collAllReduceCompressed(x.data(), ar.data(), c, collFloat32, collFloat16, collSum, comm, nullptr);
    collReduceScatterCompressed(x.data(), rs.data(), c, collFloat32, collFloat16, collAvg, comm, nullptr);
    collAllGatherCompressed(x.data(), ag.data(), c, collFloat32, collFloat16, comm, nullptr);
    collBroadcastCompressed(x.data(), bc.data(), c, collFloat32, collFloat16, 1, comm, nullptr);
  }
  collAllReduce(ix.data(), iy.data(), c, collInt32, collSum, comm, nullptr);
  const collResult_t res = collGroupEnd();
  if (res != collSuccess) return failed(res, comm, "group");
  for (size_t i = 0; i < c; ++i)
    if (iy[i] != n * (n + 1) / 2) return "int32 allreduce changed: " + std::to_string(iy[i]);
  out->clear();
  for (const auto* v : {&ar, &rs, &ag, &bc}) out->insert(out->end(), v->begin(), v->end());
  std::string bad = checkReduced(ar.data(), c, Pattern::kNormal, n, collSum, collFloat16);
  if (bad.empty()) bad = checkReduced(rs.data(), c, Pattern::kNormal, n, collAvg, collFloat16, c * rank);
  return bad.empty() ? "" : "compressed in a group: " + bad;
}

std::vector<std::vector<float>> fiveCallsOnAll(int n, bool plain) {
  std::vector<std::vector<float>> got(static_cast<size_t>(n));
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) {
    return fiveCalls(rank, comm, n, plain, &got[static_cast<size_t>(rank)]);
  });
  for (const std::string& e : errors) FAIL(e);
  return got;
}

}  // namespace

TEST_CASE("COLL_COMPRESS=fp16 makes fp32 sum/avg collectives compressed, the same bits as the compressed calls",
          "[compressed]") {
  ScopedEnv oneShot("COLL_ONESHOT_BYTES", "0");
  ScopedEnv netOneShot("COLL_NET_ONESHOT_BYTES", "0");
  ScopedEnv buff("COLL_BUFFSIZE", "8192");
  const int n = 3;
  std::vector<std::vector<float>> explicitCalls, byDefault;
  {
    ScopedEnv compress("COLL_COMPRESS", "off");
    explicitCalls = fiveCallsOnAll(n, false);
  }
  {
    ScopedEnv compress("COLL_COMPRESS", "fp16");
    byDefault = fiveCallsOnAll(n, true);
  }
  for (int r = 0; r < n; ++r) REQUIRE(byDefault[static_cast<size_t>(r)] == explicitCalls[static_cast<size_t>(r)]);
  {
    ScopedEnv compress("COLL_COMPRESS", "off");
    const auto exact = fiveCallsOnAll(n, true);  // uncompressed: differs (the test can fail)
    REQUIRE(exact[0] != explicitCalls[0]);
  }
}

TEST_CASE("compression settings: a bad COLL_COMPRESS or config->compress fails init by name, and ranks must agree",
          "[compressed]") {
  {
    ScopedEnv compress("COLL_COMPRESS", "fp12");
    auto errors = testing::runRanks(2, [](int, collComm_t) { return std::string(); });
    REQUIRE(errors.size() == 2);
    CHECK_THAT(errors[0], Catch::Contains("COLL_COMPRESS=fp12"));
  }
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  std::vector<std::string> why(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      collConfig_t config = COLL_CONFIG_INITIALIZER;
      config.compress = r == 0 ? collCompressFloat16 : collCompressNone;
      collComm_t comm = nullptr;
      if (collCommInitRankConfig(&comm, 2, id, r, &config) == collSuccess) collCommDestroy(comm);
      else why[r] = collGetLastError(nullptr);
    });
  for (auto& t : threads) t.join();
  CHECK_THAT(why[0] + why[1], Catch::Contains("COLL_COMPRESS (or config->compress)"));
  collConfig_t bad = COLL_CONFIG_INITIALIZER;
  bad.compress = 7;
  collComm_t comm = nullptr;
  REQUIRE(collCommInitRankConfig(&comm, 1, id, 0, &bad) == collInvalidArgument);
  CHECK_THAT(collGetLastError(nullptr), Catch::Contains("config->compress 7"));
}

namespace {

// Horovod's fp16 compression on the same data: cast to fp16, allreduce in fp16 (every
// hop rounds to fp16), cast back.
std::string horovodStyle(int rank, collComm_t comm, Pattern p, std::vector<float>* out) {
  const std::vector<float> x = inputs(p, rank, kCount);
  std::vector<uint16_t> h(kCount), hs(kCount);
  for (size_t i = 0; i < kCount; ++i) h[i] = coll::floatToHalf(x[i]);
  const collResult_t res = collAllReduce(h.data(), hs.data(), kCount, collFloat16, collSum, comm, nullptr);
  if (res != collSuccess) return failed(res, comm, "fp16 allreduce");
  out->resize(kCount);
  for (size_t i = 0; i < kCount; ++i) (*out)[i] = coll::halfToFloat(hs[i]);
  return "";
}

std::string compressed(int rank, collComm_t comm, Pattern p, std::vector<float>* out) {
  const std::vector<float> x = inputs(p, rank, kCount);
  out->assign(kCount, 0.0f);
  const collResult_t res = collAllReduceCompressed(x.data(), out->data(), kCount, collFloat32, collFloat16, collSum,
                                                   comm, nullptr);
  return res == collSuccess ? "" : failed(res, comm, "collAllReduceCompressed");
}

struct Errors {
  double rms = 0;     // root mean square of the errors
  double maxAbs = 0;  // largest |error| (infinity where a finite sum came back non-finite)
  double maxRel = 0;  // largest |error| / |exact| over elements whose exact sum is not 0
};

Errors errorsOf(const std::vector<float>& got, Pattern p, int n) {
  Errors e;
  for (size_t i = 0; i < got.size(); ++i) {
    const double exact = exactOf(p, n, i, collSum).value;
    const double err = std::isfinite(got[i]) ? std::fabs(got[i] - exact) : INFINITY;
    e.rms += err * err;
    e.maxAbs = std::max(e.maxAbs, err);
    if (exact != 0) e.maxRel = std::max(e.maxRel, err / std::fabs(exact));
  }
  e.rms = std::sqrt(e.rms / static_cast<double>(got.size()));
  return e;
}

}  // namespace

TEST_CASE("compressed fp16 allreduce is at least as accurate as Horovod's fp16 compression on the same data",
          "[compressed]") {
  ScopedEnv oneShot("COLL_ONESHOT_BYTES", "0");
  ScopedEnv netOneShot("COLL_NET_ONESHOT_BYTES", "0");
  const int n = 4;
  std::printf("%-16s %11s %11s %11s %11s %11s %11s\n", "data (4 ranks)", "ours rms", "hvd rms", "ours maxabs",
              "hvd maxabs", "ours maxrel", "hvd maxrel");
  for (Pattern p : kPatterns) {
    if (p == Pattern::kSpecial || p == Pattern::kZeros) continue;
    std::vector<std::vector<float>> ours(n), hvd(n);
    auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) {
      std::string bad = compressed(rank, comm, p, &ours[static_cast<size_t>(rank)]);
      return bad.empty() ? horovodStyle(rank, comm, p, &hvd[static_cast<size_t>(rank)]) : bad;
    });
    for (const std::string& e : errors) FAIL(e);
    const Errors a = errorsOf(ours[0], p, n), b = errorsOf(hvd[0], p, n);
    std::printf("%-16s %11.3e %11.3e %11.3e %11.3e %11.3e %11.3e\n", patternName(p), a.rms, b.rms, a.maxAbs, b.maxAbs,
                a.maxRel, b.maxRel);
    INFO(patternName(p));
    // Every rank contributing the same 0.1 is the exception (docs/COMPRESSION.md): cast to
    // fp16 once, Horovod's partial sums stay exact in fp16, while ours round fp32 sums.
    if (p != Pattern::kEqual) CHECK(a.rms <= b.rms);
  }
}

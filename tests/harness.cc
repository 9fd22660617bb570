#include "harness.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>

#include "base/datatype.h"
#include "kernels/element_io.h"

namespace testing {

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  const char* old = std::getenv(name);
  had_ = old != nullptr;
  if (had_) old_ = old;
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (had_) setenv(name_.c_str(), old_.c_str(), 1);
  else unsetenv(name_.c_str());
}

int testShare() {
  const char* v = std::getenv("COLL_TEST_SHARE");
  const int n = v ? std::atoi(v) : 1;
  return n > 1 ? n : 1;
}

bool sampled(size_t index, size_t salt) {
  const size_t n = static_cast<size_t>(testShare());
  return index % n == salt % n;
}

CapturedLog::CapturedLog(const std::string& name)
    : path_("/tmp/coll-" + name + "-" + std::to_string(getpid()) + ".log") {
  std::remove(path_.c_str());
  file_.emplace("COLL_DEBUG_FILE", path_.c_str());
  collResetDebugInit();
}

CapturedLog::~CapturedLog() {
  file_.reset();
  collResetDebugInit();
  std::remove(path_.c_str());
}

std::string CapturedLog::text() const {
  std::ifstream f(path_);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

int CapturedLog::count(const std::string& what) const {
  std::ifstream f(path_);
  int n = 0;
  for (std::string line; std::getline(f, line);) n += line.find(what) != std::string::npos;
  return n;
}

std::vector<std::string> runRanks(int nranks, const std::function<std::string(int, collComm_t)>& body) {
  std::vector<std::string> errors;
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess) {
    errors.push_back(std::string("collGetUniqueId: ") + collGetLastError(nullptr));
    return errors;
  }
  std::vector<std::string> result(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      collComm_t comm = nullptr;
      if (collCommInitRank(&comm, nranks, id, r) != collSuccess) {
        result[r] = std::string("init: ") + collGetLastError(nullptr);
        return;
      }
      try {
        result[r] = body(r, comm);
      } catch (const std::exception& e) {
        result[r] = std::string("exception: ") + e.what();
      }
      if (collCommDestroy(comm) != collSuccess && result[r].empty())
        result[r] = std::string("destroy: ") + collGetLastError(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r)
    if (!result[r].empty()) errors.push_back("rank " + std::to_string(r) + ": " + result[r]);
  return errors;
}

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool isInt(collDataType_t t) { return coll::isIntegerType(t); }

uint64_t rawInt(int rank, size_t i, uint64_t seed) {
  uint64_t v = mix(seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + i);
  return v | 1;  // non-zero in every width
}

// Small non-zero float input: sums/avg take 1..8, prod takes +-1, +-2, max/min -8..8.
double rawFloat(collRedOp_t op, int rank, size_t i, uint64_t seed) {
  uint64_t h = mix(seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + i);
  if (seed & kOrderSensitiveSeed) {
    static const double kFactors[] = {1.1, -0.9, 1.3, -0.7};
    if (op == collProd) return kFactors[h % 4];
    if (op != collMax && op != collMin) return (static_cast<double>(h % 4001) - 2000) / 37;
  }
  switch (op) {
    case collProd: {
      static const double kVals[] = {1, 2, -1, -2};
      return kVals[h % 4];
    }
    case collMax:
    case collMin: {
      double v = static_cast<double>(h % 16) - 8;
      return v == 0 ? 3 : v;
    }
    default: return static_cast<double>(h % 8 + 1);
  }
}

void encode(void* dst, size_t i, collDataType_t t, double v) { coll::storeFloatElement(dst, i, t, v); }
double decode(const void* src, size_t i, collDataType_t t) { return coll::loadFloatElement(src, i, t); }
void storeInt(void* dst, size_t i, collDataType_t t, uint64_t v) { coll::storeIntElement(dst, i, t, v); }

template <typename I>
I combineInt(I a, I b, collRedOp_t op) {
  using U = std::make_unsigned_t<I>;
  switch (op) {
    case collProd:
      return static_cast<I>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) *
                                           static_cast<uint64_t>(static_cast<U>(b))));
    case collMax: return a > b ? a : b;
    case collMin: return a < b ? a : b;
    default: return static_cast<I>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}

template <typename I>
void intReference(void* out, collRedOp_t op, const std::vector<int>& order, size_t i, uint64_t seed, int nranks) {
  I acc = static_cast<I>(rawInt(order[0], i, seed));
  for (size_t k = 1; k < order.size(); ++k) acc = combineInt<I>(acc, static_cast<I>(rawInt(order[k], i, seed)), op);
  if (op == collAvg) acc = static_cast<I>(acc / static_cast<I>(nranks));
  std::memcpy(out, &acc, sizeof(I));
}

}  // namespace

void fillInput(void* buf, size_t count, collDataType_t t, collRedOp_t op, int rank, uint64_t seed) {
  for (size_t i = 0; i < count; ++i) {
    if (isInt(t)) storeInt(buf, i, t, rawInt(rank, i, seed));
    else encode(buf, i, t, rawFloat(op, rank, i, seed));
  }
}

void referenceReduce(void* out, collDataType_t t, collRedOp_t op, const std::vector<int>& order, size_t i,
                     uint64_t seed, int nranks) {
  switch (t) {
    case collInt8: return intReference<int8_t>(out, op, order, i, seed, nranks);
    case collUint8: return intReference<uint8_t>(out, op, order, i, seed, nranks);
    case collInt32: return intReference<int32_t>(out, op, order, i, seed, nranks);
    case collUint32: return intReference<uint32_t>(out, op, order, i, seed, nranks);
    case collInt64: return intReference<int64_t>(out, op, order, i, seed, nranks);
    case collUint64: return intReference<uint64_t>(out, op, order, i, seed, nranks);
    default: break;
  }
  // Floating: inputs as the ranks encoded them; combine in fp32 (fp64 for double),
  // re-encode after every step, exactly like a chain of hops.
  unsigned char tmp[8];
  auto input = [&](int r) {
    encode(tmp, 0, t, rawFloat(op, r, i, seed));
    return decode(tmp, 0, t);
  };
  auto roundT = [&](double v) {
    encode(tmp, 0, t, v);
    return decode(tmp, 0, t);
  };
  bool dbl = t == collFloat64;
  double acc = input(order[0]);
  if (order.size() == 1 && op == collAvg)
    acc = roundT(dbl ? acc * (1.0 / nranks) : static_cast<float>(acc) * (1.0f / nranks));
  for (size_t k = 1; k < order.size(); ++k) {
    double x = input(order[k]);
    double r;
    if (dbl) {
      switch (op) {
        case collProd: r = acc * x; break;
        case collMax: r = x > acc ? x : acc; break;
        case collMin: r = x < acc ? x : acc; break;
        default: r = acc + x;
      }
      if (op == collAvg && k + 1 == order.size()) r = r * (1.0 / nranks);
    } else {
      float a = static_cast<float>(acc), b = static_cast<float>(x), f;
      switch (op) {
        case collProd: f = a * b; break;
        case collMax: f = b > a ? b : a; break;
        case collMin: f = b < a ? b : a; break;
        default: f = a + b;
      }
      if (op == collAvg && k + 1 == order.size()) f = f * (1.0f / static_cast<float>(nranks));
      r = f;
    }
    acc = roundT(r);
  }
  encode(out, 0, t, acc);
}

bool sameElement(const void* a, const void* b, size_t i, collDataType_t t) {
  size_t es = coll::dataTypeSize(t);
  return std::memcmp(static_cast<const char*>(a) + i * es, static_cast<const char*>(b) + i * es, es) == 0;
}

std::string elementString(const void* buf, size_t i, collDataType_t t) {
  if (isInt(t)) {
    uint64_t v = 0;
    std::memcpy(&v, static_cast<const char*>(buf) + i * coll::dataTypeSize(t), coll::dataTypeSize(t));
    return std::to_string(v);
  }
  return std::to_string(decode(buf, i, t));
}

}  // namespace testing

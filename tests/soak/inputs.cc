// Inputs every rank can recompute for every other rank, and the exact expected results.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/datatype.h"
#include "kernels/element_io.h"
#include "soak.h"

namespace soak {
namespace {

// The largest L such that every integer of [-L, L] is exact in t.
int64_t exactRange(collDataType_t t) {
  switch (t) {
    case collFloat16: return 2048;
    case collBfloat16: return 256;
    case collFloat8e4m3: return 16;
    case collFloat8e5m2: return 8;
    case collFloat32: return int64_t{1} << 24;
    default: return int64_t{1} << 53;
  }
}

bool isSigned(collDataType_t t) { return t == collInt8 || t == collInt32 || t == collInt64; }

uint64_t widthMask(size_t es) { return es >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * es)) - 1; }

// The integer element as a 64-bit value of its own signedness (two's complement bits).
int64_t signExtend(uint64_t v, size_t es) {
  int shift = static_cast<int>(64 - 8 * es);
  return static_cast<int64_t>(v << shift) >> shift;
}

// a < b for integer elements of type t.
bool intLess(uint64_t a, uint64_t b, collDataType_t t, size_t es) {
  if (isSigned(t)) return signExtend(a, es) < signExtend(b, es);
  return (a & widthMask(es)) < (b & widthMask(es));
}

}  // namespace

const char* kindName(Kind k) {
  static const char* kNames[] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                                 "alltoall",  "gather",    "scatter", "sendrecv",  "alltoallv"};
  return kNames[static_cast<int>(k)];
}

bool isReduction(Kind k) { return k == Kind::kAllReduce || k == Kind::kReduce || k == Kind::kReduceScatter; }

bool perRankBlocks(Kind k) {
  return k == Kind::kAllGather || k == Kind::kReduceScatter || k == Kind::kAlltoAll || k == Kind::kGather ||
         k == Kind::kScatter || k == Kind::kAlltoAllv;
}

std::string OpSpec::describe() const {
  char buf[256];
  const char* opName = op == kPreMulSum ? (scalarImmediate ? "premulsum(immediate)" : "premulsum(host)")
                                        : coll::redOpName(static_cast<collRedOp_t>(op));
  std::snprintf(buf, sizeof(buf), "%s %s %s count %zu rootDraw %llu shift %llu %s dataSeed %016llx", kindName(kind),
                coll::dataTypeName(type), isReduction(kind) ? opName : "-", count,
                static_cast<unsigned long long>(rootDraw % 1000), static_cast<unsigned long long>(shift % 1000),
                inPlace ? "in-place" : "out-of-place", static_cast<unsigned long long>(dataSeed));
  return buf;
}

Inputs::Inputs(const OpSpec& s, int n) : s_(s), n_(n), es_(coll::dataTypeSize(s.type)) {
  int_ = coll::isIntegerType(s.type);
  int64_t range = exactRange(s.type);
  if (s.op == kPreMulSum && range / n >= 2) scalarMax_ = 2;
  magnitude_ = static_cast<int>(std::clamp<int64_t>(range / (n * scalarMax_), 1, 1 << 20));
}

uint64_t Inputs::hash(int src, size_t idx) const {
  return mix(s_.dataSeed ^ mix((static_cast<uint64_t>(src) << 40) + idx));
}

double Inputs::floatValue(int src, size_t idx) const {
  uint64_t h = hash(src, idx);
  switch (s_.op) {
    case collProd: {
      static const double kFactors[] = {1, -1, 2, -2};  // 8 ranks: at most 256 in magnitude
      return kFactors[h % 4];
    }
    case collMax:
    case collMin: {
      double v = static_cast<double>(h % 17) - 8;
      return v == 0 ? 3 : v;
    }
    default: {  // sums: the running sum stays within the exact range in any order
      double v = static_cast<double>(1 + (h >> 1) % static_cast<uint64_t>(magnitude_));
      return (h & 1) ? -v : v;
    }
  }
}

double Inputs::floatScalar(int src) const {
  uint64_t h = mix(s_.dataSeed ^ 0x5ca1ab1eull ^ static_cast<uint64_t>(src));
  double v = scalarMax_ == 2 ? static_cast<double>(1 + (h >> 1) % 2) : 1.0;
  return (h & 1) ? -v : v;
}

uint64_t Inputs::intScalar(int src) const {
  uint64_t h = mix(s_.dataSeed ^ 0x5ca1ab1eull ^ static_cast<uint64_t>(src));
  return static_cast<uint64_t>(static_cast<int64_t>(h % 7) - 3);
}

void Inputs::scalar(void* out, int src) const {
  std::memset(out, 0, 8);
  if (int_) coll::storeIntElement(out, 0, s_.type, intScalar(src));
  else coll::storeFloatElement(out, 0, s_.type, floatScalar(src));
}

void Inputs::fill(void* dst, int src, size_t first, size_t count) const {
  auto* out = static_cast<unsigned char*>(dst);
  if (int_ || !isReduction(s_.kind)) {
    for (size_t i = 0; i < count; ++i) {
      uint64_t h = hash(src, first + i);
      std::memcpy(out + i * es_, &h, es_);
    }
    return;
  }
  for (size_t i = 0; i < count; ++i) coll::storeFloatElement(out, i, s_.type, floatValue(src, first + i));
}

void Inputs::expectInt(void* out, size_t i, const std::vector<int>& members, size_t idx) const {
  uint64_t acc = s_.op == collProd ? 1 : 0;
  for (size_t k = 0; k < members.size(); ++k) {
    uint64_t x = hash(members[k], idx);
    switch (s_.op) {
      case collProd: acc *= x; break;
      case collMax: acc = (k == 0 || intLess(acc, x, s_.type, es_)) ? x : acc; break;
      case collMin: acc = (k == 0 || intLess(x, acc, s_.type, es_)) ? x : acc; break;
      case kPreMulSum: acc += intScalar(members[k]) * x; break;
      default: acc += x;
    }
  }
  if (s_.op == collAvg) {
    auto n = static_cast<int64_t>(members.size());
    if (isSigned(s_.type)) acc = static_cast<uint64_t>(signExtend(acc, es_) / n);
    else acc = (acc & widthMask(es_)) / static_cast<uint64_t>(n);
  }
  std::memcpy(static_cast<unsigned char*>(out) + i * es_, &acc, es_);
}

void Inputs::expect(void* out, size_t i, const std::vector<int>& members, size_t idx) const {
  if (int_) return expectInt(out, i, members, idx);
  double acc = s_.op == collProd ? 1 : 0;
  for (size_t k = 0; k < members.size(); ++k) {
    double x = floatValue(members[k], idx);
    switch (s_.op) {
      case collProd: acc *= x; break;
      case collMax: acc = (k == 0 || x > acc) ? x : acc; break;
      case collMin: acc = (k == 0 || x < acc) ? x : acc; break;
      case kPreMulSum: acc += floatScalar(members[k]) * x; break;
      default: acc += x;
    }
  }
  if (s_.op == collAvg) {
    // The library scales the exact sum by 1/nranks: in fp64 for doubles, else in fp32.
    if (s_.type == collFloat64) acc = acc * (1.0 / static_cast<double>(n_));
    else acc = static_cast<float>(acc) * (1.0f / static_cast<float>(n_));
  }
  coll::storeFloatElement(out, i, s_.type, acc);
}

std::string elementText(const void* buf, size_t i, collDataType_t t) {
  size_t es = coll::dataTypeSize(t);
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const unsigned char*>(buf) + i * es, es);
  char text[96];
  if (coll::isIntegerType(t))
    std::snprintf(text, sizeof(text), "0x%0*llx", static_cast<int>(2 * es), static_cast<unsigned long long>(bits));
  else
    std::snprintf(text, sizeof(text), "%.9g (0x%0*llx)", coll::loadFloatElement(buf, i, t), static_cast<int>(2 * es),
                  static_cast<unsigned long long>(bits));
  return text;
}

}  // namespace soak

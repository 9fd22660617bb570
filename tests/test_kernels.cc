// Host kernels: conversions of the narrow float types checked exhaustively against a
// brute-force nearest-value search, and every type x op reduction against a float64 /
// integer reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "base/datatype.h"
#include "kernels/float_conv.h"
#include "kernels/host_copy.h"
#include "kernels/host_reduce.h"
#include "kernels/reduce_ops.h"

using namespace coll;

namespace {

// All finite values of a format, sorted, with their encodings (positive only).
template <typename Decode>
std::vector<std::pair<double, uint32_t>> finiteTable(uint32_t codes, Decode decode) {
  std::vector<std::pair<double, uint32_t>> t;
  for (uint32_t c = 0; c < codes; ++c) {
    double v = decode(c);
    if (std::isfinite(v) && !std::signbit(v)) t.push_back({v, c});
  }
  std::sort(t.begin(), t.end());
  return t;
}

// Round-to-nearest-even by search: the code of the nearest finite value to x >= 0, or
// `overflow` when x is at least halfway past the largest value (ties past the max go up).
template <typename Table>
uint32_t nearestEven(const Table& t, double x, uint32_t overflow, double nextAfterMax) {
  if (x >= (t.back().first + nextAfterMax) / 2) {
    if (x == (t.back().first + nextAfterMax) / 2 && (t.back().second & 1) == 0) return t.back().second;
    return overflow;
  }
  auto it = std::lower_bound(t.begin(), t.end(), std::make_pair(x, 0u));
  if (it == t.end()) return t.back().second;
  if (it->first == x || it == t.begin()) return it->second;
  auto lo = it - 1;
  double dl = x - lo->first, dh = it->first - x;
  if (dl < dh) return lo->second;
  if (dh < dl) return it->second;
  return (lo->second & 1) == 0 ? lo->second : it->second;  // tie: even mantissa
}

// Probe points around every representable value: the value, midpoints and a nudge either
// side of each midpoint (in float).
template <typename Table>
std::vector<float> probes(const Table& t) {
  std::vector<float> p;
  for (size_t i = 0; i < t.size(); ++i) {
    p.push_back(static_cast<float>(t[i].first));
    if (i + 1 < t.size()) {
      float mid = static_cast<float>((t[i].first + t[i + 1].first) / 2);
      p.push_back(mid);
      p.push_back(std::nextafter(mid, 0.0f));
      p.push_back(std::nextafter(mid, INFINITY));
    }
  }
  return p;
}

}  // namespace

TEST_CASE("fp16 decode/encode round-trips every code", "[kernels][fp16]") {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = halfToFloat(static_cast<uint16_t>(c));
    uint16_t back = floatToHalf(f);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(halfToFloat(back)));
      REQUIRE((back & 0x8000) == (c & 0x8000));
    } else {
      REQUIRE(back == c);
    }
  }
}

TEST_CASE("fp16 encode rounds to nearest even everywhere", "[kernels][fp16]") {
  auto t = finiteTable(0x8000, [](uint32_t c) { return static_cast<double>(halfToFloat(static_cast<uint16_t>(c))); });
  const double nextAfterMax = 65536.0;  // 65504 + one ulp (32)
  for (float x : probes(t)) {
    uint32_t want = nearestEven(t, x, 0x7c00, nextAfterMax);
    REQUIRE(floatToHalf(x) == want);
    REQUIRE(floatToHalf(-x) == (want | 0x8000));
  }
  REQUIRE(floatToHalf(1e6f) == 0x7c00);
  REQUIRE(floatToHalf(INFINITY) == 0x7c00);
  REQUIRE(floatToHalf(-INFINITY) == 0xfc00);
  REQUIRE(std::isnan(halfToFloat(floatToHalf(NAN))));
  REQUIRE(floatToHalf(1e-10f) == 0);  // below half the smallest subnormal
  REQUIRE(floatToHalf(-0.0f) == 0x8000);
}

TEST_CASE("bf16 round-trips and rounds to nearest even", "[kernels][bf16]") {
  for (uint32_t c = 0; c < 65536; ++c) {
    float f = bf16ToFloat(static_cast<uint16_t>(c));
    uint16_t back = floatToBf16(f);
    if (std::isnan(f)) REQUIRE(std::isnan(bf16ToFloat(back)));
    else REQUIRE(back == c);
  }
  auto t = finiteTable(0x8000, [](uint32_t c) { return static_cast<double>(bf16ToFloat(static_cast<uint16_t>(c))); });
  const double maxv = t.back().first;
  const double nextAfterMax = maxv + std::ldexp(1.0, 127 - 7);
  for (float x : probes(t)) {
    if (!std::isfinite(x)) continue;
    REQUIRE(floatToBf16(x) == nearestEven(t, x, 0x7f80, nextAfterMax));
  }
}

template <typename F>
static void checkFp8(uint32_t maxCode, double nextAfterMax) {
  for (uint32_t c = 0; c < 256; ++c) {
    float f = F::toFloat(static_cast<uint8_t>(c));
    uint8_t back = F::fromFloat(f);
    if (std::isnan(f)) {
      REQUIRE(std::isnan(F::toFloat(back)));
    } else if (std::isinf(f)) {
      REQUIRE(back == ((c & 0x80) | maxCode));  // saturating
    } else {
      REQUIRE(back == c);
    }
  }
  auto t = finiteTable(0x80, [](uint32_t c) { return static_cast<double>(F::toFloat(static_cast<uint8_t>(c))); });
  REQUIRE(t.back().second == maxCode);
  for (float x : probes(t)) {
    REQUIRE(F::fromFloat(x) == nearestEven(t, x, maxCode, nextAfterMax));
    REQUIRE(F::fromFloat(-x) == (nearestEven(t, x, maxCode, nextAfterMax) | 0x80));
  }
  REQUIRE(F::fromFloat(1e30f) == maxCode);
  REQUIRE(F::fromFloat(-1e30f) == (maxCode | 0x80));
  REQUIRE(std::isnan(F::toFloat(F::fromFloat(NAN))));
}

TEST_CASE("fp8 e4m3: every code, rounding ties, saturation", "[kernels][fp8]") {
  REQUIRE(Fp8E4M3::toFloat(0x7e) == 448.0f);
  REQUIRE(std::isnan(Fp8E4M3::toFloat(0x7f)));
  REQUIRE(Fp8E4M3::toFloat(0x01) == std::ldexp(1.0f, -9));
  checkFp8<Fp8E4M3>(0x7e, 480.0);
}

TEST_CASE("fp8 e5m2: every code, rounding ties, saturation", "[kernels][fp8]") {
  REQUIRE(Fp8E5M2::toFloat(0x7b) == 57344.0f);
  REQUIRE(std::isinf(Fp8E5M2::toFloat(0x7c)));
  REQUIRE(Fp8E5M2::toFloat(0x01) == std::ldexp(1.0f, -16));
  checkFp8<Fp8E5M2>(0x7b, 65536.0);
}

namespace {

// Reference: decode to double (or exact integer), combine, encode back.
double decodeRef(collDataType_t t, const void* p) {
  switch (t) {
    case collInt8: return *static_cast<const int8_t*>(p);
    case collUint8: return *static_cast<const uint8_t*>(p);
    case collInt32: return *static_cast<const int32_t*>(p);
    case collUint32: return *static_cast<const uint32_t*>(p);
    case collFloat16: return halfToFloat(*static_cast<const uint16_t*>(p));
    case collFloat32: return *static_cast<const float*>(p);
    case collFloat64: return *static_cast<const double*>(p);
    case collBfloat16: return bf16ToFloat(*static_cast<const uint16_t*>(p));
    case collFloat8e4m3: return Fp8E4M3::toFloat(*static_cast<const uint8_t*>(p));
    case collFloat8e5m2: return Fp8E5M2::toFloat(*static_cast<const uint8_t*>(p));
    default: return 0;
  }
}

template <typename I>
I intRef(I a, I b, collRedOp_t op, int nranks, bool final) {
  using U = std::make_unsigned_t<I>;
  switch (op) {
    case collSum: return static_cast<I>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    case collProd:
      return static_cast<I>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) *
                                           static_cast<uint64_t>(static_cast<U>(b))));
    case collMax: return std::max(a, b);
    case collMin: return std::min(a, b);
    default: {
      I s = static_cast<I>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      return final ? static_cast<I>(s / static_cast<I>(nranks)) : s;
    }
  }
}

template <typename I>
void checkIntType(collDataType_t t, std::mt19937_64& rng) {
  const int n = 1000;
  std::vector<I> a(n), b(n), out(n);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<I>(rng());
    b[i] = static_cast<I>(rng());
  }
  a[0] = std::numeric_limits<I>::max();
  b[0] = std::numeric_limits<I>::max();
  a[1] = std::numeric_limits<I>::min();
  b[1] = static_cast<I>(-1);
  for (int op = 0; op < collNumOps; ++op) {
    const auto& k = hostReduceKernels(t, static_cast<collRedOp_t>(op));
    for (bool final : {false, true}) {
      if (final) k.final(out.data(), a.data(), b.data(), n, 3);
      else k.reduce(out.data(), a.data(), b.data(), n);
      for (int i = 0; i < n; ++i) {
        INFO(dataTypeName(t) << " " << redOpName(static_cast<collRedOp_t>(op)) << " i=" << i);
        REQUIRE(out[i] == intRef<I>(a[i], b[i], static_cast<collRedOp_t>(op), 3, final));
      }
    }
  }
}

}  // namespace

TEST_CASE("integer reductions wrap and truncate like the reference", "[kernels]") {
  std::mt19937_64 rng(42);
  checkIntType<int8_t>(collInt8, rng);
  checkIntType<uint8_t>(collUint8, rng);
  checkIntType<int32_t>(collInt32, rng);
  checkIntType<uint32_t>(collUint32, rng);
  checkIntType<int64_t>(collInt64, rng);
  checkIntType<uint64_t>(collUint64, rng);
}

TEST_CASE("floating reductions match fp32/fp64 arithmetic then one rounding", "[kernels]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  const collDataType_t types[] = {collFloat16, collFloat32, collFloat64, collBfloat16, collFloat8e4m3, collFloat8e5m2};
  for (collDataType_t t : types) {
    const size_t es = dataTypeSize(t), n = 777;
    std::vector<unsigned char> a(n * es), b(n * es), out(n * es), enc(es);
    // Fill through the type's own encoding so inputs are representable.
    auto encode = [&](double v, void* dst) {
      switch (t) {
        case collFloat16: *static_cast<uint16_t*>(dst) = floatToHalf(static_cast<float>(v)); break;
        case collFloat32: *static_cast<float*>(dst) = static_cast<float>(v); break;
        case collFloat64: *static_cast<double*>(dst) = v; break;
        case collBfloat16: *static_cast<uint16_t*>(dst) = floatToBf16(static_cast<float>(v)); break;
        case collFloat8e4m3: *static_cast<uint8_t*>(dst) = Fp8E4M3::fromFloat(static_cast<float>(v)); break;
        case collFloat8e5m2: *static_cast<uint8_t*>(dst) = Fp8E5M2::fromFloat(static_cast<float>(v)); break;
        default: break;
      }
    };
    for (size_t i = 0; i < n; ++i) {
      encode(dist(rng), &a[i * es]);
      encode(dist(rng), &b[i * es]);
    }
    for (int op = 0; op < collNumOps; ++op) {
      const auto& k = hostReduceKernels(t, static_cast<collRedOp_t>(op));
      k.final(out.data(), a.data(), b.data(), n, 3);
      for (size_t i = 0; i < n; ++i) {
        double x = decodeRef(t, &a[i * es]), y = decodeRef(t, &b[i * es]), r = 0;
        if (t == collFloat64) {
          switch (op) {
            case collSum: r = x + y; break;
            case collProd: r = x * y; break;
            case collMax: r = std::max(x, y); break;
            case collMin: r = std::min(x, y); break;
            default: r = (x + y) * (1.0 / 3);
          }
        } else {
          float fx = static_cast<float>(x), fy = static_cast<float>(y);
          switch (op) {
            case collSum: r = fx + fy; break;
            case collProd: r = fx * fy; break;
            case collMax: r = std::max(fx, fy); break;
            case collMin: r = std::min(fx, fy); break;
            default: r = (fx + fy) * (1.0f / 3);
          }
        }
        encode(r, enc.data());
        INFO(dataTypeName(t) << " " << redOpName(static_cast<collRedOp_t>(op)) << " i=" << i);
        REQUIRE(std::memcmp(enc.data(), &out[i * es], es) == 0);
      }
    }
  }
}

TEST_CASE("fp16 kernels agree with scalar conversions on every code", "[kernels][fp16]") {
  INFO("fp16 kernel variant: " << hostReduceVariant(collFloat16));
  const size_t n = 65536;
  std::vector<uint16_t> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<uint16_t>(i);
    b[i] = static_cast<uint16_t>((i * 40503u + 12345u) & 0xffff);  // a permutation of all codes
  }
  for (int op = 0; op < collNumOps; ++op) {
    const auto& k = hostReduceKernels(collFloat16, static_cast<collRedOp_t>(op));
    k.final(out.data(), a.data(), b.data(), n, 3);
    for (size_t i = 0; i < n; ++i) {
      float x = halfToFloat(a[i]), y = halfToFloat(b[i]), r;
      switch (op) {
        case collSum: r = x + y; break;
        case collProd: r = x * y; break;
        case collMax: r = y > x ? y : x; break;
        case collMin: r = y < x ? y : x; break;
        default: r = (x + y) * (1.0f / 3);
      }
      // NaN from arithmetic is one quiet NaN (reduce_ops.h canonicalNaN); max and min
      // keep the operand they chose.
      const bool arith = op != collMax && op != collMin;
      uint16_t want = std::isnan(r) && arith ? uint16_t{0x7e00} : floatToHalf(r);
      INFO("op " << op << " a=" << a[i] << " b=" << b[i]);
      REQUIRE(out[i] == want);
    }
  }
}

namespace {
// Stores every value of `pairs` as T in a and b (repeated past 16 elements, so vector
// bodies and scalar tails both see them), reduces, and checks that every element whose
// fp32/fp64 result is NaN holds exactly the canonical NaN of T: what a GPU computes for
// the same elements (its NaN is 0x7fffffff where x86 gives 0xffc00000 or an operand's).
template <typename T>
void checkCanonicalNaN(collDataType_t type, const std::vector<std::pair<double, double>>& pairs) {
  using E = Elem<T>;
  using C = typename E::C;
  const size_t n = pairs.size() * 5 + 3;
  std::vector<T> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = E::store(static_cast<C>(pairs[i % pairs.size()].first));
    b[i] = E::store(static_cast<C>(pairs[i % pairs.size()].second));
  }
  const T canon = E::store(static_cast<C>(std::numeric_limits<double>::quiet_NaN()));
  for (collRedOp_t op : {collSum, collProd, collAvg}) {
    hostReduceKernels(type, op).final(out.data(), a.data(), b.data(), n, 3);
    for (size_t i = 0; i < n; ++i) {
      const C x = E::load(a[i]), y = E::load(b[i]);
      const C r = op == collProd ? x * y : x + y;
      if (r == r) continue;
      INFO(dataTypeName(type) << " " << redOpName(op) << " element " << i);
      REQUIRE(std::memcmp(&out[i], &canon, sizeof(T)) == 0);
    }
  }
}
double nanBits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
}  // namespace

TEST_CASE("sum, prod and avg store one canonical NaN whatever NaN the CPU made", "[kernels]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double negNaN = nanBits(0xfff8000000012345ull);  // negative, with a payload
  const std::vector<std::pair<double, double>> pairs = {
      {inf, 0.0} /* an fp16 prod that overflowed meets a zero: the H100's case of 2026-11-25 */,
      {0.0, -inf},
      {inf, -inf},
      {-inf, inf},
      {negNaN, 1.0},
      {2.0, negNaN},
      {negNaN, negNaN},
      {1.5, 2.5},
      {-inf, -0.0},
      {65504.0, 65504.0}};
  checkCanonicalNaN<Half>(collFloat16, pairs);
  checkCanonicalNaN<Bf16>(collBfloat16, pairs);
  checkCanonicalNaN<float>(collFloat32, pairs);
  checkCanonicalNaN<double>(collFloat64, pairs);
  checkCanonicalNaN<E4M3>(collFloat8e4m3, pairs);
  checkCanonicalNaN<E5M2>(collFloat8e5m2, pairs);
}

TEST_CASE("streaming copy matches memcpy at every alignment and length", "[kernels][copy]") {
  std::vector<unsigned char> src(4096 + 64), dst(4096 + 64);
  std::mt19937 rng(7);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  for (size_t dOff : {0, 1, 7, 15, 16, 33}) {
    for (size_t sOff : {0, 3, 16}) {
      for (size_t n : {0, 1, 15, 16, 63, 64, 65, 127, 1000, 4000}) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        coll::ntCopy(dst.data() + dOff, src.data() + sOff, n);
        INFO("dst offset " << dOff << ", src offset " << sOff << ", " << n << " bytes");
        REQUIRE(std::equal(dst.begin() + dOff, dst.begin() + dOff + n, src.begin() + sOff));
        // Nothing around the destination range is touched.
        REQUIRE(std::all_of(dst.begin(), dst.begin() + dOff, [](unsigned char b) { return b == 0xEE; }));
        REQUIRE(std::all_of(dst.begin() + dOff + n, dst.end(), [](unsigned char b) { return b == 0xEE; }));
      }
    }
  }
}

// hostCopy takes a vector loop where the destination is just ahead of the source modulo
// 4096 (memcpy's rep movsb is 15x slower there on this CPU), and copies up to 256 bytes
// inline; either way it must copy exactly the bytes asked for, at every such distance,
// around the loop's threshold and at every size the inline copy takes.
TEST_CASE("host copy matches memcpy at every short page distance", "[kernels][copy]") {
  std::vector<unsigned char> src(3 * 4096 + 80000), dst(3 * 4096 + 80000);
  std::mt19937 rng(11);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  auto pageStart = [](std::vector<unsigned char>& v) {
    auto a = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + (((a + 4095) & ~uintptr_t{4095}) - a);
  };
  unsigned char* s0 = pageStart(src) + 100;
  unsigned char* d0 = pageStart(dst) + 100;
  for (size_t dist : {size_t{0}, size_t{1}, size_t{4}, size_t{8}, size_t{15}, size_t{16}, size_t{33}, size_t{63},
                      size_t{64}, size_t{4095}}) {
    for (size_t n : {0,  1,  2,  3,  4,  5,   7,   8,   9,    12,   15,   16,   17,   31,
                     32, 33, 63, 64, 65, 255, 256, 257, 2047, 2048, 2049, 5000, 70001}) {
      std::fill(dst.begin(), dst.end(), 0xEE);
      unsigned char* d = d0 + dist;
      coll::hostCopy(d, s0, n);
      INFO("destination " << dist << " bytes ahead of the source in its page, " << n << " bytes");
      REQUIRE(std::equal(d, d + n, s0));
      REQUIRE(std::all_of(dst.data(), d, [](unsigned char b) { return b == 0xEE; }));
      REQUIRE(std::all_of(d + n, dst.data() + dst.size(), [](unsigned char b) { return b == 0xEE; }));
    }
  }
}

// NCCL takes buffers at any address (perf_tests --offset 4095), so every kernel must give
// the same bits for the same bytes wherever they lie (under UBSan, an element access at a
// misaligned address ends the process).
TEST_CASE("every reduction gives the same bits at any buffer alignment", "[kernels]") {
  const size_t n = 37;  // vector loops and a scalar tail
  std::mt19937 rng(5);
  std::vector<unsigned char> a(n * 8), b(n * 8), ref(n * 8);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<unsigned char>(rng());
    b[i] = static_cast<unsigned char>(rng());
  }
  std::vector<unsigned char> xa(n * 8 + 32), xb(xa.size()), xd(xa.size());  // 16-aligned storage
  for (int t = 0; t < collNumTypes; ++t) {
    const auto type = static_cast<collDataType_t>(t);
    const size_t bytes = n * dataTypeSize(type);
    for (int o = 0; o < collNumOps; ++o) {
      const ReduceKernels& k = hostReduceKernels(type, static_cast<collRedOp_t>(o));
      for (int form = 0; form < 3; ++form) {
        auto run = [&](unsigned char* d, const unsigned char* x, const unsigned char* y) {
          if (form == 0) k.reduce(d, x, y, n);
          else if (form == 1) k.final(d, x, y, n, 3);
          else k.scale(d, x, n, 3);
        };
        run(ref.data(), a.data(), b.data());
        for (size_t off : {1, 3, 7}) {
          INFO(dataTypeName(type) << " " << redOpName(static_cast<collRedOp_t>(o)) << " form " << form << " offset "
                                  << off);
          std::memcpy(&xa[off], a.data(), bytes);
          std::memcpy(&xb[2 * off], b.data(), bytes);
          run(&xd[3 * off], &xa[off], &xb[2 * off]);
          REQUIRE(std::memcmp(&xd[3 * off], ref.data(), bytes) == 0);
          run(&xa[off], &xa[off], &xb[2 * off]);  // in place
          REQUIRE(std::memcmp(&xa[off], ref.data(), bytes) == 0);
        }
      }
    }
  }
}

TEST_CASE("ops called order-free give the same bits with their inputs swapped", "[kernels]") {
  std::mt19937_64 rng(7);
  const size_t n = 4099;  // vector bodies and a scalar tail
  for (int t = 0; t < collNumTypes; ++t)
    for (int o = 0; o < collNumOps; ++o) {
      const auto type = static_cast<collDataType_t>(t);
      const auto op = static_cast<collRedOp_t>(o);
      if (!orderFree(type, op)) continue;
      const size_t bytes = n * dataTypeSize(type);
      // Random bits: every kind of value, NaNs with payloads and both zeros included.
      std::vector<unsigned char> a(bytes), b(bytes), ab(bytes), ba(bytes);
      for (size_t i = 0; i < bytes; ++i) {
        a[i] = static_cast<unsigned char>(rng());
        b[i] = static_cast<unsigned char>(rng());
      }
      const ReduceKernels& k = hostReduceKernels(type, op);
      for (int nranks : {2, 3}) {
        k.final(ab.data(), a.data(), b.data(), n, nranks);
        k.final(ba.data(), b.data(), a.data(), n, nranks);
        INFO("type " << t << " op " << o << " nranks " << nranks);
        CHECK(std::memcmp(ab.data(), ba.data(), bytes) == 0);
      }
    }
}

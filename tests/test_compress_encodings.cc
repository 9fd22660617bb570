// Wire encodings of compressed collectives (kernels/compress.h): the error bound of the
// block-scaled fp16 encoding over mixed magnitudes, no overflow for any finite input,
// infinities, NaN, signed zeros and subnormals carried through.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/compress.h"

using namespace coll;

namespace {

// Encodes and decodes one block; returns the decoded values.
std::vector<float> roundTrip(const std::vector<float>& x, int8_t* e) {
  std::vector<uint16_t> encoded(x.size());
  *e = encodeFp16Group(x.data(), x.size(), encoded.data());
  std::vector<float> back(x.size());
  decodeFp16Group(encoded.data(), encoded.size(), *e, back.data());
  return back;
}

// The documented bound: 2^-11 * 2^floor(log2 m), m the block's largest finite magnitude.
double boundFor(const std::vector<float>& x) {
  double m = 0;
  for (float v : x)
    if (std::isfinite(v)) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m > 0 ? std::ldexp(1.0, std::ilogb(m) - 11) : 0;
}

}  // namespace

TEST_CASE("fp16 block-scaled: error within 2^-11 of the block's binade, for mixed magnitudes", "[compress]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> logMag(-8.0f, 8.0f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(kCompressGroup);
    const bool mixed = trial % 2 == 1;
    for (float& v : x) v = mixed ? normal(rng) * std::pow(10.0f, logMag(rng)) : normal(rng) * 1e-3f;
    int8_t e = 0;
    const std::vector<float> back = roundTrip(x, &e);
    const double bound = boundFor(x);
    for (size_t i = 0; i < x.size(); ++i) {
      INFO("trial " << trial << " element " << i << ": " << x[i] << " -> " << back[i] << ", e " << int(e));
      REQUIRE(std::fabs(static_cast<double>(back[i]) - x[i]) <= bound);
      REQUIRE(std::signbit(back[i]) == std::signbit(x[i]));
    }
  }
}

TEST_CASE("fp16 block-scaled: no finite input overflows, at the top of fp32's range", "[compress]") {
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> x = {big, -big, 3.0e38f, 1.0f, -2.5e37f, std::nextafter(big, 0.0f)};
  int8_t e = 0;
  const std::vector<float> back = roundTrip(x, &e);
  const double bound = 2 * boundFor(x);  // the top binade rounds down: one ulp (compress.h)
  for (size_t i = 0; i < x.size(); ++i) {
    INFO(x[i] << " -> " << back[i]);
    REQUIRE(std::isfinite(back[i]));
    REQUIRE(std::fabs(static_cast<double>(back[i]) - x[i]) <= bound);
  }
}

TEST_CASE("fp16 block-scaled: infinities and NaN pass unscaled, finite neighbours keep the bound", "[compress]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {inf, -inf, std::nanf(""), 1.5e5f, -3.0f, 7.0e-4f};
  int8_t e = 0;
  const std::vector<float> back = roundTrip(x, &e);
  REQUIRE(back[0] == inf);
  REQUIRE(back[1] == -inf);
  REQUIRE(std::isnan(back[2]));
  const double bound = boundFor(x);  // over the finite ones: 1.5e5
  for (size_t i = 3; i < x.size(); ++i) REQUIRE(std::fabs(static_cast<double>(back[i]) - x[i]) <= bound);
  // Only non-finite values: exponent 0, still carried.
  const std::vector<float> onlyInf = {inf, std::nanf("")};
  const std::vector<float> b2 = roundTrip(onlyInf, &e);
  REQUIRE(e == 0);
  REQUIRE(b2[0] == inf);
  REQUIRE(std::isnan(b2[1]));
}

TEST_CASE("fp16 block-scaled: signed zeros, all-equal blocks and fp32 subnormals", "[compress]") {
  int8_t e = 0;
  const std::vector<float> zeros = {0.0f, -0.0f, 0.0f};
  const std::vector<float> bz = roundTrip(zeros, &e);
  REQUIRE(e == 0);
  REQUIRE((bz[0] == 0.0f && !std::signbit(bz[0])));
  REQUIRE((bz[1] == 0.0f && std::signbit(bz[1])));

  const std::vector<float> equal(kCompressGroup, 0.1f);
  const std::vector<float> be = roundTrip(equal, &e);
  for (float v : be) REQUIRE(v == be[0]);  // one value for one input
  REQUIRE(std::fabs(be[0] - 0.1) <= boundFor(equal));

  // fp32 subnormals: the block is scaled up (e clamped at -126) into fp16's normal range.
  const std::vector<float> tiny = {1e-40f, -3e-41f, 5e-39f};
  const std::vector<float> bt = roundTrip(tiny, &e);
  REQUIRE(e == -126);
  for (size_t i = 0; i < tiny.size(); ++i) REQUIRE(std::fabs(static_cast<double>(bt[i]) - tiny[i]) <= boundFor(tiny));
}

TEST_CASE("bf16 wire: round to nearest even within 2^-8 relative", "[compress]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> logMag(-30.0f, 30.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = normal(rng) * std::pow(10.0f, logMag(rng));
    const float back = bf16ToFloat(floatToBf16(x));
    REQUIRE(std::fabs(static_cast<double>(back) - x) <= std::ldexp(std::fabs(static_cast<double>(x)), -8));
  }
}

TEST_CASE("fp16 block-scaled: decoded values encode again to the same bits (a forwarded result)", "[compress]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-140, 127);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<float> x(1 + trial % kCompressGroup);
    for (float& v : x) v = normal(rng) * std::ldexp(1.0f, binade(rng) / 8);
    // Every third trial: the largest magnitude just below a power of two, so that it rounds
    // up to 2^15 once scaled.
    if (trial % 3 == 0) x[0] = std::ldexp(1.0f - 0x1p-13f, std::min(binade(rng), 127));
    std::vector<uint16_t> w(x.size()), w2(x.size());
    const int8_t e = encodeFp16Group(x.data(), x.size(), w.data());
    std::vector<float> back(x.size());
    decodeFp16Group(w.data(), w.size(), e, back.data());
    const int8_t e2 = encodeFp16Group(back.data(), back.size(), w2.data());
    INFO("trial " << trial << ", largest " << x[0] << ", e " << int(e) << " then " << int(e2));
    REQUIRE(e2 == e);
    REQUIRE(w2 == w);
  }
}

// Host encodings (kernels/host_compress.h) against the scalar functions of
// kernels/compress.h and float_conv.h, bit for bit: exponents, encoded words and decoded
// floats, NaN payloads and signalling NaN included, for every length of a block, at
// aligned and unaligned addresses. "[.bench]" (hidden) times both encodings on 64 MiB.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/compress.h"
#include "kernels/float_conv.h"
#include "kernels/host_compress.h"

using namespace coll;

namespace {

constexpr float kMax = std::numeric_limits<float>::max();

// Infinities, NaN (quiet and signalling, with payloads, both signs), zeros, extremes.
const std::vector<uint32_t> kSpecialBits = {
    0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7fc12345u, 0xffd54321u,
    0x7fffffffu, 0xffffffffu, 0x7f800001u, 0xff800001u, 0x7f812345u, 0xffa00000u, 0x7fbfffffu, 0x7f802000u,
    0x7f7fffffu, 0xff7fffffu, 0x00800000u, 0x80800000u, 0x00000001u, 0x807fffffu};

// A copy of v at `offset` elements into its buffer (offset 1: not 16-byte aligned).
template <typename T>
struct Placed {
  Placed(const std::vector<T>& v, size_t offset) : buf(v.size() + offset), p(buf.data() + offset) {
    if (!v.empty()) std::memcpy(p, v.data(), v.size() * sizeof(T));
  }
  Placed(size_t n, size_t offset) : buf(n + offset, T{}), p(buf.data() + offset) {}
  std::vector<T> buf;
  T* p;
};

// The first i where a[i] and b[i] differ in bits, or n.
template <typename T>
size_t firstBitDifference(const T* a, const T* b, size_t n) {
  size_t i = 0;
  while (i < n && std::memcmp(a + i, b + i, sizeof(T)) == 0) ++i;
  return i;
}

// The fp16 block encoding of x, host against scalar: exponent, words, and both decodings.
void checkFp16Group(const std::vector<float>& x, size_t offset) {
  const size_t n = x.size();
  INFO("n " << n << ", offset " << offset);
  Placed<float> in(x, offset);
  Placed<uint16_t> wantWire(n, offset), gotWire(n, offset);
  const int8_t want = encodeFp16Group(in.p, n, wantWire.p);
  const int8_t got = hostEncodeFp16Group(in.p, n, gotWire.p);
  REQUIRE(int(got) == int(want));
  const size_t i = firstBitDifference(gotWire.p, wantWire.p, n);
  INFO("e " << int(want) << ", first difference at element " << i << ", bits " << std::hex
            << (i < n ? floatBits(x[i]) : 0u));
  REQUIRE(i == n);
  Placed<float> wantBack(n, offset), gotBack(n, offset);
  decodeFp16Group(wantWire.p, n, want, wantBack.p);
  hostDecodeFp16Group(wantWire.p, n, want, gotBack.p);
  REQUIRE(firstBitDifference(gotBack.p, wantBack.p, n) == n);
}

void checkFp16Groups(const std::function<float()>& gen, int blocks) {
  for (int b = 0; b < blocks; ++b) {
    std::vector<float> x(kCompressGroup);
    for (float& v : x) v = gen();
    checkFp16Group(x, static_cast<size_t>(b % 2));
  }
}

// Random bits whose exponent field lies in [lo, hi].
uint32_t bitsWithExponent(std::mt19937& rng, uint32_t lo, uint32_t hi) {
  const uint32_t exp = std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  return (rng() & 0x807fffffu) | exp << 23;
}

float special(std::mt19937& rng) { return bitsFloat(kSpecialBits[rng() % kSpecialBits.size()]); }

void checkBf16Encode(const std::vector<uint32_t>& bits, size_t offset) {
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) x[i] = bitsFloat(bits[i]);
  Placed<float> in(x, offset);
  Placed<uint16_t> got(x.size(), offset);
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = floatToBf16(x[i]);
  hostEncodeBf16(in.p, x.size(), got.p);
  const size_t i = firstBitDifference(got.p, want.data(), x.size());
  INFO("n " << x.size() << ", offset " << offset << ", first difference at bits " << std::hex
            << (i < bits.size() ? bits[i] : 0u));
  REQUIRE(i == x.size());
}

}  // namespace

TEST_CASE("host compress: the variant this CPU uses", "[compress]") {
  const std::string variant = hostCompressVariant();
  WARN("host compress variant: " << variant);
#if defined(__x86_64__)
  const bool vector = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  REQUIRE(variant == (vector ? "avx2+f16c" : "portable"));
#else
  REQUIRE(variant == "portable");
#endif
}

TEST_CASE("host fp16 block: bit-identical to the scalar encoding for every length, aligned or not", "[compress]") {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t n = 0; n <= kCompressGroup; ++n)
    for (size_t offset = 0; offset < 2; ++offset) {
      std::vector<float> x(n);
      for (float& v : x) v = rng() % 16 == 0 ? special(rng) : normal(rng) * 100.0f;
      checkFp16Group(x, offset);
    }
}

TEST_CASE("host fp16 block: bit-identical over normals, mixed magnitudes and rounding ties", "[compress]") {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> logMag(-30.0f, 30.0f);
  checkFp16Groups([&] { return normal(rng); }, 200);
  checkFp16Groups([&] { return normal(rng) * std::pow(10.0f, logMag(rng)); }, 200);
  // Every finite exponent, and ties: the 13 bits fp16 drops at or next to one half.
  for (uint32_t lo = 0; lo < 254; lo += 3) {
    checkFp16Groups([&] { return bitsFloat(bitsWithExponent(rng, lo, std::min(lo + 30, 254u))); }, 2);
    const uint32_t low[] = {0x1000u, 0x0fffu, 0x1001u, 0x0000u, 0x3000u};
    checkFp16Groups([&] { return bitsFloat((bitsWithExponent(rng, lo, lo + 1) & ~0x1fffu) | low[rng() % 5]); }, 2);
  }
}

TEST_CASE("host fp16 block: bit-identical near FLT_MAX (e > 110), both signs", "[compress]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(0.5f, 1.0f);
  // Largest magnitudes in each binade from 2^120 up: e from 106 to 113, across the scalar step.
  for (uint32_t top = 247; top <= 254; ++top) {
    checkFp16Groups([&] { return bitsFloat(bitsWithExponent(rng, top - 12, top)); }, 8);
    checkFp16Groups([&] { return bitsFloat(bitsWithExponent(rng, top, top) | 0x007ff000u); }, 4);  // round up
  }
  checkFp16Groups([&] { return (rng() % 2 ? kMax : -kMax) * unit(rng); }, 20);
  checkFp16Groups([&] { return rng() % 4 ? (rng() % 2 ? kMax : -kMax) : special(rng); }, 20);
  std::vector<float> mixed = {kMax, -kMax, std::nextafter(kMax, 0.0f), 3.0e38f, 1.0f, -2.5e37f, 1e-30f};
  for (size_t offset = 0; offset < 2; ++offset) checkFp16Group(mixed, offset);
}

TEST_CASE("host fp16 block: bit-identical over subnormals, signed zeros, infinities and NaN", "[compress]") {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  checkFp16Groups([&] { return bitsFloat(bitsWithExponent(rng, 0, 0)); }, 20);  // fp32 subnormals
  checkFp16Groups([&] { return bitsFloat(bitsWithExponent(rng, 0, rng() % 2 ? 1 : 140)); }, 20);
  checkFp16Groups([] { return 0.0f; }, 2);
  checkFp16Groups([] { return -0.0f; }, 2);
  checkFp16Groups([&] { return rng() % 2 ? 0.0f : -0.0f; }, 2);
  checkFp16Groups([&] { return special(rng); }, 40);
  checkFp16Groups([&] { return bitsFloat(bitsWithExponent(rng, 255, 255)); }, 20);  // only infinity and NaN
  checkFp16Groups([&] { return rng() % 8 ? normal(rng) : special(rng); }, 40);
  checkFp16Groups([&] { return bitsFloat(static_cast<uint32_t>(rng())); }, 200);  // any bits at all
}

TEST_CASE("host fp16 block: decoding is bit-identical for every word and every exponent", "[compress]") {
  std::vector<uint16_t> words(65536);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint16_t>(i);
  Placed<uint16_t> in(words, 1);
  Placed<float> want(words.size(), 1), got(words.size(), 1);
  for (int e = -128; e <= 127; ++e) {
    for (size_t at = 0; at < words.size(); at += kCompressGroup - 1) {
      const size_t n = std::min(kCompressGroup - 1, words.size() - at);  // 255: a tail every time
      decodeFp16Group(in.p + at, n, static_cast<int8_t>(e), want.p + at);
      hostDecodeFp16Group(in.p + at, n, static_cast<int8_t>(e), got.p + at);
    }
    const size_t i = firstBitDifference(got.p, want.p, words.size());
    INFO("word " << std::hex << i << ", e " << std::dec << e);
    REQUIRE(i == words.size());
  }
}

TEST_CASE("host bf16: encoding bit-identical over a sweep of all float bits, ties and NaN", "[compress]") {
  std::vector<uint32_t> bits;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 1021) bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t high = 0; high <= 0xffffu; ++high)
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) bits.push_back(high << 16 | low);
  for (uint32_t b : kSpecialBits) bits.push_back(b);
  checkBf16Encode(bits, 0);
  checkBf16Encode(bits, 1);
  for (size_t n = 0; n <= 64; ++n) {
    const std::vector<uint32_t> head(bits.begin() + 65536, bits.begin() + 65536 + static_cast<ptrdiff_t>(n));
    checkBf16Encode(head, n % 2);
  }
}

TEST_CASE("host bf16: decoding bit-identical for every word", "[compress]") {
  std::vector<uint16_t> words(65536 + 13);
  for (size_t i = 0; i < words.size(); ++i) words[i] = static_cast<uint16_t>(i);
  for (size_t offset = 0; offset < 2; ++offset) {
    Placed<uint16_t> in(words, offset);
    Placed<float> got(words.size(), offset);
    std::vector<float> want(words.size());
    for (size_t i = 0; i < words.size(); ++i) want[i] = bf16ToFloat(words[i]);
    hostDecodeBf16(in.p, words.size(), got.p);
    const size_t i = firstBitDifference(got.p, want.data(), words.size());
    INFO("offset " << offset << ", word " << std::hex << i);
    REQUIRE(i == words.size());
  }
}

namespace {

// Best of `reps` runs of f, in seconds.
double bestSeconds(int reps, const std::function<void()>& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

using EncodeGroup = int8_t (*)(const float*, size_t, uint16_t*);
using DecodeGroup = void (*)(const uint16_t*, size_t, int8_t, float*);
using Encode = void (*)(const float*, size_t, uint16_t*);
using Decode = void (*)(const uint16_t*, size_t, float*);

void scalarEncodeBf16(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = floatToBf16(x[i]);
}
void scalarDecodeBf16(const uint16_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = bf16ToFloat(in[i]);
}

struct BenchBuffers {
  explicit BenchBuffers(size_t n) : x(n), back(n), encoded(n), exps(n / kCompressGroup) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& v : x) v = normal(rng);
  }
  std::vector<float> x, back;
  std::vector<uint16_t> encoded;
  std::vector<int8_t> exps;
};

void report(const char* what, size_t bytes, double encode, double decode) {
  std::printf("%-26s encode %6.2f GB/s  decode %6.2f GB/s  encode+decode %6.2f GB/s (of fp32 input)\n", what,
              bytes / encode * 1e-9, bytes / decode * 1e-9, bytes / (encode + decode) * 1e-9);
}

void benchFp16(const char* what, BenchBuffers& b, EncodeGroup encode, DecodeGroup decode) {
  const size_t blocks = b.exps.size();
  const double enc = bestSeconds(5, [&] {
    for (size_t k = 0; k < blocks; ++k)
      b.exps[k] = encode(&b.x[k * kCompressGroup], kCompressGroup, &b.encoded[k * kCompressGroup]);
  });
  const double dec = bestSeconds(5, [&] {
    for (size_t k = 0; k < blocks; ++k)
      decode(&b.encoded[k * kCompressGroup], kCompressGroup, b.exps[k], &b.back[k * kCompressGroup]);
  });
  report(what, b.x.size() * sizeof(float), enc, dec);
}

void benchBf16(const char* what, BenchBuffers& b, Encode encode, Decode decode) {
  const double enc = bestSeconds(5, [&] { encode(b.x.data(), b.x.size(), b.encoded.data()); });
  const double dec = bestSeconds(5, [&] { decode(b.encoded.data(), b.x.size(), b.back.data()); });
  report(what, b.x.size() * sizeof(float), enc, dec);
}

// One block in cache, the size a hop handles at a time.
void benchOneGroup(BenchBuffers& b) {
  const int iters = 1000000;
  const double enc = bestSeconds(3, [&] {
    for (int i = 0; i < iters; ++i) b.exps[0] = hostEncodeFp16Group(b.x.data(), kCompressGroup, b.encoded.data());
  });
  const double dec = bestSeconds(3, [&] {
    for (int i = 0; i < iters; ++i) hostDecodeFp16Group(b.encoded.data(), kCompressGroup, b.exps[0], b.back.data());
  });
  std::printf("one fp16 block of %zu in cache: encode %.1f ns, decode %.1f ns\n", kCompressGroup, enc / iters * 1e9,
              dec / iters * 1e9);
}

}  // namespace

TEST_CASE("host compress benchmark: 64 MiB of floats, fp16 blocks and bf16", "[.bench]") {
  BenchBuffers b((64u << 20) / sizeof(float));
  std::printf("host compress variant: %s\n", hostCompressVariant());
  benchFp16("fp16 block-scaled, host", b, hostEncodeFp16Group, hostDecodeFp16Group);
  benchFp16("fp16 block-scaled, scalar", b, encodeFp16Group, decodeFp16Group);
  benchBf16("bf16, host", b, hostEncodeBf16, hostDecodeBf16);
  benchBf16("bf16, scalar", b, scalarEncodeBf16, scalarDecodeBf16);
  benchOneGroup(b);
  SUCCEED();
}

namespace {

// One hop done step by step with the scalar functions: decode, add (times 1/n), encode.
int8_t scalarHop(uint8_t encoding, const std::vector<uint16_t>& in, int8_t ein, const std::vector<float>& src, bool avg,
                 int n, std::vector<uint16_t>* out) {
  std::vector<float> v(src.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float d = encoding == kEncodingFp16 ? decodeFp16Scaled(in[i], ein) : bf16ToFloat(in[i]);
    v[i] = avg ? (d + src[i]) * (1.0f / static_cast<float>(n)) : d + src[i];
  }
  out->resize(v.size());
  if (encoding == kEncodingFp16) return encodeFp16Group(v.data(), v.size(), out->data());
  for (size_t i = 0; i < v.size(); ++i) (*out)[i] = floatToBf16(v[i]);
  return 0;
}

}  // namespace

TEST_CASE("host fused hop (decode, add, encode) gives the step-by-step bits, fp16 and bf16", "[compress]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-60, 60), special(0, 40);
  const float inf = std::numeric_limits<float>::infinity();
  for (int trial = 0; trial < 600; ++trial) {
    const size_t k = 1 + static_cast<size_t>(trial) % kCompressGroup;
    const uint8_t encoding = trial % 2 ? kEncodingFp16 : kEncodingBf16;
    const bool avg = trial % 3 == 0;
    std::vector<float> a(k), src(k);
    const int scale = trial % 7 == 0 ? 120 : exp(rng);  // some blocks in fp32's top binade
    for (size_t i = 0; i < k; ++i) {
      a[i] = std::ldexp(normal(rng), scale);
      src[i] = std::ldexp(normal(rng), scale);
      const int s = special(rng);
      if (s == 0) a[i] = inf;
      if (s == 1) src[i] = -inf;
      if (s == 2) src[i] = std::numeric_limits<float>::quiet_NaN();
    }
    std::vector<uint16_t> in(k), want, got(k);
    int8_t ein = 0;
    if (encoding == kEncodingFp16) ein = encodeFp16Group(a.data(), k, in.data());
    else
      for (size_t i = 0; i < k; ++i) in[i] = floatToBf16(a[i]);
    const int8_t e = scalarHop(encoding, in, ein, src, avg, 3, &want);
    std::vector<float> dst(k);
    const int8_t e2 = encoding == kEncodingFp16
                          ? hostSumEncodeFp16Group(in.data(), ein, src.data(), k, avg, 3, got.data(), dst.data())
                          : (hostSumEncodeBf16(in.data(), src.data(), k, avg, 3, got.data(), dst.data()), int8_t{0});
    INFO("trial " << trial << ", " << k << " elements, encoding " << int(encoding) << (avg ? ", avg" : ""));
    REQUIRE(e2 == e);
    REQUIRE(got == want);
    for (size_t i = 0; i < k; ++i) {
      const float back = encoding == kEncodingFp16 ? decodeFp16Scaled(want[i], e) : bf16ToFloat(want[i]);
      REQUIRE(std::memcmp(&dst[i], &back, 4) == 0);
    }
  }
}

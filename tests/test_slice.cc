// The device executor's slice primitives (kernels/slice.h) at every relative alignment of
// their buffers: the 16-byte packs, the head taken to reach them, the widest common unit
// where the buffers never meet on 16 bytes, and the tails. The block's threads run one
// after another, forwards and backwards: a result that depends on their order (an index
// two threads touch) fails.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/slice.h"

namespace {

using coll::slice::copy;
using coll::slice::reduce;

// Offsets from 16 bytes tried for each buffer; -1: the buffer is absent.
const std::vector<int> kOffsets = {0, 1, 2, 3, 4, 6, 8, 12, 15};

// Runs fn(tid) for the nt threads of a block, in order or in reverse.
template <typename F>
void block(unsigned nt, bool reverse, F&& fn) {
  for (unsigned k = 0; k < nt; ++k) fn(reverse ? nt - 1 - k : k);
}

// 16-aligned storage with room for an offset and a guard after the data.
struct Buf {
  explicit Buf(size_t bytes) : raw(bytes + 64) {}
  unsigned char* at(int off) {
    const auto a = reinterpret_cast<uintptr_t>(raw.data());
    return raw.data() + (((a + 15) & ~uintptr_t{15}) - a) + off;
  }
  std::vector<unsigned char> raw;
};

bool untouchedOutside(Buf& b, int off, size_t len) {
  const unsigned char* s = b.at(off);
  for (size_t i = 0; i < b.raw.size(); ++i) {
    const unsigned char* p = b.raw.data() + i;
    if ((p < s || p >= s + len) && *p != 0xEE) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("slice copies are exact at every relative alignment of input, destination and output", "[kernels][slice]") {
  std::mt19937 rng(3);
  const size_t maxLen = 1000;
  Buf in(maxLen), dst(maxLen), out(maxLen);
  for (auto& v : in.raw) v = static_cast<unsigned char>(rng());
  for (int oi : kOffsets)
    for (int od : std::vector<int>{-1, 0, 1, 4, 8, 12})
      for (int oo : std::vector<int>{-1, 0, 3, 4, 8})
        for (size_t len : {size_t{0}, size_t{1}, size_t{13}, size_t{64}, size_t{333}, maxLen})
          for (unsigned nt : {1u, 7u, 32u})
            for (bool reverse : {false, true}) {
              if (od < 0 && oo < 0) continue;
              std::fill(dst.raw.begin(), dst.raw.end(), 0xEE);
              std::fill(out.raw.begin(), out.raw.end(), 0xEE);
              char* d = od < 0 ? nullptr : reinterpret_cast<char*>(dst.at(od));
              char* o = oo < 0 ? nullptr : reinterpret_cast<char*>(out.at(oo));
              const char* s = reinterpret_cast<const char*>(in.at(oi));
              block(nt, reverse, [&](unsigned tid) { copy(tid, nt, s, d, o, len); });
              INFO("offsets in " << oi << " dst " << od << " out " << oo << ", " << len << " bytes, " << nt
                                 << " threads" << (reverse ? " in reverse" : ""));
              if (d) REQUIRE(std::memcmp(d, s, len) == 0);
              if (o) REQUIRE(std::memcmp(o, s, len) == 0);
              if (d) REQUIRE(untouchedOutside(dst, od, len));
              if (o) REQUIRE(untouchedOutside(out, oo, len));
            }
}

namespace {

// a + b over n elements of T at offsets (multiples of sizeof(T)) oa, ob, od, oo; od == -2:
// in place into b, which then doubles every element two threads would both take.
template <typename T>
void checkReduce(int oa, int ob, int od, int oo, size_t n, unsigned nt, bool reverse) {
  Buf a(n * sizeof(T)), b(n * sizeof(T)), dst(n * sizeof(T)), out(n * sizeof(T));
  std::fill(dst.raw.begin(), dst.raw.end(), 0xEE);
  std::fill(out.raw.begin(), out.raw.end(), 0xEE);
  T* pa = reinterpret_cast<T*>(a.at(oa));
  T* pb = reinterpret_cast<T*>(b.at(ob));
  for (size_t i = 0; i < n; ++i) {
    pa[i] = static_cast<T>(i % 50 + 1);
    pb[i] = static_cast<T>(i % 7 + 60);
  }
  T* pd = od == -2 ? pb : od < 0 ? nullptr : reinterpret_cast<T*>(dst.at(od));
  T* po = oo < 0 ? nullptr : reinterpret_cast<T*>(out.at(oo));
  block(nt, reverse, [&](unsigned tid) { reduce<T, coll::OpSum, false>(tid, nt, pa, pb, pd, po, n, /*nranks=*/2); });
  INFO(sizeof(T) << "-byte elements at offsets a " << oa << " b " << ob << " dst " << od << " out " << oo << ", " << n
                 << " elements, " << nt << " threads" << (reverse ? " in reverse" : ""));
  for (size_t i = 0; i < n; ++i) {
    const T want = static_cast<T>(i % 50 + 1 + i % 7 + 60);
    if (pd) REQUIRE(pd[i] == want);
    if (po) REQUIRE(po[i] == want);
  }
  if (od >= 0) REQUIRE(untouchedOutside(dst, od, n * sizeof(T)));
  if (oo >= 0) REQUIRE(untouchedOutside(out, oo, n * sizeof(T)));
}

template <typename T>
void reduceSweep() {
  std::vector<int> offs;
  for (int o : kOffsets)
    if (o % static_cast<int>(sizeof(T)) == 0) offs.push_back(o);
  for (int oa : offs)
    for (int ob : offs)
      for (int od : {-2, -1, offs[1 % offs.size()], offs.back()})
        for (int oo : {-1, 0})
          for (size_t n : {size_t{1}, size_t{5}, size_t{77}, size_t{300}})
            for (unsigned nt : {1u, 5u, 32u})
              for (bool reverse : {false, true})
                if (od != -1 || oo != -1) checkReduce<T>(oa, ob, od, oo, n, nt, reverse);
}

}  // namespace

TEST_CASE("slice reductions are exact at every relative alignment, in place too", "[kernels][slice]") {
  reduceSweep<uint8_t>();
  reduceSweep<uint16_t>();
  reduceSweep<float>();
  reduceSweep<double>();
}

namespace {

// reduceAll over m inputs equals the chain of two-input reductions it replaces, bit for bit
// (fp16 rounds after every op), in place or not, aligned or not.
template <typename T, typename Op, bool kAvg>
void checkAllEqualsChain(int m, size_t n, int offElems, bool inPlace, unsigned nt) {
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n));
  std::uniform_real_distribution<float> val(-4.0f, 4.0f);
  std::vector<Buf> bufs, outs;
  for (int j = 0; j < m; ++j) {
    bufs.emplace_back(n * sizeof(T) + 16);
    outs.emplace_back(n * sizeof(T) + 16);
  }
  auto inPtr = [&](int j) { return reinterpret_cast<T*>(bufs[j].at(0)) + offElems; };
  for (int j = 0; j < m; ++j)
    for (size_t i = 0; i < n; ++i) inPtr(j)[i] = coll::Elem<T>::store(val(rng));
  // The chain: acc = in(0) op in(1), then acc op in(j), Avg's division at the last.
  std::vector<T> acc(n);
  for (int j = 1; j < m; ++j) {
    const T* a = j == 1 ? inPtr(0) : acc.data();
    if (j == m - 1) reduce<T, Op, kAvg>(0, 1, a, inPtr(j), acc.data(), nullptr, n, m);
    else reduce<T, Op, false>(0, 1, a, inPtr(j), acc.data(), nullptr, n, m);
  }
  auto in = [&](int j) { return const_cast<const T*>(inPtr(j)); };
  auto out = [&](int j) { return inPlace ? inPtr(j) : reinterpret_cast<T*>(outs[j].at(0)) + offElems; };
  block(nt, true, [&](unsigned tid) { coll::slice::reduceAll<T, Op, kAvg>(tid, nt, in, m, out, m, n, m); });
  INFO(m << " inputs of " << n << " " << sizeof(T) << "-byte elements, " << offElems << " off 16 bytes"
         << (inPlace ? ", in place" : "") << ", " << nt << " threads");
  for (int j = 0; j < m; ++j) REQUIRE(std::memcmp(out(j), acc.data(), n * sizeof(T)) == 0);
}

}  // namespace

TEST_CASE("a direct reduction's one pass over every input equals the chain of two-input slices bit for bit",
          "[kernels][slice]") {
  for (int m = 2; m <= 8; ++m)
    for (size_t n : {size_t{1}, size_t{9}, size_t{200}})
      for (bool inPlace : {false, true})
        for (unsigned nt : {1u, 5u})
          for (int off : {0, 1}) {  // packs, or elements
            checkAllEqualsChain<coll::Half, coll::OpSum, false>(m, n, off, inPlace, nt);
            checkAllEqualsChain<coll::Half, coll::OpSum, true>(m, n, off, inPlace, nt);
            checkAllEqualsChain<float, coll::OpProd, false>(m, n, off, inPlace, nt);
            checkAllEqualsChain<float, coll::OpSum, true>(m, n, off, inPlace, nt);
            checkAllEqualsChain<double, coll::OpMax, false>(m, n, off, inPlace, nt);
          }
}

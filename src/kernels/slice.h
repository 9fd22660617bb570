// Copy and reduction of one slice of bytes, split over the threads of a block: thread
// `tid` of `nt` handles packs and tail elements tid, tid + nt, ... No thread reads what
// another writes within a slice (every element is read and written at one index), so
// running the threads in sequence (the host emulation, device/device_slice.h) gives what
// running them together does (the executor kernel; deviceReduce).
// Elements are combined with the host's Elem/Op code (reduce_ops.h): results equal the
// host executor's bit for bit.
#pragma once

#include <cstdint>

#include "collectives/collectives.h"
#include "kernels/reduce_ops.h"
#include "kernels/step_flags.h"

namespace coll {
namespace slice {

// Out of line in the kernel: the unaligned paths, which every type and op reaches (copy()
// from each of the 60 typed slices). Inlined there, they took the kernel's compile from
// ~1.5 to ~4 minutes per architecture.
#if defined(__CUDACC__)
#define COLL_SLICE_OUTLINE __noinline__
#else
#define COLL_SLICE_OUTLINE
#endif

// 16 bytes moved by one load and one store (ld/st.v4 on the GPU).
struct alignas(16) Bytes16 {
  uint32_t w[4];
};

// Packs a thread loads before it stores any. A block of 512 threads with one 16-byte load
// in flight each keeps 8 KiB moving per ~600 ns of memory latency, ~14 GB/s; a lane is
// one block, so the loads must overlap: kUnroll packs per thread in flight.
constexpr int kUnroll = 4;
// Reductions load two inputs per pack and convert narrow floats element by element: two
// packs of each input in flight keep them in registers (four spill in fp8 and quadruple
// the kernel's compile time).
constexpr int kReduceUnroll = 2;

COLL_HD inline uintptr_t addrOf(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The largest power of two up to 16 that divides every address given (null ones aside):
// the widest unit in which all of them can be read and written.
COLL_HD inline unsigned commonAlign(const void* a, const void* b, const void* c, const void* d) {
  const uintptr_t bits = 16 | addrOf(a) | addrOf(b) | addrOf(c) | addrOf(d);
  return static_cast<unsigned>(bits & (~bits + 1));
}

// Bytes before every address given (null ones aside) is on 16 bytes, when they all sit at
// one offset from it; else 0 (they never meet, and the widest common unit is the best).
COLL_HD inline unsigned headTo16(const void* a, const void* b, const void* c, const void* d) {
  const uintptr_t off = addrOf(a) & 15;
  const auto apart = [off](const void* p) { return p && (addrOf(p) & 15) != off; };
  if (apart(b) || apart(c) || apart(d)) return 0;
  return static_cast<unsigned>((16 - off) & 15);
}

// Moves the non-null p past `by` elements.
template <typename P>
COLL_HD inline void advance(P*& p, uint64_t by) {
  if (p) p += by;
}

// dst and/or out = in, n units W: kUnroll units in flight per thread, units
// i, i + nt, ..., i + (kUnroll - 1) nt, so each step of u is contiguous over threads.
template <typename W>
COLL_HD inline void copyUnits(unsigned tid, unsigned nt, const W* in, W* dst, W* out, uint64_t n) {
  uint64_t i = tid;
  for (; i + (kUnroll - 1) * uint64_t{nt} < n; i += kUnroll * uint64_t{nt}) {
    W v[kUnroll];
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int u = 0; u < kUnroll; ++u) v[u] = in[i + u * nt];
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int u = 0; u < kUnroll; ++u) {
      if (dst) dst[i + u * nt] = v[u];
      if (out) out[i + u * nt] = v[u];
    }
  }
  for (; i < n; i += nt) {
    const W v = in[i];
    if (dst) dst[i] = v;
    if (out) out[i] = v;
  }
}

// Bytes [from, to) of in to dst and/or out, one per thread.
COLL_HD inline void copyBytes(unsigned tid, unsigned nt, const char* in, char* dst, char* out, uint64_t from,
                              uint64_t to) {
  for (uint64_t i = from + tid; i < to; i += nt) {
    if (dst) dst[i] = in[i];
    if (out) out[i] = in[i];
  }
}

template <typename W>
COLL_HD inline uint64_t copyAs(unsigned tid, unsigned nt, const char* in, char* dst, char* out, uint64_t len) {
  copyUnits(tid, nt, reinterpret_cast<const W*>(in), reinterpret_cast<W*>(dst), reinterpret_cast<W*>(out),
            len / sizeof(W));
  return len / sizeof(W) * sizeof(W);
}

// dst and/or out = in (len bytes). Pointers at one offset from 16 bytes take their head
// byte by byte and the rest in 16-byte packs; pointers at different offsets move in the
// widest unit they share (8, 4 or 2 bytes; an odd-count reduce-scatter of floats: 4).
COLL_HD COLL_SLICE_OUTLINE inline void copy(unsigned tid, unsigned nt, const char* in, char* dst, char* out,
                                            uint64_t len) {
  uint64_t head = headTo16(in, dst, out, nullptr);
  if (head > len) head = len;
  copyBytes(tid, nt, in, dst, out, 0, head);
  in += head;
  advance(dst, head);
  advance(out, head);
  len -= head;
  uint64_t done = 0;
  switch (commonAlign(in, dst, out, nullptr)) {
    case 16: done = copyAs<Bytes16>(tid, nt, in, dst, out, len); break;
    case 8: done = copyAs<uint64_t>(tid, nt, in, dst, out, len); break;
    case 4: done = copyAs<uint32_t>(tid, nt, in, dst, out, len); break;
    case 2: done = copyAs<uint16_t>(tid, nt, in, dst, out, len); break;
    default: done = copyAs<uint8_t>(tid, nt, in, dst, out, len); break;
  }
  copyBytes(tid, nt, in, dst, out, done, len);
}

template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  T e[kN];
};

// reduceAll reads one input at a time: up to four packs of it in flight, and at most 16
// elements per unrolled body (4 packs of 4-byte types; 2 of fp16 and bf16; 1 of fp8, whose
// conversions are long: 4 packs of them took ptxas minutes and 15 GB).
template <typename T>
constexpr int kAllUnroll = Pack<T>::kN >= 16  ? 1
                           : Pack<T>::kN >= 8 ? 2
                                              : 4;

// Element i of the result: op(a, b) (b absent: a alone), with Avg's division when kAvg.
template <typename T, typename Op, bool kAvg>
COLL_HD inline T combine(const T* a, const T* b, uint64_t i, int nranks) {
  auto r = Elem<T>::load(a[i]);
  if (b) r = Op::apply(r, Elem<T>::load(b[i]));
  if constexpr (kAvg) r = avgOf<T>(r, nranks);
  return Elem<T>::store(r);
}

// Elements [from, to) of the result, one per thread.
template <typename T, typename Op, bool kAvg>
COLL_HD inline void reduceEach(unsigned tid, unsigned nt, const T* a, const T* b, T* dst, T* out, uint64_t from,
                               uint64_t to, int nranks) {
  for (uint64_t i = from + tid; i < to; i += nt) {
    const T r = combine<T, Op, kAvg>(a, b, i, nranks);
    if (dst) dst[i] = r;
    if (out) out[i] = r;
  }
}

// x[u] and y[u] = a and b at i + u * nt for u < kU, all loads issued before any use (b
// may be null: y is left alone).
template <int kU, typename E>
COLL_HD inline void loadStrided(const E* a, const E* b, uint64_t i, unsigned nt, E (&x)[kU], E (&y)[kU]) {
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int u = 0; u < kU; ++u) {
    x[u] = a[i + u * nt];
    if (b) y[u] = b[i + u * nt];
  }
}

// dst and/or out = op(a, b) over the n elements from 16-byte-aligned pointers: packs,
// kReduceUnroll of each input in flight per thread; returns the elements done (the rest
// are under a pack).
template <typename T, typename Op, bool kAvg>
COLL_HD inline uint64_t reducePacks(unsigned tid, unsigned nt, const T* a, const T* b, T* dst, T* out, uint64_t n,
                                    int nranks) {
  const uint64_t np = n / Pack<T>::kN;
  const auto* pa = reinterpret_cast<const Pack<T>*>(a);
  const auto* pb = reinterpret_cast<const Pack<T>*>(b);
  auto* pd = reinterpret_cast<Pack<T>*>(dst);
  auto* po = reinterpret_cast<Pack<T>*>(out);
  auto one = [&](const Pack<T>& x, const Pack<T>& y, uint64_t i) {
    Pack<T> r;
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int k = 0; k < Pack<T>::kN; ++k) r.e[k] = combine<T, Op, kAvg>(x.e, pb ? y.e : nullptr, k, nranks);
    if (pd) pd[i] = r;
    if (po) po[i] = r;
  };
  uint64_t i = tid;
  for (; i + (kReduceUnroll - 1) * uint64_t{nt} < np; i += kReduceUnroll * uint64_t{nt}) {  // as in copyUnits
    Pack<T> x[kReduceUnroll], y[kReduceUnroll];
    loadStrided(pa, pb, i, nt, x, y);
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int u = 0; u < kReduceUnroll; ++u) one(x[u], y[u], i + u * nt);
  }
  for (; i < np; i += nt) {
    Pack<T> y{};
    if (pb) y = pb[i];
    one(pa[i], y, i);
  }
  return np * Pack<T>::kN;
}

// Elements of pointers that share no 16-byte offset, each loaded as itself (4-byte loads
// for floats): 4 of each input in flight per thread.
template <typename T, typename Op, bool kAvg>
COLL_HD COLL_SLICE_OUTLINE inline void reduceElems(unsigned tid, unsigned nt, const T* a, const T* b, T* dst, T* out,
                                                   uint64_t n, int nranks) {
  constexpr int kU = 4;
  uint64_t i = tid;
  for (; i + (kU - 1) * uint64_t{nt} < n; i += kU * uint64_t{nt}) {
    T x[kU], y[kU]{};
    loadStrided(a, b, i, nt, x, y);
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int u = 0; u < kU; ++u) {
      const T r = combine<T, Op, kAvg>(x, b ? y : nullptr, u, nranks);
      if (dst) dst[i + u * nt] = r;
      if (out) out[i + u * nt] = r;
    }
  }
  reduceEach<T, Op, kAvg>(0, nt, a, b, dst, out, i, n, nranks);  // this thread's last ones
}

// dst and/or out = op(a, b) over n elements (b may be null: a scaled by Avg). Pointers at
// one offset from 16 bytes take their head element by element and the rest in packs.
template <typename T, typename Op, bool kAvg>
COLL_HD inline void reduce(unsigned tid, unsigned nt, const T* a, const T* b, T* dst, T* out, uint64_t n, int nranks) {
  uint64_t head = headTo16(a, b, dst, out) / sizeof(T);
  if (head > n) head = n;
  reduceEach<T, Op, kAvg>(tid, nt, a, b, dst, out, 0, head, nranks);
  a += head;
  advance(b, head);
  advance(dst, head);
  advance(out, head);
  n -= head;
  if (commonAlign(a, b, dst, out) < 16) return reduceElems<T, Op, kAvg>(tid, nt, a, b, dst, out, n, nranks);
  const uint64_t done = reducePacks<T, Op, kAvg>(tid, nt, a, b, dst, out, n, nranks);
  reduceEach<T, Op, kAvg>(tid, nt, a, b, dst, out, done, n, nranks);
}

// ---- One pass over many inputs (a direct allreduce's block) ------------------------------

// acc = acc op x, element by element, with Avg's division when kAvg.
template <typename T, typename Op, bool kAvg>
COLL_HD inline void combineInto(Pack<T>& acc, const Pack<T>& x, int nranks) {
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int k = 0; k < Pack<T>::kN; ++k) acc.e[k] = combine<T, Op, kAvg>(acc.e, x.e, k, nranks);
}

// Packs i, i + nt, ..., i + (kU - 1) nt of reduceAll: kU packs of an input in flight
// per thread.
template <int kU, typename T, typename Op, bool kAvg, typename In, typename Out>
COLL_HD inline void reduceAllAt(uint64_t i, unsigned nt, In in, int m, Out out, int nout, int nranks) {
  auto at = [i, nt](const T* p, int u) { return reinterpret_cast<const Pack<T>*>(p)[i + u * uint64_t{nt}]; };
  Pack<T> acc[kU], x[kU];
  for (int u = 0; u < kU; ++u) acc[u] = at(in(0), u);
  for (int j = 1; j < m - 1; ++j) {
    for (int u = 0; u < kU; ++u) x[u] = at(in(j), u);
    for (int u = 0; u < kU; ++u) combineInto<T, Op, false>(acc[u], x[u], nranks);
  }
  for (int u = 0; u < kU; ++u) x[u] = at(in(m - 1), u);
  for (int u = 0; u < kU; ++u) combineInto<T, Op, kAvg>(acc[u], x[u], nranks);
  for (int o = 0; o < nout; ++o)
    for (int u = 0; u < kU; ++u) reinterpret_cast<Pack<T>*>(out(o))[i + u * uint64_t{nt}] = acc[u];
}

// out(j)[i] = in(0)[i] op in(1)[i] op ... op in(m - 1)[i] for every j < nout: combined
// left to right, rounded to T after each op as a chain of two-input slices would be, and
// Avg's division after the last. So each input is read once and each output written once
// (a direct allreduce's block: 2n block sizes of memory traffic, where a chain of passes
// through an accumulator moves ~4n).
template <typename T, typename Op, bool kAvg, typename In, typename Out>
COLL_HD inline void reduceAll(unsigned tid, unsigned nt, In in, int m, Out out, int nout, uint64_t n, int nranks) {
  uintptr_t bits = 0;
  for (int j = 0; j < m; ++j) bits |= addrOf(in(j));
  for (int j = 0; j < nout; ++j) bits |= addrOf(out(j));
  uint64_t done = 0;
  if ((bits & 15) == 0) {
    const uint64_t np = n / Pack<T>::kN;
    uint64_t i = tid;
    for (; i + (kAllUnroll<T> - 1) * uint64_t{nt} < np; i += kAllUnroll<T> * uint64_t{nt})
      reduceAllAt<kAllUnroll<T>, T, Op, kAvg>(i, nt, in, m, out, nout, nranks);
    for (; i < np; i += nt) reduceAllAt<1, T, Op, kAvg>(i, nt, in, m, out, nout, nranks);
    done = np * Pack<T>::kN;
  }
  for (uint64_t i = done + tid; i < n; i += nt) {
    T r = in(0)[i];
    for (int j = 1; j < m; ++j)
      r = j == m - 1 ? combine<T, Op, kAvg>(&r, in(j) + i, 0, nranks) : combine<T, Op, false>(&r, in(j) + i, 0, nranks);
    for (int j = 0; j < nout; ++j) out(j)[i] = r;
  }
}

// The host executor's hostSlice (comm/executor.cc), case for case.
template <typename T, typename Op, bool kAvgFinal>
COLL_HD inline void typed(unsigned tid, unsigned nt, uint8_t flags, const char* in, const char* src, char* dst,
                          char* out, uint64_t len, int nranks) {
  const uint64_t n = len / sizeof(T);
  const bool final = flags & kFinal;
  if (in && src) {
    if (final && kAvgFinal)
      reduce<T, Op, true>(tid, nt, reinterpret_cast<const T*>(in), reinterpret_cast<const T*>(src),
                          reinterpret_cast<T*>(dst), reinterpret_cast<T*>(out), n, nranks);
    else
      reduce<T, Op, false>(tid, nt, reinterpret_cast<const T*>(in), reinterpret_cast<const T*>(src),
                           reinterpret_cast<T*>(dst), reinterpret_cast<T*>(out), n, nranks);
  } else if (in) {
    copy(tid, nt, in, dst, out, len);
  } else if (src) {
    if (dst && final && kAvgFinal) {
      // dst gets the scaled value, out the input as it is (as on the host).
      reduce<T, Op, true>(tid, nt, reinterpret_cast<const T*>(src), nullptr, reinterpret_cast<T*>(dst), nullptr, n,
                          nranks);
      if (out) copy(tid, nt, src, nullptr, out, len);
    } else {
      copy(tid, nt, src, dst != src ? dst : nullptr, out, len);
    }
  }
}

template <typename T>
COLL_HD inline void withOp(unsigned tid, unsigned nt, uint8_t redop, uint8_t flags, const char* in, const char* src,
                           char* dst, char* out, uint64_t len, int nranks) {
  withRedOp(redop, [&](auto op, auto avg) {
    typed<T, decltype(op), decltype(avg)::value>(tid, nt, flags, in, src, dst, out, len, nranks);
  });
}

}  // namespace slice

}  // namespace coll

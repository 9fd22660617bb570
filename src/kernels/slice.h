// Copy and reduction of one slice of bytes, split over the threads of a block: thread
// `tid` of `nt` handles packs and tail elements tid, tid + nt, ... No thread reads what
// another writes within a slice (every element is read and written at one index), so
// running the threads in sequence (the host emulation, device/dev_slice.h) gives what
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

COLL_HD inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

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

// dst and/or out = in (len bytes).
COLL_HD inline void copy(unsigned tid, unsigned nt, const char* in, char* dst, char* out, uint64_t len) {
  uint64_t done = 0;
  if (aligned16(in) && (!dst || aligned16(dst)) && (!out || aligned16(out))) {
    const uint64_t nv = len / 16;
    const auto* s = reinterpret_cast<const Bytes16*>(in);
    auto* d = reinterpret_cast<Bytes16*>(dst);
    auto* o = reinterpret_cast<Bytes16*>(out);
    uint64_t i = tid;
    // Packs i, i + nt, ..., i + (kUnroll - 1) nt: each step of u is contiguous over threads.
    for (; i + (kUnroll - 1) * uint64_t{nt} < nv; i += kUnroll * uint64_t{nt}) {
      Bytes16 v[kUnroll];
#if defined(__CUDACC__)
#pragma unroll
#endif
      for (int u = 0; u < kUnroll; ++u) v[u] = s[i + u * nt];
#if defined(__CUDACC__)
#pragma unroll
#endif
      for (int u = 0; u < kUnroll; ++u) {
        if (d) d[i + u * nt] = v[u];
        if (o) o[i + u * nt] = v[u];
      }
    }
    for (; i < nv; i += nt) {
      const Bytes16 v = s[i];
      if (d) d[i] = v;
      if (o) o[i] = v;
    }
    done = nv * 16;
  }
  for (uint64_t i = done + tid; i < len; i += nt) {
    const char v = in[i];
    if (dst) dst[i] = v;
    if (out) out[i] = v;
  }
}

template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / static_cast<int>(sizeof(T));
  T e[kN];
};

// Element i of the result: op(a, b) (b absent: a alone), with Avg's division when kAvg.
template <typename T, typename Op, bool kAvg>
COLL_HD inline T combine(const T* a, const T* b, uint64_t i, int nranks) {
  auto r = Elem<T>::load(a[i]);
  if (b) r = Op::apply(r, Elem<T>::load(b[i]));
  if constexpr (kAvg) r = avgOf<T>(r, nranks);
  return Elem<T>::store(r);
}

// dst and/or out = op(a, b) over n elements (b may be null: a scaled by Avg).
template <typename T, typename Op, bool kAvg>
COLL_HD inline void reduce(unsigned tid, unsigned nt, const T* a, const T* b, T* dst, T* out, uint64_t n, int nranks) {
  uint64_t done = 0;
  if (aligned16(a) && (!b || aligned16(b)) && (!dst || aligned16(dst)) && (!out || aligned16(out))) {
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
    for (; i + (kReduceUnroll - 1) * uint64_t{nt} < np; i += kReduceUnroll * uint64_t{nt}) {  // as in copy()
      Pack<T> x[kReduceUnroll], y[kReduceUnroll];
#if defined(__CUDACC__)
#pragma unroll
#endif
      for (int u = 0; u < kReduceUnroll; ++u) {
        x[u] = pa[i + u * nt];
        if (pb) y[u] = pb[i + u * nt];
      }
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
    done = np * Pack<T>::kN;
  }
  for (uint64_t i = done + tid; i < n; i += nt) {
    const T r = combine<T, Op, kAvg>(a, b, i, nranks);
    if (dst) dst[i] = r;
    if (out) out[i] = r;
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
  switch (redop) {
    case collProd: typed<T, OpProd, false>(tid, nt, flags, in, src, dst, out, len, nranks); break;
    case collMax: typed<T, OpMax, false>(tid, nt, flags, in, src, dst, out, len, nranks); break;
    case collMin: typed<T, OpMin, false>(tid, nt, flags, in, src, dst, out, len, nranks); break;
    case collAvg: typed<T, OpSum, true>(tid, nt, flags, in, src, dst, out, len, nranks); break;
    default: typed<T, OpSum, false>(tid, nt, flags, in, src, dst, out, len, nranks); break;
  }
}

}  // namespace slice

}  // namespace coll

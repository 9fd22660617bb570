#include "kernels/encoded_slice.h"

#include "kernels/host_compress.h"

#include <algorithm>
#include <cstring>

namespace coll {

namespace {

// Group codecs of the host (host_compress.h: compress.h's rules, vectorised).
int8_t encodeGroup(uint8_t encoding, const float* x, size_t n, uint16_t* out) {
  if (encoding == kEncodingFp16) return hostEncodeFp16Group(x, n, out);
  hostEncodeBf16(x, n, out);
  return 0;
}

void decodeGroup(uint8_t encoding, const uint16_t* in, size_t n, int8_t e, float* out) {
  if (encoding == kEncodingFp16) return hostDecodeFp16Group(in, n, e, out);
  hostDecodeBf16(in, n, out);
}

// The pieces of one encoded slice: group exponents (fp16) and words.
struct EncodedView {
  int8_t* exps;
  uint16_t* words;
};

EncodedView view(uint8_t encoding, const char* base, size_t n) {
  char* b = const_cast<char*>(base);
  return {encoding == kEncodingFp16 ? reinterpret_cast<int8_t*>(b) : nullptr,
          reinterpret_cast<uint16_t*>(b + encodedHeaderBytes(encoding, n))};
}

// A hop's reduction for sum and avg, fused (host_compress.h): true when it applied.
bool fusedSum(uint8_t flags, uint8_t encoding, const ReduceKernels* kernels, const EncodedView& win, const float* src,
              float* dst, const EncodedView& wout, size_t n, int nranks) {
  const bool sum = kernels == &hostReduceKernels(collFloat32, collSum);
  const bool avg = kernels == &hostReduceKernels(collFloat32, collAvg);
  if (!sum && !avg) return false;
  const bool scale = avg && (flags & kFinal);
  if (encoding == kEncodingBf16) {
    hostSumEncodeBf16(win.words, src, n, scale, nranks, wout.words, dst);
    return true;
  }
  for (size_t lo = 0, b = 0; lo < n; lo += kCompressGroup, ++b)
    wout.exps[b] = hostSumEncodeFp16Group(win.words + lo, win.exps[b], src + lo, std::min(kCompressGroup, n - lo),
                                          scale, nranks, wout.words + lo, dst ? dst + lo : nullptr);
  return true;
}

}  // namespace

void hostEncodedSlice(uint8_t flags, uint8_t encoding, const ReduceKernels* kernels, const char* in, const float* src,
                      float* dst, char* out, size_t n, int nranks) {
  const bool final = flags & kFinal;
  const EncodedView win = in ? view(encoding, in, n) : EncodedView{},
                    wout = out ? view(encoding, out, n) : EncodedView{};
  if (in && !src) {  // forwarded and/or kept: the same bits go on
    if (out) std::memcpy(out, in, encodedBytes(encoding, n));
    for (size_t lo = 0, b = 0; dst && lo < n; lo += kCompressGroup, ++b)
      decodeGroup(encoding, win.words + lo, std::min(kCompressGroup, n - lo), win.exps ? win.exps[b] : 0, dst + lo);
    return;
  }
  if (in && out && fusedSum(flags, encoding, kernels, win, src, dst, wout, n, nranks)) return;
  alignas(64) float v[kCompressGroup];
  for (size_t lo = 0, b = 0; lo < n; lo += kCompressGroup, ++b) {
    const size_t k = std::min(kCompressGroup, n - lo);
    const float* s = src ? src + lo : nullptr;
    const float* value = v;
    if (in) {
      decodeGroup(encoding, win.words + lo, k, win.exps ? win.exps[b] : 0, v);
      if (final) kernels->final(v, v, s, k, nranks);
      else kernels->reduce(v, v, s, k);
    } else if (final) {
      kernels->scale(v, s, k, nranks);
    } else {
      value = s;
    }
    if (!out) {
      if (dst + lo != value) std::memcpy(dst + lo, value, k * sizeof(float));
      continue;
    }
    const int8_t e = encodeGroup(encoding, value, k, wout.words + lo);
    if (wout.exps) wout.exps[b] = e;
    if (dst) decodeGroup(encoding, wout.words + lo, k, e, dst + lo);
  }
}

}  // namespace coll

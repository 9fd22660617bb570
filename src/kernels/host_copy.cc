#include "kernels/host_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace coll {

#if defined(__x86_64__)
namespace {

// Copies `blocks` 64-byte blocks from s to d (unaligned loads; d 16-byte aligned where
// kStream) and advances both pointers past them.
template <bool kStream>
void copyBlocks(char*& d, const char*& s, size_t blocks) {
  for (; blocks > 0; --blocks) {
    __m128i v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * i));
    for (int i = 0; i < 4; ++i) {
      if constexpr (kStream) _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16 * i), v[i]);
      else _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16 * i), v[i]);
    }
    d += 64;
    s += 64;
  }
}

}  // namespace
#endif

void ntCopy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head > n) head = n;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  copyBlocks<true>(d, s, n / 64);
  _mm_sfence();  // streaming stores are weakly ordered: publish before any flag
  std::memcpy(d, s, n % 64);
#else
  std::memcpy(dst, src, n);
#endif
}

void hostCopyAny(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  constexpr size_t kMinBytes = 2048;  // below this glibc copies with vector moves anyway
  const uintptr_t ahead = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (n >= kMinBytes && ahead != 0 && ahead < 64) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    copyBlocks<false>(d, s, n / 64);
    std::memcpy(d, s, n % 64);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace coll

#include "kernels/host_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace coll {

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
  for (size_t blocks = n / 64; blocks > 0; --blocks) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    d += 64;
    s += 64;
  }
  _mm_sfence();  // streaming stores are weakly ordered: publish before any flag
  std::memcpy(d, s, n % 64);
#else
  std::memcpy(dst, src, n);
#endif
}

void hostCopy(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
  constexpr size_t kMinBytes = 2048;  // below this glibc copies with vector moves anyway
  const uintptr_t ahead = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (n >= kMinBytes && ahead != 0 && ahead < 64) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    for (size_t blocks = n / 64; blocks > 0; --blocks) {
      __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
      __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), a);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16), b);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32), c);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 48), e);
      d += 64;
      s += 64;
    }
    std::memcpy(d, s, n % 64);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace coll

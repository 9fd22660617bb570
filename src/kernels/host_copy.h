// Copies for the host executor.
//
// ntCopy writes with non-temporal (streaming) stores: for destinations that will not be
// read again soon and are larger than the cache, it saves the read-for-ownership of every
// destination line (a third of a copy's memory traffic) and keeps the FIFO slots in cache.
// glibc's memcpy switches to such stores only for copies of ~3/4 of the L3 and up, far
// above our slice size, so the executor decides per operation instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace coll {

void ntCopy(void* dst, const void* src, size_t n);

// hostCopy: memcpy (no overlap), except where the destination is 1-63 bytes ahead of the source
// modulo 4096: there glibc's memcpy uses rep movsb for mid sizes on this kind of CPU
// (FSRM), which runs at 3.4 instead of 55 GB/s (256 KiB, docs/PERFORMANCE.md), and a
// plain vector loop copies instead. A user buffer at such a distance from a FIFO slot
// made shared-memory allreduce 3-6x slower.
void hostCopyAny(void* dst, const void* src, size_t n);
// kBytes from s to d through a register.
template <size_t kBytes>
inline void copyUnit(char* d, const char* s) {
  char unit[kBytes];
  std::memcpy(unit, s, kBytes);
  std::memcpy(d, unit, kBytes);
}

inline void hostCopy(void* dst, const void* src, size_t n) {
  // The smallest copies (one-shot operations of a few elements) inline: a call into
  // memcpy costs more than the copy. Units of 16 bytes (or 8, or 4), the last one ending
  // at n, overlapping the one before where n is not a multiple.
  if (n <= 256) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
    if (n >= 16) {
      for (size_t at = 0; at + 16 < n; at += 16) copyUnit<16>(d + at, s + at);
      copyUnit<16>(d + n - 16, s + n - 16);
    } else if (n >= 8) {
      copyUnit<8>(d, s);
      copyUnit<8>(d + n - 8, s + n - 8);
    } else if (n >= 4) {
      copyUnit<4>(d, s);
      copyUnit<4>(d + n - 4, s + n - 4);
    } else {
      for (size_t i = 0; i < n; ++i) d[i] = s[i];
    }
    return;
  }
  hostCopyAny(dst, src, n);
}

}  // namespace coll

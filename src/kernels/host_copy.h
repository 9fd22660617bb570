// Copies for the host executor.
//
// ntCopy writes with non-temporal (streaming) stores: for destinations that will not be
// read again soon and are larger than the cache, it saves the read-for-ownership of every
// destination line (a third of a copy's memory traffic) and keeps the FIFO slots in cache.
// glibc's memcpy switches to such stores only for copies of ~3/4 of the L3 and up, far
// above our slice size, so the executor decides per operation instead.
#pragma once

#include <cstddef>

namespace coll {

void ntCopy(void* dst, const void* src, size_t n);

// memcpy (no overlap), except where the destination is 1-63 bytes ahead of the source
// modulo 4096: there glibc's memcpy uses rep movsb for mid sizes on this kind of CPU
// (FSRM), which runs at 3.4 instead of 55 GB/s (256 KiB, docs/PERFORMANCE.md), and a
// plain vector loop copies instead. A user buffer at such a distance from a FIFO slot
// made shared-memory allreduce 3-6x slower.
void hostCopy(void* dst, const void* src, size_t n);

}  // namespace coll

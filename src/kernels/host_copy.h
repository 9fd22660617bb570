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

}  // namespace coll

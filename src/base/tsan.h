// Synchronisation ThreadSanitizer cannot see by itself, told to it explicitly.
//
// Ranks that are threads of one process publish to each other through shared segments
// that each rank maps at an address of its own (transport/shm/mailbox.h). TSan pairs a
// release with an acquire by virtual address, so a flag written through one mapping and
// read through another orders nothing in its eyes, although the hardware orders both.
// Writer and reader therefore also name one key, the same address in every rank of the
// process: tsanRelease before the release store, tsanAcquire after the acquire load that
// saw it. A null key names nothing. Without ThreadSanitizer both are empty.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define COLL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLL_TSAN 1
#endif
#endif

#ifdef COLL_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace coll {

inline void tsanRelease([[maybe_unused]] const void* key) {
#ifdef COLL_TSAN
  if (key) __tsan_release(const_cast<void*>(key));
#endif
}

inline void tsanAcquire([[maybe_unused]] const void* key) {
#ifdef COLL_TSAN
  if (key) __tsan_acquire(const_cast<void*>(key));
#endif
}

}  // namespace coll

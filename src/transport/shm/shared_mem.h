// Host memory that the other processes of this host can map: what collMemAlloc hands out
// to host ranks, and the peers' views of it that a symmetric window registration makes.
//
// An allocation is an anonymous memory file (memfd) mapped shared and read-write. A peer
// process maps it read-only through /proc/<pid>/fd/<fd>, which the kernel allows to the
// same user under the ptrace "read" rule; nothing is named in /dev/shm, so nothing is
// left behind by a crash. Where memfd is unavailable, allocations are plain heap memory
// and windows on them are read by the other routes (mailbox.h readPeer).
//
// What a window buys: the direct one-shot (algorithms/oneshot.h) reads a peer's buffer
// inside a mapped window with plain loads, like a thread of this process, instead of
// copying it with process_vm_readv first.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/status.h"

namespace coll {

// Allocates bytes (> 0) of shareable memory, page-aligned and zero-filled; falls back to
// the heap where memfd is unavailable. Free with sharedFree.
Result<void*> sharedAlloc(size_t bytes);
// Frees what sharedAlloc returned; false (nothing done) for any other pointer.
bool sharedFree(void* p);

// Where [p, p + bytes) lies in a shareable allocation of this process.
struct SharedSpan {
  int fd = -1;              // the allocation's memory file, in this process
  uint64_t offset = 0;      // of p from the allocation's start
  uint64_t allocBytes = 0;  // the whole allocation's mapped length
};
std::optional<SharedSpan> sharedSpanOf(const void* p, size_t bytes);

// A peer's allocation mapped read-only here; unmapped when the last holder lets go.
class PeerMapping {
 public:
  // Maps allocBytes of pid's memory file fd. Fails (with the reason) where the kernel
  // refuses, the process is gone, or the file is shorter than allocBytes.
  static Result<std::shared_ptr<const PeerMapping>> map(pid_t pid, int fd, size_t allocBytes);
  ~PeerMapping();
  PeerMapping(const PeerMapping&) = delete;
  PeerMapping& operator=(const PeerMapping&) = delete;
  const char* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  PeerMapping(const char* base, size_t bytes) : base_(base), bytes_(bytes) {}
  const char* base_;
  size_t bytes_;
};

// One rank's part of a shared window, as seen from here: its address range in the rank's
// own address space, and where those bytes are mapped here (null: not mapped, e.g. this
// rank's own part).
struct WindowPart {
  uint64_t remote = 0;
  uint64_t bytes = 0;
  const char* local = nullptr;

  // Where the rank's bytes [at, at + n) are mapped here, or null (not mapped, or not all
  // of them inside this part).
  const char* find(uint64_t at, size_t n) const {
    if (!local || at < remote || at - remote > bytes || n > bytes - (at - remote)) return nullptr;
    return local + (at - remote);
  }
};

// A symmetric window that every rank of a communicator mapped from every other rank.
struct SharedWindow {
  uint64_t id = 0;                                       // the same on every rank: the window agreement's number
  std::vector<WindowPart> parts;                         // by rank
  std::vector<std::shared_ptr<const PeerMapping>> maps;  // keep parts' local bytes mapped
};

// A communicator's shared windows. Registration adds and removes (API threads); direct
// one-shots look up (API or executor thread): a lock, and shared pointers, so a window
// deregistered mid-operation stays mapped until the operation lets go.
class SharedWindows {
 public:
  void add(std::shared_ptr<const SharedWindow> w);
  void remove(uint64_t id);
  // The window of ours holding [p, p + bytes): its id, or 0.
  uint64_t idOf(int myRank, const void* p, size_t bytes) const;
  std::shared_ptr<const SharedWindow> find(uint64_t id) const;
  bool any() const { return count_.load(std::memory_order_relaxed) != 0; }

 private:
  std::atomic<size_t> count_{0};
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<const SharedWindow>> windows_;
};

}  // namespace coll

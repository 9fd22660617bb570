// Shared-memory transport between ranks of one host.
//
// The receiver owns the FIFO. Between processes it lives in a POSIX shm segment with an
// unguessable name and mode 0600, which the receiver unlinks as soon as the sender has
// mapped it, so a crash leaves nothing in /dev/shm once connections are made; a segment
// whose creator died while connecting is removed by the next process of the same user
// that creates one (shmCreateSegment). Between threads of one process it is
// plain memory, handed over through an in-process registry.
//
// Setup (the kShmTransport row of the transport table, driven by transport.cc): the
// receiver calls shmSetupRecv() and ships the returned handle to the sender through the
// bootstrap; the sender calls shmConnectSend() and acknowledges; the receiver then calls
// finish() on its pending half, which unlinks the segment.
#pragma once

#include <memory>
#include <string>

#include "transport/table.h"

namespace coll {

struct ShmHandle {
  char name[48];     // shm segment name, or "" for in-process
  uint64_t localId;  // in-process registry key
  int32_t pid;       // creator, to check "same process"
  uint64_t slotBytes;
};

class ShmRegion;  // a mapping (or allocation) holding one FIFO

// Ranks of one host, unless COLL_SHM_DISABLE=1 (table.cc).
extern const Transport kShmTransport;

// Segment helpers shared with the mailboxes. shmCreateSegment writes an unguessable name
// ("/coll-<what>-<pid>-<random>") into name, creates it with mode 0600 and maps it;
// the caller unlinks it once every peer has mapped it.
uint64_t shmRandomId();
Result<void*> shmCreateSegment(char* name, size_t nameLen, const char* what, size_t bytes);
// Removes this user's fifo and mailbox segments older than `olderThanS` whose creator
// (the pid in the name) is gone: left by a process killed between creating one and its
// peer mapping it. The first shmCreateSegment of a process runs it. Returns how many it
// removed.
int shmSweepDeadCreators(int64_t olderThanS = 600);
// Unlinks a segment by name ("" : none) when it leaves scope: a creator's own segment,
// on every way out of a setup (peers have mapped it or never will).
struct ShmUnlinkGuard {
  const char* name;
  ~ShmUnlinkGuard();
};
// Maps a peer's segment; fails (instead of a SIGBUS later) when it is shorter than bytes.
Result<void*> shmMapSegment(const char* name, size_t bytes, const std::string& what);
// A segment name from a peer: NUL-terminated within cap, "/coll-..." with no other '/'.
Status checkShmName(const char* name, size_t cap, const std::string& what);
// The largest FIFO slot a peer's handle may ask for (COLL_BUFFSIZE is at most 1 GiB).
constexpr uint64_t kMaxShmSlotBytes = uint64_t{1} << 30;

// The row's halves, for callers that know they want shm (tests). The handle is a ShmHandle.
Result<std::unique_ptr<PendingRecv>> shmSetupRecv(int peer, size_t slotBytes, bool sameProcess);
Result<std::unique_ptr<SendConnector>> shmConnectSend(int peer, std::span<const std::byte> handle);

}  // namespace coll

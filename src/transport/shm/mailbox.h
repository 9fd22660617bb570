// Mailboxes: the shared-memory home of the one-shot (small message) algorithms.
//
// When every rank of a communicator lives on one host, each rank owns a small shared
// segment that every peer maps. The segment holds two buffers used alternately by
// consecutive one-shot operations. A buffer starts with a header (the flag, the operation's
// signature) and the data follows in the same cache line, so a reader that sees the flag
// has most of a small message in hand already: one cache-line transfer instead of a
// counter round trip and a separate data line (NCCL's LL protocol has the same aim).
//
// Protocol for round number s (counted per communicator, 1, 2, ...; an operation uses one
// or more rounds):
//   - every rank writes its contribution (possibly none) into its buffer s % 2 and then
//     publishes s in that buffer's flag;
//   - every rank waits until every peer's buffer s % 2 shows s, reads what it needs, and
//     returns.
// A rank overwrites buffer s % 2 at operation s + 2 only after it has seen every peer's
// flag of operation s + 1, which each peer published after it finished operation s: so
// nobody is still reading. No acknowledgements are needed.
//
// Direct reads (algorithms/oneshot.h) read the peers' own buffers, which a rank whose
// call fails may hand back to its caller. A reader announces the round it reads in
// (beginReading) and then checks that every peer still shows that round's flag; a rank
// that gives up withdraws its flags and then waits until no peer announces a round of
// its operation (withdraw, peerReading). Sequentially consistent stores and loads on both
// sides: either the reader sees the withdrawal and reads nothing, or the withdrawing rank
// sees the reader and waits for it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/tsan.h"
#include "bootstrap/bootstrap.h"
#include "transport/connector.h"

namespace coll {

// What an operation looks like, so ranks that called different things notice it.
struct MailSignature {
  uint32_t kind = 0, dtype = 0, op = 0;
  int32_t root = 0;
  uint64_t count = 0;
  bool operator==(const MailSignature&) const = default;
};

struct MailBufferHeader {
  std::atomic<uint32_t> flag;  // number of the operation whose data is in the buffer
  MailSignature sig;
};
static_assert(sizeof(MailBufferHeader) <= 32, "the header must leave half its cache line to data");

// A rank's direct-read state, after its two buffers.
struct MailControl {
  std::atomic<uint32_t> reading;    // the round whose peers' buffers it reads now; 0: none
  std::atomic<uint32_t> withdrawn;  // the first round of the operation it gave up last
  // Peers asleep on one of its flags. Not in the buffers' headers: a publish reads it
  // right after writing the header, whose line may still be on its way back from the
  // peers that read it last, and a load from that line would wait as long.
  std::atomic<uint32_t> waiters;
};

// The round number after `cur`. 0 means "never published" and is skipped by jumping to
// 2, so consecutive numbers still alternate between the two buffers.
inline uint32_t nextMailSeq(uint32_t cur) { return cur + 1 == 0 ? 2 : cur + 1; }

class Mailboxes {
 public:
  // Collective over the bootstrap: every rank creates and maps. Returns nullptr (and
  // logs why) on every rank if any rank could not set up, so the ranks always agree.
  // directMode: 0 no direct reads; 1 only between threads of one process (plain loads);
  // 2 also across processes (process_vm_readv, if the kernel allows it).
  static Result<std::unique_ptr<Mailboxes>> create(Bootstrap* bs, size_t capacity, uint64_t tag, int directMode);
  ~Mailboxes();

  size_t capacity() const { return capacity_; }
  // Own buffer for operation s: write data here, then publish.
  char* mine(uint32_t s) { return data(rank_, s); }
  void publish(uint32_t s, const MailSignature& sig);
  bool arrived(int rank, uint32_t s) const {
    if (header(rank, s)->flag.load(std::memory_order_acquire) != s) return false;
    tsanAcquire(syncKey(rank, s));
    return true;
  }
  const MailSignature& signature(int rank, uint32_t s) const { return header(rank, s)->sig; }
  char* data(int rank, uint32_t s) const { return reinterpret_cast<char*>(header(rank, s)) + kDataOffset; }
  WaitTarget waitTarget(int rank, uint32_t s) const;

  // Whether this rank may read every peer's memory (process_vm_readv, or plain loads
  // for peers in this process): decided at setup, the same on every rank.
  bool directOk() const { return directOk_; }
  // Whether every rank may read every peer's memory (readPeer), whatever directMode says
  // (not 0): decided at setup, the same on every rank. Shared windows need it for the
  // buffers outside them (algorithms/oneshot.h).
  bool peersReadable() const { return peersReadable_; }
  int pid(int rank) const { return pids_[rank]; }
  // Copies bytes at `remote` in rank's address space to dst.
  Status readPeer(int rank, void* dst, const void* remote, size_t bytes) const;

  // Direct reads of round s: announces them, then checks that every peer still shows
  // s; when one withdrew, announces nothing and returns that peer, else -1.
  int beginReading(uint32_t s);
  void endReading() {
    tsanRelease(controlKey(rank_));
    control(rank_)->reading.store(0, std::memory_order_release);
  }
  // Gives up the operation whose rounds are `rounds` (the first one names it): the flags
  // of those rounds that are still ours become 0, except `keep`'s.
  void withdraw(std::span<const uint32_t> rounds, uint32_t keep);
  // Whether rank gave up the operation whose first round is `first`.
  bool withdrew(int rank, uint32_t first) const {
    return control(rank)->withdrawn.load(std::memory_order_acquire) == first;
  }
  // A peer that announced reading in one of `rounds`, or -1.
  int peerReading(std::span<const uint32_t> rounds) const;

 private:
  static constexpr size_t kDataOffset = 32;
  Mailboxes() = default;
  MailBufferHeader* header(int rank, uint32_t s) const {
    return reinterpret_cast<MailBufferHeader*>(bases_[rank] + (s & 1) * stride_);
  }
  MailControl* control(int rank) const { return reinterpret_cast<MailControl*>(bases_[rank] + 2 * stride_); }
  // The flag of rank's buffer for s as ThreadSanitizer should see it (base/tsan.h): where
  // its owner maps it, the one address every thread rank of this process agrees on;
  // nullptr for a rank in another process.
  const void* syncKey(int rank, uint32_t s) const { return keys_[rank] ? keys_[rank] + (s & 1) * stride_ : nullptr; }
  // The same for rank's MailControl: a reader's endReading against peerReading.
  const void* controlKey(int rank) const { return keys_[rank] ? keys_[rank] + 2 * stride_ : nullptr; }

  int rank_ = 0;
  size_t capacity_ = 0;
  size_t stride_ = 0;
  size_t segBytes_ = 0;
  std::vector<char*> bases_;       // every rank's segment, mapped here
  std::vector<const char*> keys_;  // every rank's segment where its owner maps it, if in this process
  std::vector<int> pids_;
  bool directOk_ = false;
  bool peersReadable_ = false;
};

}  // namespace coll

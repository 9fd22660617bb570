#include "transport/shm/mailbox.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "kernels/host_copy.h"
#include "base/wait.h"
#include "transport/shm/shm.h"

namespace coll {

namespace {

struct SetupEntry {
  char name[48];
  int32_t ok;
  int32_t pid;
  uint64_t base;  // where the segment is mapped in its owner (a readable probe address)
};

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace

Result<std::unique_ptr<Mailboxes>> Mailboxes::create(Bootstrap* bs, size_t capacity, uint64_t tag, int directMode) {
  const int n = bs->nranks(), me = bs->rank();
  std::unique_ptr<Mailboxes> mb(new Mailboxes());
  mb->rank_ = me;
  mb->capacity_ = roundUp(capacity, 64);
  mb->stride_ = roundUp(kDataOffset + mb->capacity_, 64);
  mb->segBytes_ = 2 * mb->stride_ + 64;  // the two buffers, then MailControl
  mb->bases_.assign(n, nullptr);

  std::vector<SetupEntry> all(n);
  SetupEntry& mine = all[me];
  Result<void*> seg = shmCreateSegment(mine.name, sizeof(mine.name), "mbox", mb->segBytes_);
  if (seg.ok()) {
    mb->bases_[me] = static_cast<char*>(seg.take());  // zero-filled: flags read 0
    mine.ok = 1;
    mine.base = reinterpret_cast<uintptr_t>(mb->bases_[me]);
  } else {
    COLL_WARN(SHM, "rank %d: no one-shot mailbox (%s); small operations take the ring", me,
              seg.status().message().c_str());
    mine.name[0] = 0;
  }
  ShmUnlinkGuard unlinkOwn{mine.name};

  mine.pid = getpid();
  COLL_CHECK(bs->allGather(all.data(), sizeof(SetupEntry), tag));
  mb->pids_.resize(n);
  for (int r = 0; r < n; ++r) mb->pids_[r] = all[r].pid;
  mb->keys_.assign(n, nullptr);
  for (int r = 0; r < n; ++r)
    if (all[r].pid == mine.pid) mb->keys_[r] = reinterpret_cast<const char*>(all[r].base);
  bool allOk = true;
  for (int r = 0; r < n; ++r) allOk = allOk && all[r].ok;
  // A name no peer of ours makes: no mailboxes on any rank (the second round tells them).
  for (int r = 0; r < n && allOk; ++r) {
    if (r == me) continue;
    Status named = checkShmName(all[r].name, sizeof(all[r].name), "rank " + std::to_string(r) + "'s mailbox");
    if (!named.ok()) COLL_WARN(SHM, "rank %d: %s; small operations take the ring", me, named.message().c_str());
    allOk = named.ok();
  }
  int32_t mapped = allOk ? 1 : 0;
  for (int r = 0; r < n && mapped; ++r) {
    if (r == me) continue;
    Result<void*> p = shmMapSegment(all[r].name, mb->segBytes_, "rank " + std::to_string(r) + "'s mailbox");
    if (!p.ok()) {
      COLL_WARN(SHM, "rank %d: %s; small operations take the ring", me, p.status().message().c_str());
      mapped = 0;
      break;
    }
    mb->bases_[r] = static_cast<char*>(p.take());
  }
  // Can we read the peers' memory directly? Probe each peer's segment base, in every
  // mode but 0: shared windows need it whichever mode reads unregistered buffers.
  int32_t readable = directMode > 0 ? 1 : 0;
  for (int r = 0; r < n && mapped && readable; ++r) {
    uint64_t probe;
    Status st = mb->readPeer(r, &probe, reinterpret_cast<const void*>(all[r].base), sizeof(probe));
    if (!st.ok()) {
      COLL_INFO(SHM,
                "rank %d: cannot read rank %d's memory directly (%s); large operations "
                "take the shared-memory FIFOs",
                me, r, st.message().c_str());
      readable = 0;
    }
  }
  int32_t direct = readable;
  for (int r = 0; r < n && direct && directMode == 1; ++r)
    if (all[r].pid != mine.pid) direct = 0;  // mode 1: threads of one process only
  // Second round: everyone has mapped (or failed) before the names go away.
  std::vector<int32_t> oks(3 * n);
  oks[3 * me] = mapped;
  oks[3 * me + 1] = direct;
  oks[3 * me + 2] = readable;
  COLL_CHECK(bs->allGather(oks.data(), 3 * sizeof(int32_t), tag + 1));
  mb->directOk_ = mb->peersReadable_ = true;
  for (int r = 0; r < n; ++r) {
    if (!oks[3 * r]) return std::unique_ptr<Mailboxes>();  // the destructor unmaps
    mb->directOk_ = mb->directOk_ && oks[3 * r + 1];
    mb->peersReadable_ = mb->peersReadable_ && oks[3 * r + 2];
  }
  COLL_INFO(SHM, "rank %d: one-shot mailboxes of %zu bytes with %d rank(s), direct reads %s", me, mb->capacity_, n,
            mb->directOk_ ? "on" : "off");
  return mb;
}

Status Mailboxes::readPeer(int rank, void* dst, const void* remote, size_t bytes) const {
  if (pids_[rank] == getpid()) {
    hostCopy(dst, remote, bytes);
    return okStatus();
  }
  char* d = static_cast<char*>(dst);
  const char* r = static_cast<const char*>(remote);
  while (bytes > 0) {
    iovec local{d, bytes}, far{const_cast<char*>(r), bytes};
    ssize_t got = process_vm_readv(pids_[rank], &local, 1, &far, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      if (err == ESRCH)
        return remoteError("rank " + std::to_string(rank) + " (pid " + std::to_string(pids_[rank]) + ") is gone");
      return systemError("process_vm_readv from rank " + std::to_string(rank) + " (pid " + std::to_string(pids_[rank]) +
                             ")",
                         err);
    }
    if (got == 0) return remoteError("rank " + std::to_string(rank) + "'s buffer is not readable");
    d += got;
    r += got;
    bytes -= static_cast<size_t>(got);
  }
  return okStatus();
}

Mailboxes::~Mailboxes() {
  for (char* b : bases_)
    if (b) munmap(b, segBytes_);
}

void Mailboxes::publish(uint32_t s, const MailSignature& sig) {
  MailBufferHeader* h = header(rank_, s);
  h->sig = sig;
  tsanRelease(syncKey(rank_, s));
  // A release store, not a fenced one: the fence would wait for this line to come back
  // from the peers that read it last, which is most of a small operation's latency.
  // The price is a rare lost wake (a reader registering while the flag still sits in
  // our store buffer), so mailbox sleepers wake up on their own after 1 ms
  // (waitTarget's maxSleepUs).
  h->flag.store(s, std::memory_order_release);
  if (control(rank_)->waiters.load(std::memory_order_relaxed) != 0) futexWake(&h->flag, true);
}

int Mailboxes::beginReading(uint32_t s) {
  control(rank_)->reading.store(s, std::memory_order_seq_cst);
  for (int r = 0; r < static_cast<int>(bases_.size()); ++r) {
    if (r == rank_ || header(r, s)->flag.load(std::memory_order_seq_cst) == s) continue;
    endReading();
    return r;
  }
  return -1;
}

void Mailboxes::withdraw(std::span<const uint32_t> rounds, uint32_t keep) {
  control(rank_)->withdrawn.store(rounds.front(), std::memory_order_release);
  for (uint32_t s : rounds) {
    MailBufferHeader* h = header(rank_, s);
    if (s != keep && h->flag.load(std::memory_order_relaxed) == s) h->flag.store(0, std::memory_order_seq_cst);
    if (control(rank_)->waiters.load(std::memory_order_relaxed) != 0) futexWake(&h->flag, true);
  }
}

int Mailboxes::peerReading(std::span<const uint32_t> rounds) const {
  for (int r = 0; r < static_cast<int>(bases_.size()); ++r) {
    if (r == rank_) continue;
    const uint32_t s = control(r)->reading.load(std::memory_order_seq_cst);
    if (s != 0 && std::find(rounds.begin(), rounds.end(), s) != rounds.end()) return r;
    tsanAcquire(controlKey(r));  // its reads of our buffers, if any, are over
  }
  return -1;
}

WaitTarget Mailboxes::waitTarget(int rank, uint32_t s) const {
  MailBufferHeader* h = header(rank, s);
  WaitTarget t;
  t.word = &h->flag;
  t.waiters = &control(rank)->waiters;
  t.seen = h->flag.load(std::memory_order_relaxed);
  t.shared = true;
  t.maxSleepUs = 1000;
  return t;
}

}  // namespace coll

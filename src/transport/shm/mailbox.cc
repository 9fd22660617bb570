#include "transport/shm/mailbox.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "core/log.h"
#include "core/wait.h"
#include "transport/shm/shm.h"

namespace coll {

namespace {

struct SetupEntry {
  char name[48];
  int32_t ok;
  int32_t pad;
};

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

void futex(std::atomic<uint32_t>* word, int op, uint32_t val) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, nullptr, nullptr, 0);
}

}  // namespace

Result<std::unique_ptr<Mailboxes>> Mailboxes::create(Bootstrap* bs, size_t capacity,
                                                     uint64_t tag) {
  const int n = bs->nranks(), me = bs->rank();
  std::unique_ptr<Mailboxes> mb(new Mailboxes());
  mb->rank_ = me;
  mb->capacity_ = roundUp(capacity, 64);
  mb->stride_ = roundUp(kDataOffset + mb->capacity_, 64);
  mb->segBytes_ = 2 * mb->stride_;
  mb->bases_.assign(n, nullptr);

  std::vector<SetupEntry> all(n);
  SetupEntry& mine = all[me];
  Result<void*> seg = shmCreateSegment(mine.name, sizeof(mine.name), "mbox", mb->segBytes_);
  if (seg.ok()) {
    mb->bases_[me] = static_cast<char*>(seg.take());  // zero-filled: flags read 0
    mine.ok = 1;
  } else {
    COLL_WARN(SHM, "rank %d: no one-shot mailbox (%s); small operations take the ring",
              me, seg.status().message().c_str());
    mine.name[0] = 0;
  }
  // On any way out, our own name is unlinked (peers have mapped it or never will).
  struct Unlink {
    const char* name;
    ~Unlink() { if (name[0]) shm_unlink(name); }
  } unlinkOwn{mine.name};

  COLL_CHECK(bs->allGather(all.data(), sizeof(SetupEntry), tag));
  bool allOk = true;
  for (int r = 0; r < n; ++r) allOk = allOk && all[r].ok;
  int32_t mapped = allOk ? 1 : 0;
  for (int r = 0; r < n && mapped; ++r) {
    if (r == me) continue;
    Result<void*> p = shmMapSegment(all[r].name, mb->segBytes_,
                                    "rank " + std::to_string(r) + "'s mailbox");
    if (!p.ok()) {
      COLL_WARN(SHM, "rank %d: %s; small operations take the ring", me,
                p.status().message().c_str());
      mapped = 0;
      break;
    }
    mb->bases_[r] = static_cast<char*>(p.take());
  }
  // Second round: everyone has mapped (or failed) before the names go away.
  std::vector<int32_t> oks(n);
  oks[me] = mapped;
  COLL_CHECK(bs->allGather(oks.data(), sizeof(int32_t), tag + 1));
  for (int r = 0; r < n; ++r)
    if (!oks[r]) return std::unique_ptr<Mailboxes>();  // the destructor unmaps
  COLL_INFO(SHM, "rank %d: one-shot mailboxes of %zu bytes with %d rank(s)", me,
            mb->capacity_, n);
  return mb;
}

Mailboxes::~Mailboxes() {
  for (char* b : bases_)
    if (b) munmap(b, segBytes_);
}

void Mailboxes::publish(uint32_t s, const MailSignature& sig) {
  MailSlotHeader* h = header(rank_, s);
  h->sig = sig;
  // A release store, not a fenced one: the fence would wait for this line to come back
  // from the peers that read it last, which is most of a small operation's latency.
  // The price is a rare lost wake (a reader registering while the flag still sits in
  // our store buffer), so mailbox sleepers wake up on their own after 1 ms
  // (waitTarget's maxSleepUs).
  h->flag.store(s, std::memory_order_release);
  if (h->waiters.load(std::memory_order_relaxed) != 0)
    futex(&h->flag, FUTEX_WAKE, INT32_MAX);
}

WaitTarget Mailboxes::waitTarget(int rank, uint32_t s) const {
  MailSlotHeader* h = header(rank, s);
  WaitTarget t;
  t.word = &h->flag;
  t.waiters = &h->waiters;
  t.seen = h->flag.load(std::memory_order_relaxed);
  t.shared = true;
  t.maxSleepUs = 1000;
  return t;
}

}  // namespace coll

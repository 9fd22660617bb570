#include "algorithms/oneshot.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "algorithms/algorithms.h"
#include "base/datatype.h"
#include "base/log.h"
#include "base/wait.h"
#include "kernels/host_copy.h"
#include "transport/shm/mailbox.h"

namespace coll {

namespace {

// dst[0, cnt) = src(o0) op src(o1) op ... op src(o_{n-1}) with o_j = last+1+j (mod n),
// where src(r) points at rank r's elements; the op's post-step applies at the last
// combine. The same chain the ring uses for the block ending at rank `last` when the ring
// is in rank order (contiguous placement; ring_layout.h ringOrder); otherwise the bits may differ
// from the ring's in the last place, but every rank computes the same ones.
// The rank at position j of the chain ending at `last` (both in [0, n)): last+1+j mod n,
// without a division (one costs more than a small operation's reduction).
inline int chainRank(int last, int j, int n) {
  const int r = last + 1 + j;
  return r >= n ? r - n : r;
}

template <typename Src>
void reduceChain(const ReduceKernels& k, char* dst, Src src, size_t cnt, int n, int last) {
  auto at = [&](int j) { return src(chainRank(last, j, n)); };
  if (n == 2) {
    k.final(dst, at(0), at(1), cnt, n);
    return;
  }
  k.reduce(dst, at(0), at(1), cnt);
  for (int j = 2; j < n - 1; ++j) k.reduce(dst, dst, at(j), cnt);
  k.final(dst, dst, at(n - 1), cnt, n);
}

// Allreduce result: every block b of od combined in its chain order (ending at rank b)
// from input(r), rank r's whole input.
template <typename Input>
void reduceAllBlocks(const OpDesc& od, size_t es, int n, Input input) {
  const ReduceKernels& k = hostReduceKernels(od.dtype, od.op);
  char* out = static_cast<char*>(od.recvbuff);
  if (n == 2 && orderFree(od.dtype, od.op)) {
    // Both blocks combine the same two inputs, in opposite orders, which these ops do not
    // tell apart: one call for the whole buffer.
    k.final(out, input(0), input(1), od.count, n);
    return;
  }
  // Block b spans partBegin(count, n, b) to partBegin(count, n, b + 1), stepped here.
  const size_t share = od.count / static_cast<size_t>(n), extra = od.count % static_cast<size_t>(n);
  size_t end = 0;
  for (int b = 0; b < n; ++b) {
    const size_t begin = end;
    end = begin + share + (static_cast<size_t>(b) < extra ? 1 : 0);
    if (end == begin) continue;
    size_t off = begin * es;
    reduceChain(
        k, out + off, [&](int r) { return input(r) + off; }, end - begin, n, b);
  }
}

MailSignature signatureOf(const OpDesc& od) {
  MailSignature s;
  s.kind = static_cast<uint32_t>(od.kind) + 1;
  s.dtype = static_cast<uint32_t>(od.dtype);
  s.op = combines(od.kind) ? static_cast<uint32_t>(od.op) : 0;
  s.root = rooted(od.kind) ? od.root : -1;
  s.count = od.count;
  return s;
}

std::string signatureString(const MailSignature& s) {
  OpDesc od{};
  od.kind = static_cast<CollKind>(s.kind - 1);
  od.count = s.count;
  od.dtype = static_cast<collDataType_t>(s.dtype);
  od.op = static_cast<collRedOp_t>(s.op);
  od.root = s.root;
  std::string d = collKindName(od.kind);
  d += " (count " + std::to_string(s.count) + ", " + dataTypeName(od.dtype);
  if (s.kind - 1 == static_cast<uint32_t>(CollKind::kAllReduce) ||
      s.kind - 1 == static_cast<uint32_t>(CollKind::kReduce) ||
      s.kind - 1 == static_cast<uint32_t>(CollKind::kReduceScatter))
    d += std::string(", ") + redOpName(od.op);
  if (s.root >= 0) d += ", root " + std::to_string(s.root);
  return d + ")";
}

// Bytes of reduction work per read of the direct algorithms (peers' data is copied in
// pieces this big, so it stays in cache while being reduced).
constexpr size_t kDirectReadBytes = 128 * 1024;

}  // namespace

bool oneShotEligible(const OneShotContext& c, const OpDesc& od) {
  if (c.nranks < 2 || od.count == 0) return false;
  const size_t bytes = od.bytes();
  if (c.state->mailboxes) {
    if (isPeerOp(od.kind)) return false;
    size_t cap = c.state->mailboxes->capacity();
    if (od.kind == CollKind::kReduceScatter) cap /= static_cast<size_t>(c.nranks);
    return bytes <= cap || c.state->directOn;
  }
  return od.kind == CollKind::kAllReduce && bytes <= c.state->netBytes && bytes <= c.slotBytes && c.ring0 &&
         c.ring0->send;
}

OneShot::OneShot(const OneShotContext& ctx, const OpDesc& od)
    : ctx_(ctx), od_(od), es_(dataTypeSize(od.dtype)), sig_(signatureOf(od)) {
  if (!ctx_.state->mailboxes) return;  // ring
  size_t cap = ctx_.state->mailboxes->capacity();
  if (od.kind == CollKind::kReduceScatter) cap /= static_cast<size_t>(ctx_.nranks);
  if (od.count * es_ <= cap) {
    mode_ = Mode::kMailbox;
    rounds_ = 1;
  } else {
    mode_ = Mode::kDirectRead;
    rounds_ = od.kind == CollKind::kAllReduce ? 3 : 2;
  }
  for (int r = 0; r < rounds_; ++r) seqs_[r] = ctx_.state->mailSeq = nextMailSeq(ctx_.state->mailSeq);
}

Status OneShot::start() {
  const size_t bytes = od_.count * es_;
  if (mode_ == Mode::kMailbox) {
    size_t pub = od_.inputBytes(ctx_.rank, ctx_.nranks);  // its whole input, where it has one
    if (pub) hostCopy(ctx_.state->mailboxes->mine(seqs_[0]), od_.sendbuff, pub);
    ctx_.state->mailboxes->publish(seqs_[0], sig_);
    return okStatus();
  }
  if (mode_ == Mode::kDirectRead) {
    ptrs_.resize(static_cast<size_t>(ctx_.nranks));
    Ptrs mine{reinterpret_cast<uintptr_t>(od_.sendbuff), reinterpret_cast<uintptr_t>(od_.recvbuff), 0, 0};
    const SharedWindows& wins = ctx_.state->windows;
    if (wins.any()) {
      mine.sendWin = wins.idOf(ctx_.rank, od_.sendbuff, od_.inputBytes(ctx_.rank, ctx_.nranks));
      mine.recvWin = wins.idOf(ctx_.rank, od_.recvbuff, od_.outputBytes(ctx_.rank, ctx_.nranks));
    }
    std::memcpy(ctx_.state->mailboxes->mine(seqs_[0]), &mine, sizeof(mine));
    ctx_.state->mailboxes->publish(seqs_[0], sig_);
    published_ = true;
    return okStatus();
  }
  // Ring: copy our own input (in-place callers overwrite it while reducing).
  const size_t need = bytes * static_cast<size_t>(ctx_.nranks);
  if (ctx_.state->scratch.size() < need) ctx_.state->scratch.resize(need);
  hostCopy(ctx_.state->scratch.data() + static_cast<size_t>(ctx_.rank) * bytes, od_.sendbuff, bytes);
  return okStatus();
}

Status OneShot::poll(bool* done, WaitTarget* wait) {
  return mode_ == Mode::kRingPass ? pollRingPass(done, wait) : pollRounds(done, wait);
}

Status OneShot::pollRounds(bool* done, WaitTarget* wait) {
  Mailboxes& mb = *ctx_.state->mailboxes;
  const int n = ctx_.nranks;
  for (;;) {
    const uint32_t s = seqs_[round_];
    while (arrived_ < n - 1) {
      int peer = arrived_ < ctx_.rank ? arrived_ : arrived_ + 1;
      if (!mb.arrived(peer, s)) {
        // A peer that called a larger count reads directly, and withdraws its flag when it
        // gives up (it may have seen the mismatch first): any mode looks for that.
        if (mb.withdrew(peer, seqs_[0])) return withdrawnError(peer);
        blockedPeer_ = peer;
        *wait = mb.waitTarget(peer, s);
        if (wait->seen == s) continue;  // arrived just now
        // Ring data while a peer's flag is missing: see allArrivedNow().
        if (ctx_.ring0 && ctx_.ring0->recv && ctx_.ring0->recv->ready() && !allArrivedNow())
          return invalidUsage("rank " + std::to_string(ctx_.ring0->recv->peer()) +
                              " started a ring operation while this rank runs " + od_.describe() +
                              " as a one-shot: the ranks called different operations or counts");
        return okStatus();
      }
      const MailSignature& theirs = mb.signature(peer, s);
      if (!(theirs == sig_))
        return invalidUsage("rank " + std::to_string(peer) + " called " + signatureString(theirs) +
                            " where this rank called " + signatureString(sig_) +
                            ": the ranks called different operations or counts");
      if (mode_ == Mode::kDirectRead && round_ == 0)
        std::memcpy(&ptrs_[static_cast<size_t>(peer)], mb.data(peer, s), sizeof(Ptrs));
      ++arrived_;
    }
    arrived_ = 0;
    blockedPeer_ = -1;
    if (mode_ == Mode::kMailbox) {
      finishMailbox();
      *done = complete_ = true;
      return okStatus();
    }
    COLL_CHECK(readPhase(round_));
    if (++round_ == rounds_) {
      *done = complete_ = true;
      return okStatus();
    }
    mb.publish(seqs_[round_], sig_);
  }
}

template <typename Base>
Status OneShot::reduceDirect(char* dst, Base base, size_t cnt, int last) {
  const Mailboxes& mb = *ctx_.state->mailboxes;
  const int n = ctx_.nranks, me = ctx_.rank;
  const pid_t self = getpid();
  const ReduceKernels& k = hostReduceKernels(od_.dtype, od_.op);
  const size_t perRead = std::max<size_t>(1, kDirectReadBytes / es_);
  if (ctx_.state->scratch.size() < 3 * kDirectReadBytes + 64) ctx_.state->scratch.resize(3 * kDirectReadBytes + 64);
  char* tmp = ctx_.state->scratch.data();
  for (size_t off = 0; off < cnt; off += perRead) {
    const size_t len = std::min(perRead, cnt - off), bytes = len * es_;
    char* d = dst + off * es_;
    // Rank r's elements of this read: in place when r's memory is ours (this rank or a
    // thread of this process), else read into scratch. Our own input may be the
    // destination (in place): keep a copy, since the chain overwrites d before using it.
    const char* own = base(me) + off * es_;
    if (own == d && n > 2) {
      hostCopy(tmp + 2 * kDirectReadBytes, own, bytes);
      own = tmp + 2 * kDirectReadBytes;
    }
    auto get = [&](int r, int region, const char** p) -> Status {
      if (r == me) {
        *p = own;
        return okStatus();
      }
      const char* remote = base(r) + off * es_;
      if (mb.pid(r) == self) {
        *p = remote;
        return okStatus();
      }
      if ((*p = mapped(r, remote, bytes))) return okStatus();
      COLL_CHECK(mb.readPeer(r, tmp + region * kDirectReadBytes, remote, bytes));
      *p = tmp + region * kDirectReadBytes;
      return okStatus();
    };
    auto at = [&](int j) { return chainRank(last, j, n); };
    const char *a = nullptr, *b = nullptr;
    COLL_CHECK(get(at(0), 0, &a));
    COLL_CHECK(get(at(1), 1, &b));
    if (n == 2) {
      k.final(d, a, b, len, n);
      continue;
    }
    k.reduce(d, a, b, len);
    for (int j = 2; j < n; ++j) {
      COLL_CHECK(get(at(j), j % 2, &b));
      if (j < n - 1) k.reduce(d, d, b, len);
      else k.final(d, d, b, len, n);
    }
  }
  return okStatus();
}

// A direct round that reads the peers' buffers, announced to them (mailbox.h): a peer
// that gave up meanwhile has handed its buffers back.
Status OneShot::readPhase(int round) {
  if (round == rounds_ - 1) return okStatus();  // "done reading": nothing left to do
  Mailboxes& mb = *ctx_.state->mailboxes;
  if (round == 0) resolveWindows();
  const int gone = mb.beginReading(seqs_[round]);
  if (gone >= 0) return withdrawnError(gone);
  Status st = directPhase(round);
  mb.endReading();
  return st;
}

// Where the peers' buffers lie in shared windows mapped here (the ids they published).
void OneShot::resolveWindows() {
  if (!ctx_.state->windows.any()) return;
  views_.assign(2 * static_cast<size_t>(ctx_.nranks), WindowPart{});
  for (int r = 0; r < ctx_.nranks; ++r) {
    if (r == ctx_.rank) continue;
    const Ptrs& p = ptrs_[static_cast<size_t>(r)];
    const uint64_t ids[2] = {p.sendWin, p.recvWin};
    for (int k = 0; k < 2; ++k) {
      std::shared_ptr<const SharedWindow> w = ids[k] ? ctx_.state->windows.find(ids[k]) : nullptr;
      if (!w) continue;  // none, or deregistered here: read as other memory
      views_[2 * static_cast<size_t>(r) + static_cast<size_t>(k)] = w->parts[static_cast<size_t>(r)];
      held_.push_back(std::move(w));
    }
  }
}

// Rank's bytes [remote, remote + bytes) as mapped here, or null where they are not in a
// shared window of its (they are read with readPeer).
const char* OneShot::mapped(int rank, const char* remote, size_t bytes) const {
  if (views_.empty()) return nullptr;
  const uint64_t at = reinterpret_cast<uintptr_t>(remote);
  const WindowPart* v = &views_[2 * static_cast<size_t>(rank)];
  const char* p = v[0].find(at, bytes);
  return p ? p : v[1].find(at, bytes);
}

Status OneShot::withdrawnError(int peer) const {
  return remoteError("rank " + std::to_string(peer) + " gave up " + od_.describe() +
                     " (its call failed) while this rank ran it");
}

void OneShot::abandon() {
  if (mode_ != Mode::kDirectRead || !published_ || complete_) return;
  Mailboxes& mb = *ctx_.state->mailboxes;
  const std::span<const uint32_t> rounds(seqs_, static_cast<size_t>(rounds_));
  // Once our "done reading" flag is out, peers may still need it to finish.
  mb.withdraw(rounds, round_ == rounds_ - 1 ? seqs_[round_] : 0);
  const std::span<const uint32_t> reads = rounds.first(static_cast<size_t>(rounds_ - 1));
  // Readers finish a bounded copy; a peer process that died while reading is not waited for.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int r; (r = mb.peerReading(reads)) >= 0;) {
    if (mb.pid(r) != getpid() && ::kill(mb.pid(r), 0) != 0 && errno == ESRCH) break;
    if (std::chrono::steady_clock::now() > deadline) {
      COLL_WARN(COLL, "rank %d: rank %d still reads this rank's buffers 30 s after %s was given up", ctx_.rank, r,
                od_.describe().c_str());
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status OneShot::directPhase(int round) {
  const Mailboxes& mb = *ctx_.state->mailboxes;
  const int n = ctx_.nranks, me = ctx_.rank;
  const size_t bytes = od_.count * es_;
  char* out = static_cast<char*>(od_.recvbuff);
  const char* in = static_cast<const char*>(od_.sendbuff);
  auto sendOf = [&](int r) { return r == me ? in : reinterpret_cast<const char*>(ptrs_[static_cast<size_t>(r)].send); };
  auto copyIn = [&](int r, char* dst, const char* remote, size_t len) -> Status {
    const char* local = r == me || mb.pid(r) == getpid() ? remote : mapped(r, remote, len);
    if (!local) return mb.readPeer(r, dst, remote, len);
    if (dst != local) hostCopy(dst, local, len);
    return okStatus();
  };
  switch (od_.kind) {
    case CollKind::kAllGather:
      for (int j = 0; j < n; ++j) {
        int r = (me + j) % n;  // own block first, then the others in ring order
        COLL_CHECK(copyIn(r, out + static_cast<size_t>(r) * bytes, sendOf(r), bytes));
      }
      return okStatus();
    case CollKind::kBroadcast: return copyIn(od_.root, out, sendOf(od_.root), bytes);
    case CollKind::kReduce:
      if (me != od_.root) return okStatus();
      return reduceDirect(out, sendOf, od_.count, od_.root);
    case CollKind::kReduceScatter: {
      const size_t off = static_cast<size_t>(me) * bytes;
      return reduceDirect(
          out, [&](int r) { return sendOf(r) + off; }, od_.count, me);
    }
    case CollKind::kAllReduce: {
      auto block = [&](int b, size_t* begin) {
        *begin = partBegin(od_.count, n, b);
        return partBegin(od_.count, n, b + 1) - *begin;
      };
      size_t begin;
      if (round == 0) {
        size_t len = block(me, &begin);
        if (len == 0) return okStatus();
        const size_t off = begin * es_;
        return reduceDirect(
            out + off, [&](int r) { return sendOf(r) + off; }, len, me);
      }
      for (int j = 1; j < n; ++j) {  // round 1: the other finished blocks
        int r = (me + j) % n;
        size_t len = block(r, &begin);
        if (len == 0) continue;
        const char* theirs = reinterpret_cast<const char*>(ptrs_[static_cast<size_t>(r)].recv);
        COLL_CHECK(copyIn(r, out + begin * es_, theirs + begin * es_, len * es_));
      }
      return okStatus();
    }
    default: return internalError("no direct algorithm for " + od_.describe());
  }
}

// Ring data from a peer that is legitimately ahead (it finished this operation and
// started a ring one) was written after that peer saw every flag of this operation, so
// then every flag is visible here too. Otherwise the ranks disagree.
bool OneShot::allArrivedNow() const {
  for (int r = 0; r < ctx_.nranks; ++r)
    if (r != ctx_.rank && !ctx_.state->mailboxes->arrived(r, seqs_[round_])) return false;
  return true;
}

// This rank's input at byte `off` for a reduction into dst: the caller's buffer where the
// chain reads it before writing dst over it (out of place, or two ranks), else its copy
// in our mailbox. Our mailbox's line may still be on its way back from the peers that
// read it last: a load from it would wait that long.
const char* OneShot::ownInput(size_t off, const char* dst) const {
  const char* in = static_cast<const char*>(od_.sendbuff) + off;
  if (ctx_.nranks == 2 || in != dst) return in;
  return ctx_.state->mailboxes->data(ctx_.rank, seqs_[0]) + off;
}

void OneShot::finishMailbox() {
  Mailboxes& mb = *ctx_.state->mailboxes;
  const int n = ctx_.nranks, me = ctx_.rank;
  const size_t bytes = od_.count * es_;
  char* out = static_cast<char*>(od_.recvbuff);
  switch (od_.kind) {
    case CollKind::kAllReduce: {
      const char* own = ownInput(0, out);
      reduceAllBlocks(od_, es_, n, [&](int r) { return r == me ? own : mb.data(r, seqs_[0]); });
      break;
    }
    case CollKind::kReduce:
      if (me == od_.root) {
        const char* own = ownInput(0, out);
        reduceChain(
            hostReduceKernels(od_.dtype, od_.op), out, [&](int r) { return r == me ? own : mb.data(r, seqs_[0]); },
            od_.count, n, od_.root);
      }
      break;
    case CollKind::kReduceScatter: {
      const size_t off = static_cast<size_t>(me) * bytes;
      const char* own = ownInput(off, out);
      reduceChain(
          hostReduceKernels(od_.dtype, od_.op), out, [&](int r) { return r == me ? own : mb.data(r, seqs_[0]) + off; },
          od_.count, n, me);
      break;
    }
    case CollKind::kBroadcast:
      if (me != od_.root) hostCopy(out, mb.data(od_.root, seqs_[0]), bytes);
      else if (out != od_.sendbuff) hostCopy(out, od_.sendbuff, bytes);
      break;
    case CollKind::kAllGather:
      for (int r = 0; r < n; ++r) {
        char* dst = out + static_cast<size_t>(r) * bytes;
        const char* src = r == me ? static_cast<const char*>(od_.sendbuff) : mb.data(r, seqs_[0]);
        if (dst != src) hostCopy(dst, src, bytes);
      }
      break;
    default: break;
  }
}

Status OneShot::pollRingPass(bool* done, WaitTarget* wait) {
  SendConnector& send = ctx_.state->pair.send ? *ctx_.state->pair.send : *ctx_.ring0->send;
  RecvConnector& recv = ctx_.state->pair.recv ? *ctx_.state->pair.recv : *ctx_.ring0->recv;
  const int n = ctx_.nranks, me = ctx_.rank;
  const size_t bytes = od_.count * es_;
  char* scratch = ctx_.state->scratch.data();
  COLL_CHECK(send.progress());
  if (sent_ == 0) {  // send before anything else: the peers wait for it
    if (!send.ready()) {
      blockedPeer_ = send.peer();
      *wait = send.waitTarget();
      return okStatus();
    }
    hostCopy(send.slot(), scratch + static_cast<size_t>(me) * bytes, bytes);
    send.post(bytes);
    COLL_CHECK(send.progress());
    sent_ = 1;
  }
  COLL_CHECK(recv.progress());
  while (received_ < n - 1) {
    if (!recv.ready()) {
      COLL_CHECK(recv.progress());
      if (!recv.ready()) {
        blockedPeer_ = recv.peer();
        *wait = recv.waitTarget();
        return okStatus();
      }
    }
    const int j = received_ + 1;  // the j-th block in comes from ring position me - j
    const bool forward = j <= n - 2;
    if (recv.size() != bytes)
      return invalidUsage("rank " + std::to_string(recv.peer()) + " sent " + std::to_string(recv.size()) +
                          " bytes where " + std::to_string(bytes) +
                          " were expected: the ranks called different operations or counts");
    if (forward && !send.ready()) {
      blockedPeer_ = send.peer();
      *wait = send.waitTarget();
      return okStatus();
    }
    const int origin = ctx_.ring->rankAt(ctx_.ring->pos - j);
    hostCopy(scratch + static_cast<size_t>(origin) * bytes, recv.slot(), bytes);
    if (forward) {
      hostCopy(send.slot(), recv.slot(), bytes);
      send.post(bytes);
      COLL_CHECK(send.progress());
      ++sent_;
    }
    recv.release();
    ++received_;
  }
  COLL_CHECK(send.progress());
  if (!send.flushed()) {
    blockedPeer_ = send.peer();
    *wait = send.waitTarget();
    return okStatus();
  }
  blockedPeer_ = -1;
  finishRingPass();
  *done = true;
  return okStatus();
}

void OneShot::finishRingPass() {
  const size_t bytes = od_.count * es_;
  const char* scratch = ctx_.state->scratch.data();
  reduceAllBlocks(od_, es_, ctx_.nranks, [&](int r) { return scratch + static_cast<size_t>(r) * bytes; });
}

}  // namespace coll

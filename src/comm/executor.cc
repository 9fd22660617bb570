#include "comm/executor.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "algorithms/oneshot.h"
#include "comm/comm.h"
#include "comm/lane.h"
#include "comm/profile.h"
#include "comm/watch.h"
#include "bootstrap/failure.h"
#include "base/log.h"
#include "base/wait.h"
#include "kernels/host_copy.h"
#include "kernels/encoded_slice.h"

namespace coll {

void hostSlice(uint8_t flags, const ReduceKernels* kernels, size_t elemSize, const char* in, const char* src, char* dst,
               char* out, size_t len, int nranks) {
  const size_t n = len / elemSize;
  const bool final = flags & kFinal;
  // Large operations stream their destination writes (kernels/host_copy.h); the result
  // is then made in the send slot (in cache) and streamed from there.
  const bool stream = flags & kStream;
  auto toDst = [&](const char* from) {
    if (stream) ntCopy(dst, from, len);
    else hostCopy(dst, from, len);
  };

  if (in && src) {
    char* target = dst && !(stream && out) ? dst : out;
    if (final) kernels->final(target, in, src, n, nranks);
    else kernels->reduce(target, in, src, n);
    if (dst && out) {
      if (target == dst) hostCopy(out, dst, len);
      else toDst(out);
    }
  } else if (in) {
    if (dst) toDst(in);
    if (out) hostCopy(out, in, len);
  } else if (src) {
    if (dst) {
      if (final) kernels->scale(dst, src, n, nranks);
      else if (dst != src) toDst(src);
    }
    if (out) hostCopy(out, src, len);
  }
}

namespace {

// Where the caller's memory already holds exactly what the slice at `off` of step s sends,
// so a connector that can (net) sends it from there instead of from a copy in its slot:
// the result the slice writes to the destination, or a source the slice does not
// overwrite (Avg's final scaling in place would). Null: copy into the slot.
//
// The memory must stay unchanged until the send has left (connector.h postInPlace). Within
// an operation the schedules guarantee it: a region sent from is written again only by
// data that depends on it (in place, an allreduce's or a tree's result for a block comes
// back only after this rank's part of it arrived), and every other write goes to a
// different block. Between operations of a program the executor waits for the sends to
// leave first (Program::inPlacePending). Point-to-point sends copy (a group may receive
// into the buffer it sends from) unless their memory is registered (collCommRegister):
// as with NCCL's registered buffers, the caller then keeps it unchanged until the group
// has completed.
const char* inPlaceSource(const Program& p, const Step& s, size_t off) {
  if (!s.send || !s.send->canPostInPlace() || s.encoding != kEncodingNone) return nullptr;
  if (p.ops && (*p.ops)[s.op].kind == CollKind::kPeerSend && !(*p.ops)[s.op].registered) return nullptr;
  if ((s.flags & kRecv) && (s.flags & kDst)) return s.dst + off;
  if ((s.flags & kSrc) && !(s.flags & kRecv) && !((s.flags & kFinal) && (s.flags & kDst))) return s.src + off;
  return nullptr;
}

// Does one slice of step s at byte offset off, of length len; the send slot is left
// alone when the slice is sent from `inPlace` (inPlaceSource).
void doSlice(const Step& s, size_t off, size_t len, int nranks, const char* inPlace) {
  if (s.encoding != kEncodingNone) {
    hostEncodedSlice(s.flags, s.encoding, s.kernels, s.recv ? s.recv->slot() : nullptr,
                     (s.flags & kSrc) ? reinterpret_cast<const float*>(s.src + off) : nullptr,
                     (s.flags & kDst) ? reinterpret_cast<float*>(s.dst + off) : nullptr,
                     s.send ? s.send->slot() : nullptr, len / sizeof(float), nranks);
    return;
  }
  hostSlice(s.flags, s.kernels, s.elemSize, s.recv ? s.recv->slot() : nullptr, (s.flags & kSrc) ? s.src + off : nullptr,
            (s.flags & kDst) ? s.dst + off : nullptr, s.send && !inPlace ? s.send->slot() : nullptr, len, nranks);
}

// Pushes out everything the program's send connectors hold. *flushed is false (and the
// lane's wait target set) while some of it has not left this rank.
Status flushSends(Program& p, bool* flushed) {
  *flushed = true;
  for (SendConnector* sc : p.flushTargets) {
    COLL_CHECK(sc->progress());
    if (!sc->flushed()) {
      p.blockedOn = sc->waitTarget();
      p.blockedFor = Awaiting::kDelivery;
      p.blockedPeer = sc->peer();
      *flushed = false;
      return okStatus();
    }
  }
  return okStatus();
}

// Pushes out what earlier steps queued on any of the lane's send connectors. A net
// connector sends only when progressed, and a later step may wait on another connector
// while a peer waits for those queued bytes: a tree rank that sent its part up and now
// waits for the result to come down, say, when the socket took only part of the slice.
// (The ring never hit this: every step sends on the same connector, which each pass
// progresses.) While such bytes remain queued, the lane must not sleep on the connector
// it waits for: it polls instead (an empty wait target yields). No-op for shm.
Status pumpSends(Program& p, const SendConnector* current) {
  bool pending = false;
  for (SendConnector* sc : p.flushTargets) {
    if (sc == current) continue;  // progressed at the top of every pass
    COLL_CHECK(sc->progress());
    pending |= !sc->flushed();
  }
  if (pending) p.blockedOn = WaitTarget{};
  return okStatus();
}

// Advances p as far as it can. Sets *moved when something happened; *done when finished.
Status advance(Program& p, bool* moved, bool* done) {
  while (p.cur < p.steps.size()) {
    const Step& s = p.steps[p.cur];
    if (p.prof.on) profSliceReached(p, s);
    // Before the program's next operation, which may write the caller's memory that
    // slices of the previous one are being sent from (inPlaceSource), those must be out.
    if (p.inPlacePending && p.off == 0 && p.cur > 0 && s.op != p.steps[p.cur - 1].op) {
      bool flushed = false;
      COLL_CHECK(flushSends(p, &flushed));
      if (!flushed) return okStatus();
      p.inPlacePending = false;
    }
    if (s.recv) COLL_CHECK(s.recv->progress());
    if (s.send) COLL_CHECK(s.send->progress());
    const size_t len = std::min(p.sliceFor(s), s.bytes - p.off);
    const size_t encodedLen = s.encoding != kEncodingNone ? encodedBytes(s.encoding, len / sizeof(float)) : len;
    if (s.recv && !s.recv->ready()) {
      p.blockedOn = s.recv->waitTarget();
      p.blockedFor = Awaiting::kData;
      p.blockedPeer = s.recv->peer();
      return pumpSends(p, s.send);
    }
    if (s.send && !s.send->ready()) {
      p.blockedOn = s.send->waitTarget();
      p.blockedFor = Awaiting::kRoom;
      p.blockedPeer = s.send->peer();
      return pumpSends(p, s.send);
    }
    if (s.recv && s.recv->size() != encodedLen)
      return invalidUsage("rank " + std::to_string(s.recv->peer()) + " sent " + std::to_string(s.recv->size()) +
                          " bytes where " + std::to_string(encodedLen) +
                          " were expected: the ranks called different operations or counts");
    const char* inPlace = inPlaceSource(p, s, p.off);
    doSlice(s, p.off, len, p.nranks, inPlace);
    if (s.recv) s.recv->release();
    if (s.send) {
      if (inPlace) {
        s.send->postInPlace(inPlace, len);
        p.inPlacePending = true;
      } else {
        s.send->post(encodedLen);
      }
      // Push it out now: the next step may not use this connector (net only; shm no-op).
      COLL_CHECK(s.send->progress());
    }
    *moved = true;
    p.off += len;
    if (p.off == s.bytes) {
      ++p.cur;
      p.off = 0;
    }
    if (p.prof.on) profSliceDone(p, s, encodedLen);
  }
  bool flushed = false;
  COLL_CHECK(flushSends(p, &flushed));
  *done = flushed;
  return okStatus();
}

// What a lane is doing: for stall reports and as the context of its errors.
std::string laneState(const Program& p) {
  std::string s = "rank " + std::to_string(p.rank) + " " + p.lane;
  if (p.ops && p.cur < p.steps.size())
    s += ", " + (*p.ops)[p.steps[p.cur].op].describe() + " step " + std::to_string(p.cur + 1) + "/" +
         std::to_string(p.steps.size()) + " at byte " + std::to_string(p.off);
  else if (p.ops && !p.ops->empty()) s += ", " + p.ops->back().describe() + " draining";
  if (p.blockedPeer >= 0)
    s += ", waiting for " + std::string(awaitingName(p.blockedFor)) + " rank " + std::to_string(p.blockedPeer);
  return s;
}

Status laneError(const Program& p, Status st) { return st.prefix(laneState(p) + ": "); }

}  // namespace

namespace {

// A ring lane waiting on a peer that has already published the next one-shot operation:
// that peer finished (or never ran) this rank's ring operation, so the data will never
// come — the ranks chose different algorithms because they called different counts.
// (Every one-shot of this launch was numbered when its program was built, so a peer's
// flag beyond them is not part of this launch.)
Status mailboxIntrusion(const Program& p) {
  collComm* c = p.comm;
  if (!c->oneShot.mailboxes || p.blockedPeer < 0 || p.blockedPeer == c->rank) return okStatus();
  uint32_t next = nextMailSeq(c->oneShot.mailSeq);
  if (!c->oneShot.mailboxes->arrived(p.blockedPeer, next)) return okStatus();
  // The peer wrote everything it owed this lane before publishing: look again.
  if (p.cur < p.steps.size()) {
    const Step& s = p.steps[p.cur];
    const bool waitsForData = p.blockedFor == Awaiting::kData;
    if (waitsForData ? (s.recv && s.recv->ready()) : (s.send && s.send->ready())) return okStatus();
  }
  return invalidUsage("rank " + std::to_string(p.blockedPeer) +
                      " started a one-shot operation instead of this ring operation: "
                      "the ranks called different operations or counts");
}

// oneShotIntrusion for a program: a step receiving on channel 0 waits on the ring's connection.
Status oneShotIntrusionInLane(const Program& p, const Waiter& waiter, bool now = false) {
  collComm* c = p.comm;
  if (!c->oneShot.pair.recv || p.cur >= p.steps.size()) return okStatus();
  const Step& s = p.steps[p.cur];
  if (s.recv && s.recv == c->hostConns.channels[0].recv.get() && (now || p.blockedFor == Awaiting::kData))
    return oneShotIntrusion(c, false, waiter, now);
  return okStatus();
}

}  // namespace

Status oneShotIntrusion(collComm* c, bool waitingOnOneShot, const Waiter& waiter, bool now) {
  constexpr double kGraceS = 2.0;
  if (!c->oneShot.pair.recv || c->hostConns.channels.empty() || (!now && waiter.idleSeconds() < kGraceS))
    return okStatus();
  RecvConnector* other = waitingOnOneShot ? c->hostConns.channels[0].recv.get() : c->oneShot.pair.recv.get();
  if (!other) return okStatus();
  if (!other->progress().ok() && !other->ready()) return okStatus();
  if (!other->ready()) return okStatus();
  return invalidUsage("rank " + std::to_string(other->peer()) +
                      (waitingOnOneShot ? " sent ring data while this rank waits in a one-shot (LL) operation"
                                        : " sent a one-shot (LL) message while this rank waits in a ring operation") +
                      ": the ranks called different operations or counts");
}

Status failLane(collComm* c, const char* lane, const OpDesc& od, int peer, Status st) {
  if (!c->abort->raised()) st = recordFailure(*c->abort, std::move(st));
  std::string where = "rank " + std::to_string(c->rank) + " " + lane + ", " + od.describe();
  if (peer >= 0) where += ", waiting for data from rank " + std::to_string(peer);
  return st.prefix(where + ": ");
}

namespace {

// A Program as a lane.
class ProgramLane : public Lane {
 public:
  explicit ProgramLane(Program& p) : p_(p) { profLaneBegin(p_); }
  ~ProgramLane() override { profLaneEnd(p_); }
  collComm* comm() const override { return p_.comm; }
  Status poll(bool* moved, bool* done) override { return advance(p_, moved, done); }
  WaitTarget waitTarget() const override { return p_.blockedOn; }
  Status diagnose(const Waiter& waiter, bool failed) const override {
    if (failed) return oneShotIntrusionInLane(p_, waiter, true);
    COLL_RETURN_IF_FAILED(mailboxIntrusion(p_));
    return oneShotIntrusionInLane(p_, waiter);
  }
  std::string describe() const override { return laneState(p_); }
  int blockedPeer() const override { return p_.blockedPeer; }
  Status fail(Status st, bool stalled) const override {
    if (!stalled) return laneError(p_, recordFailure(*p_.comm->abort, std::move(st)));
    if (!p_.comm->abort->raised()) p_.comm->abort->set(st.code(), st.message());
    return laneError(p_, std::move(st));
  }

 private:
  Program& p_;
};

// A one-shot operation as a lane.
class OneShotLane : public Lane {
 public:
  // Runs *os, which outlives the lane; `keep` may own it.
  OneShotLane(collComm* c, OneShot* os, std::shared_ptr<OneShot> keep = nullptr)
      : c_(c), os_(os), keep_(std::move(keep)) {}
  // A lane dropped before its operation completed: the call fails and returns.
  ~OneShotLane() override {
    if (started_) os_->abandon();
  }
  collComm* comm() const override { return c_; }
  // Publishes this rank's contribution (poll does it first where this was not called).
  Status begin() {
    COLL_CHECK(os_->start());
    started_ = true;
    return okStatus();
  }
  Status poll(bool* moved, bool* done) override {
    if (!started_) COLL_CHECK(begin());
    wait_ = WaitTarget{};
    COLL_CHECK(os_->poll(done, &wait_));
    *moved |= *done;
    return okStatus();
  }
  WaitTarget waitTarget() const override { return wait_; }
  Status diagnose(const Waiter& waiter, bool failed) const override {
    // Across hosts it waits on the LL connection: the peer may have sent ring data
    // instead (or, when it failed, given up first on that mismatch).
    return os_->ringPassMode() ? oneShotIntrusion(c_, true, waiter, failed) : okStatus();
  }
  std::string describe() const override {
    std::string s = "rank " + std::to_string(c_->rank) + " one-shot, " + os_->op().describe();
    if (os_->blockedPeer() >= 0) s += ", waiting for data from rank " + std::to_string(os_->blockedPeer());
    return s;
  }
  int blockedPeer() const override { return os_->blockedPeer(); }
  Status fail(Status st, bool) const override {
    return failLane(c_, "one-shot", os_->op(), os_->blockedPeer(), std::move(st));
  }

 private:
  collComm* c_;
  OneShot* os_;
  std::shared_ptr<OneShot> keep_;
  bool started_ = false;
  WaitTarget wait_;
};

// Lanes run one after another (channel 0 of a group whose one-shot operations sit between
// ring operations on its connectors and mailboxes: call order is kept).
class SequenceLane : public Lane {
 public:
  explicit SequenceLane(std::vector<std::unique_ptr<Lane>> lanes) : lanes_(std::move(lanes)) {}
  collComm* comm() const override { return lanes_.front()->comm(); }
  Status poll(bool* moved, bool* done) override {
    while (cur_ < lanes_.size()) {
      bool finished = false;
      COLL_CHECK(lanes_[cur_]->poll(moved, &finished));
      if (!finished) return okStatus();
      *moved = true;
      ++cur_;
    }
    *done = true;
    return okStatus();
  }
  WaitTarget waitTarget() const override { return current().waitTarget(); }
  Status diagnose(const Waiter& waiter, bool failed) const override { return current().diagnose(waiter, failed); }
  std::string describe() const override { return current().describe(); }
  int blockedPeer() const override { return current().blockedPeer(); }
  Status fail(Status st, bool stalled) const override { return current().fail(std::move(st), stalled); }

 private:
  const Lane& current() const { return *lanes_[std::min(cur_, lanes_.size() - 1)]; }
  std::vector<std::unique_ptr<Lane>> lanes_;
  size_t cur_ = 0;
};

// How long lanes stay stalled before their communicators' hang-report state says where
// they wait (comm/watch.h): once per stall, so a short wait costs nothing.
constexpr double kStallNoteS = 0.5;

// Each communicator's first stalled lane, for the hang report.
void noteStall(std::span<Lane* const> live) {
  std::vector<collComm*> seen;
  for (Lane* l : live) {
    if (std::find(seen.begin(), seen.end(), l->comm()) != seen.end()) continue;
    seen.push_back(l->comm());
    watchStalled(l->comm(), l->blockedPeer(), l->describe());
  }
}

// A lane waiting on a rank that left (collCommAbort) fails, as a closed socket fails a
// lane over the net: over shared memory nothing else would tell it. The failure is
// announced, so that the root fails the other ranks, whose lanes may wait on this one.
// Only once a poll made after the rank was seen gone still found nothing (*goneSeen set
// by the pass before): the rank may have handed over its data and then left between
// the last poll and this check, and what it handed over is seen by the next poll.
Status waitsOnGoneRank(Lane* l, bool* goneSeen) {
  collComm* c = l->comm();
  const int peer = l->blockedPeer();
  if (peer < 0 || peer == c->rank || !c->abort->rankGone(peer) || c->abort->raised()) return okStatus();
  if (!*goneSeen) {
    *goneSeen = true;
    return okStatus();
  }
  Status st = remoteError("rank " + std::to_string(peer) + " left the communicator (" + c->abort->peerGoneReason() +
                          ") while rank " + std::to_string(c->rank) + " waited for it");
  c->bootstrap->announceFailure(st.message());
  return st;
}

// COLL_STALL_WARN_S: where every lane stands, once per stall, and a job-wide report
// asked of each communicator's root.
void reportStall(std::span<Lane* const> live, const Waiter& waiter) {
  std::vector<collComm*> seen;
  for (Lane* l : live) {
    COLL_WARN(COLL, "stalled for %.0f s: %s", waiter.idleSeconds(), l->describe().c_str());
    if (std::find(seen.begin(), seen.end(), l->comm()) == seen.end()) seen.push_back(l->comm());
  }
  for (collComm* c : seen) watchAskReport(c);
}

// Nothing could move: the first lane whose stall is an error, failed; ok when none is.
Status checkStalled(std::span<Lane* const> live, const Waiter& waiter, std::chrono::steady_clock::time_point started,
                    bool* goneSeen, collComm** failedComm) {
  for (Lane* l : live) {
    Status st = waitsOnGoneRank(l, goneSeen);
    if (st.ok()) st = fatalWhileStalled(*l->comm(), waiter, started);
    if (st.ok()) st = l->diagnose(waiter, false);
    if (!st.ok()) {
      if (failedComm) *failedComm = l->comm();
      return l->fail(std::move(st), true);
    }
  }
  return okStatus();
}

// A lane's poll failed with st: the error, with the cause its diagnosis finds.
Status pollFailed(Lane& lane, const Waiter& waiter, Status st, collComm** failedComm) {
  Status cause = lane.diagnose(waiter, true);
  if (failedComm) *failedComm = lane.comm();
  return lane.fail(cause.ok() ? std::move(st) : std::move(cause), false);
}

}  // namespace

Status runLanes(std::span<Lane*> lanes, collComm** failedComm) {
  if (lanes.empty()) return okStatus();
  Waiter waiter(lanes.front()->comm()->spinNs);
  // Read at the first pass that makes no progress: the smallest operations, done before
  // they ever wait, read no clock. Timeouts count from there.
  std::chrono::steady_clock::time_point started{};
  const double stallWarnS = lanes.front()->comm()->stallWarnS;
  bool stallReported = false, stallNoted = false, goneSeen = false;
  size_t n = lanes.size();  // lanes[0, n) are live; finished ones are swapped past n
  while (n > 0) {
    const std::span<Lane*> live = lanes.first(n);
    bool moved = false;
    for (size_t i = 0; i < n;) {
      bool done = false;
      Status st = live[i]->poll(&moved, &done);
      if (!st.ok()) return pollFailed(*live[i], waiter, std::move(st), failedComm);
      if (!done) {
        ++i;
        continue;
      }
      std::swap(live[i], live[--n]);
      moved = true;
    }
    if (moved) {
      waiter.reset();
      stallReported = stallNoted = goneSeen = false;
      continue;
    }
    if (!stallNoted && (waiter.idlePasses() & 63) == 63 && waiter.idleSeconds() > kStallNoteS) {
      stallNoted = true;
      noteStall(lanes.first(n));
    }
    if (stallWarnS > 0 && !stallReported && waiter.idleSeconds() > stallWarnS) {
      stallReported = true;
      reportStall(lanes.first(n), waiter);
    }
    if (started == std::chrono::steady_clock::time_point{}) started = std::chrono::steady_clock::now();
    COLL_RETURN_IF_FAILED(checkStalled(lanes.first(n), waiter, started, &goneSeen, failedComm));
    waiter.idle(lanes.front()->waitTarget());
  }
  return okStatus();
}

std::unique_ptr<Lane> programLane(Program& p) { return std::make_unique<ProgramLane>(p); }

std::unique_ptr<Lane> oneShotLane(collComm* c, std::shared_ptr<OneShot> os) {
  OneShot* p = os.get();
  return std::make_unique<OneShotLane>(c, p, std::move(os));
}

std::unique_ptr<Lane> sequenceLane(std::vector<std::unique_ptr<Lane>> lanes) {
  return std::make_unique<SequenceLane>(std::move(lanes));
}

// Polls of a solo one-shot before it enters the progress loop, and the spins on its
// peers' flags between two of them (a poll that cannot move costs several times a
// spin, and would see the flag that much later).
constexpr int kOneShotQuickPolls = 32;
constexpr int kOneShotQuickSpins = 16;

Status runOneShot(collComm* c, const OneShotContext& ctx, const OpDesc& od, collComm** failedComm) {
  // Nothing on the heap: this is the path of the smallest operations. The contribution
  // is published before the progress loop is set up: peers waiting for it see it sooner.
  OneShot os(ctx, od);
  OneShotLane lane(c, &os);
  if (Status st = lane.begin(); !st.ok()) return pollFailed(lane, Waiter(c->spinNs), std::move(st), failedComm);
  // Most finish within a few polls of the peers' mailboxes: those are made here, without
  // the loop's stall checks (at most ~10 us go by before they run). A thread whose peers
  // share its CPU polls once: more polls only keep the CPU from them (4 processes on 2
  // vCPUs: an 8-byte PyTorch all_reduce 88 -> 62 us, docs/PERFORMANCE.md).
  const int quickPolls = spinBudgetReduced(c->spinNs) ? 1 : kOneShotQuickPolls;
  for (int pass = 0; pass < quickPolls; ++pass) {
    bool moved = false, done = false;
    if (Status st = lane.poll(&moved, &done); !st.ok())
      return pollFailed(lane, Waiter(c->spinNs), std::move(st), failedComm);
    if (done) return okStatus();
    for (int spin = 0; spin < kOneShotQuickSpins && !os.mayMove(); ++spin) cpuRelax();
  }
  Lane* lanes[] = {&lane};
  return runLanes(lanes, failedComm);
}

}  // namespace coll

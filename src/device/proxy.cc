#include "device/proxy.h"

#include <chrono>

#include "collectives/config.h"
#include "bootstrap/failure.h"
#include "base/log.h"
#include "base/wait.h"
#include "device/device_comm.h"
#include "device/device_exec.h"
#if COLL_HAVE_CUDA
#include "cuda/gpu.h"
#endif

namespace coll {

namespace {

// A lane's report turned into an error naming rank, lane, operation and peer.
Status laneStatus(DeviceComm* c, const PendingLaunch& p, const PendingLaunch::LaneInfo& lane,
                  const DeviceLaneResult& r) {
  if (r.code == kDeviceDone) return okStatus();
  std::string where = "rank " + std::to_string(c->core->rank) + " " + lane.name;
  if (r.step < lane.steps.size()) where += ", " + p.stepOp(lane, r.step);
  const std::string peer = std::to_string(r.peer);
  switch (r.code) {
    case kDeviceSizeMismatch:
      return invalidUsage(where + ": rank " + peer + " sent " + std::to_string(r.got) + " bytes where " +
                          std::to_string(r.want) + " were expected: the ranks called different operations or counts");
    case kDeviceAborted: {
      Status cause = c->core->abort->raised() ? c->core->abort->status() : remoteError("aborted");
      return cause.prefix(where + ", waiting on rank " + peer + ": ");
    }
    case kDeviceYielded:
      return internalError(where + ": gave its block up to run again, but the launch was not run again");
    default:
      return internalError(where + ": the device executor stopped without a result (code " + std::to_string(r.code) +
                           ")");
  }
}

}  // namespace

std::string PendingLaunch::stepOp(const LaneInfo& l, uint32_t step) const {
  if (step >= l.steps.size() || !ops || l.steps[step].op >= ops->size()) return "";
  return (*ops)[l.steps[step].op].describe();
}

std::string PendingLaunch::stepPeers(const LaneInfo& l, uint32_t step) const {
  if (step >= l.steps.size()) return "";
  const StepInfo& s = l.steps[step];
  std::string out;
  if (s.from >= 0) out = "receiving from rank " + std::to_string(s.from);
  if (s.to >= 0) out += std::string(out.empty() ? "" : ", ") + "sending to rank " + std::to_string(s.to);
  return out.empty() ? "local copy" : out;
}

Status DeviceProxy::init() {
#if COLL_HAVE_CUDA
  if (!c_->emulate) {
    COLL_ASSIGN(gpu::MappedHostBuffer word, gpu::MappedHostBuffer::allocate(sizeof(uint32_t)));
    abortHost_ = static_cast<uint32_t*>(word.host());  // zeroed by allocate
    abortDevice_ = reinterpret_cast<const uint32_t*>(word.device());
    abortMemory_ = std::make_shared<gpu::MappedHostBuffer>(word);
    return okStatus();
  }
#endif
  auto word = std::make_shared<uint32_t>(0);
  abortHost_ = word.get();
  abortDevice_ = abortHost_;
  abortMemory_ = word;
  return okStatus();
}

DeviceProxy::~DeviceProxy() {
  quiesce(c_->core->abort->raised());
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DeviceProxy::submit(std::shared_ptr<PendingLaunch> p) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(std::move(p));
  ++submitted_;
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
}

Status DeviceProxy::wait(const std::shared_ptr<PendingLaunch>& p) {
  std::unique_lock<std::mutex> lock(mu_);
  ++waiters_;  // the proxy polls busily while someone waits
  cv_.notify_all();
  doneCv_.wait(lock, [&] { return p->finished; });
  --waiters_;
  return p->status;
}

void DeviceProxy::quiesce(bool abort) {
  if (abort && abortHost_) __atomic_store_n(abortHost_, 1u, __ATOMIC_RELEASE);
  std::unique_lock<std::mutex> lock(mu_);
  ++waiters_;
  cv_.notify_all();
  doneCv_.wait(lock, [&] { return pending_.empty(); });
  --waiters_;
}

void DeviceProxy::logTiming(const PendingLaunch& p) const {
  if (p.lanes().empty()) return;
  uint64_t start = ~uint64_t{0}, end = 0;
  for (size_t i = 0; i < p.lanes().size(); ++i) {
    start = std::min(start, p.results[i].startNs);
    end = std::max(end, p.results[i].endNs);
  }
  const uint64_t seen = wallNs();
  auto us = [](uint64_t from, uint64_t to) { return (static_cast<double>(to) - static_cast<double>(from)) / 1e3; };
  // The GPU's timer follows the host's clock only roughly (0.4-1.8 ms apart on the H100
  // machines): "queued to first lane start" and "to proxy" carry that offset; the other
  // figures are one clock's.
  COLL_INFO(COLL,
            "device timing: rank %d, %zu lane(s): call to %s %.1f us, to assembled %.1f us, to queued %.1f us; "
            "queued to first lane start %.1f us, lanes ran %.1f us in %u run(s), last lane end to proxy %.1f us",
            c_->core->rank, p.lanes().size(), p.planReused ? "plan found" : "built", us(p.calledNs, p.builtNs),
            us(p.builtNs, p.assembledNs), us(p.assembledNs, p.submittedNs), us(p.submittedNs, start), us(start, end),
            p.completion->runs.load(), us(end, seen));
}

void DeviceProxy::finish(PendingLaunch& p, Status st) {
  if (c_->timing && st.ok()) logTiming(p);
  if (!st.ok() && !c_->core->abort->raised()) {
    // Found here (a size mismatch, a device fault): the peers may wait for this rank's
    // data forever, so they are told.
    (void)recordFailure(*c_->core->abort, st);
    c_->core->bootstrap->announceFailure(st.message());
  }
  if (!st.ok()) COLL_WARN(COLL, "%s", st.message().c_str());
  std::lock_guard<std::mutex> lock(mu_);
  p.status = std::move(st);
  p.finished = true;
}

bool DeviceProxy::pass(std::vector<std::shared_ptr<PendingLaunch>>& live) {
  bool moved = false;
  for (auto& p : live) {
    Status st;
    for (SendConnector* s : p->sends) {
      const bool before = s->flushed();
      if (st.ok()) st = s->progress();
      moved |= before != s->flushed();
    }
    // A receiver publishes one arrival per progress call (net.cc): count what it
    // published, not whether a slot is ready (one may be already, and then the next
    // arrival would look like no progress and the proxy would back off while more
    // arrived messages wait to be published).
    for (RecvConnector* r : p->recvs) {
      const uint32_t before = r->fifo()->ctrl->tail.load(std::memory_order_acquire);
      if (st.ok()) st = r->progress();
      moved |= before != r->fifo()->ctrl->tail.load(std::memory_order_acquire);
    }
    if (!st.ok() && !c_->core->abort->raised())
      (void)recordFailure(*c_->core->abort, st.prefix("rank " + std::to_string(c_->core->rank) + ": "));
  }
  // An aborted or failed communicator: every kernel of it must give up waiting.
  if (c_->core->abort->raised()) __atomic_store_n(abortHost_, 1u, __ATOMIC_RELEASE);
  for (auto& p : live) {
    Status err;
    if (!p->completion->done(&err)) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - p->submitted).count();
      if (c_->core->stallWarnS > 0 && !p->stallReported && waited > c_->core->stallWarnS) reportStall(*p, waited);
      const double limit = c_->core->opTimeoutS.load(std::memory_order_relaxed);
      if (limit > 0 && waited > limit && !c_->core->abort->raised())
        (void)recordFailure(*c_->core->abort,
                            opTimedOut(waited, limit).prefix("rank " + std::to_string(c_->core->rank) + ": "));
      if (waited > kPeerAheadS) checkPeerAhead(*p);  // nothing to scan on the fast path
      continue;
    }
    bool flushed = true;
    for (SendConnector* s : p->sends) flushed &= s->flushed();
    if (!flushed && err.ok() && !c_->core->abort->raised()) continue;  // the last slots are still leaving
    // A lane that failed names the cause; lanes that yielded (and so were not run again)
    // only if none did.
    Status st = err;
    for (bool yielded : {false, true})
      for (size_t i = 0; st.ok() && i < p->lanes().size(); ++i)
        if ((p->results[i].code == kDeviceYielded) == yielded) st = laneStatus(c_, *p, p->lanes()[i], p->results[i]);
    finish(*p, st);
    moved = true;
  }
  return moved;
}

int DeviceProxy::laneWaitingOnPeerAhead(const PendingLaunch& p, uint32_t* step) const {
  const uint32_t next = nextMailSeq(p.mailSeq);
  for (size_t i = 0; i < p.lanes().size(); ++i) {
    if (__atomic_load_n(&p.results[i].code, __ATOMIC_ACQUIRE) == kDeviceDone) continue;
    const uint32_t s = __atomic_load_n(&p.results[i].step, __ATOMIC_RELAXED);
    if (s >= p.lanes()[i].steps.size()) continue;
    const int from = p.lanes()[i].steps[s].from;
    if (from >= 0 && c_->oneShot->mailboxes->arrived(from, next)) {
      *step = s;
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Staged operations (COLL_DEVICE_STAGE_BYTES) run from host memory through the mailboxes.
// A launch older than kPeerAheadS whose lane has then waited that long, in one step, for
// data from a peer whose mailbox shows a round beyond this launch's: the peer finished
// this operation without sending that data, so it called a count on the other side of
// the staging limit.
// Fails the communicator and tells the others, as a size mismatch would.
void DeviceProxy::checkPeerAhead(PendingLaunch& p) {
  if (!c_->oneShot || !c_->oneShot->mailboxes || c_->core->abort->raised()) return;
  uint32_t step = 0;
  const int lane = laneWaitingOnPeerAhead(p, &step);
  const auto now = std::chrono::steady_clock::now();
  if (lane < 0 || lane != p.aheadLane || step != p.aheadStep) {
    p.aheadLane = lane;
    p.aheadStep = step;
    p.aheadSince = now;
    return;
  }
  if (std::chrono::duration<double>(now - p.aheadSince).count() < kPeerAheadS) return;
  const PendingLaunch::LaneInfo& l = p.lanes()[static_cast<size_t>(lane)];
  const std::string peer = std::to_string(l.steps[step].from);
  const Status st = invalidUsage("rank " + peer +
                                 " went on to a later operation (its mailbox shows it) without sending this data: the "
                                 "ranks called different operations or counts (one on either side of "
                                 "COLL_DEVICE_STAGE_BYTES?)");
  (void)recordFailure(*c_->core->abort, st);
  c_->core->bootstrap->announceFailure("rank " + std::to_string(c_->core->rank) + " " + l.name + ", " +
                                       p.stepOp(l, step) + ", waiting for data from rank " + peer + ": " +
                                       st.message());
}

void DeviceProxy::reportStall(PendingLaunch& p, double seconds) {
  p.stallReported = true;
  for (size_t i = 0; i < p.lanes().size(); ++i) {
    const PendingLaunch::LaneInfo& lane = p.lanes()[i];
    const uint32_t code = __atomic_load_n(&p.results[i].code, __ATOMIC_ACQUIRE);
    const uint32_t step = __atomic_load_n(&p.results[i].step, __ATOMIC_RELAXED);
    std::string where = code == kDeviceDone ? "done"
                        : step < lane.steps.size()
                            ? p.stepOp(lane, step) + " step " + std::to_string(step + 1) + "/" +
                                  std::to_string(lane.steps.size()) + ", " + p.stepPeers(lane, step)
                            : "not started (the stream has work queued before it?)";
    COLL_WARN(COLL, "device launch stalled for %.0f s: rank %d %s, %s", seconds, c_->core->rank, lane.name.c_str(),
              where.c_str());
  }
}

void DeviceProxy::loop() {
  Waiter waiter(c_->core->spinNs);
  auto lastMove = std::chrono::steady_clock::now();
  for (;;) {
    std::vector<std::shared_ptr<PendingLaunch>> live;
    bool urgent = false;
    uint64_t seen = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Drop finished launches and tell waiters.
      size_t kept = 0;
      for (auto& p : pending_)
        if (!p->finished) pending_[kept++] = p;
      const bool dropped = kept != pending_.size();
      pending_.resize(kept);
      if (dropped) doneCv_.notify_all();
      if (pending_.empty()) {
        if (stop_) return;
        cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
        lastMove = std::chrono::steady_clock::now();  // stuck time counts from the launch
        continue;
      }
      live = pending_;
      urgent = waiters_ > 0;
      seen = submitted_;
    }
    for (const auto& p : live) urgent |= !p->sends.empty() || !p->recvs.empty();
    if (pass(live)) {
      waiter.reset();
      lastMove = std::chrono::steady_clock::now();
      continue;
    }
    // A peer gone (the root lost, a rank aborted) is fatal once the launches stay stuck,
    // as in the host executor; the next pass then tells the kernels to give up.
    if (c_->core->abort->peerGone.load(std::memory_order_relaxed) && !c_->core->abort->raised() &&
        std::chrono::steady_clock::now() - lastMove > std::chrono::duration<double>(kPeerGoneGraceS))
      c_->core->abort->set(Code::kRemote, c_->core->abort->peerGoneReason());
    if (!urgent) {
      // Nothing to move and nobody waiting: look again in a while, or when a launch
      // arrives or a thread starts waiting.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::microseconds(kLazyPollUs),
                   [&] { return stop_ || waiters_ > 0 || submitted_ != seen; });
    } else if (waiter.idleSeconds() < 0.002) {
      waiter.idle(WaitTarget{});  // spin, then yield: kernels wake nobody, so poll
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // a long kernel: let the core go
    }
  }
}

}  // namespace coll

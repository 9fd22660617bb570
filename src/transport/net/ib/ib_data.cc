// The ib backend's data path: registrations, credits (CTS), RDMA WRITE WITH_IMM split
// across the QPs, completions, and the side-channel check that turns a dead peer into an
// error. Everything progresses from isend/irecv/test on the comm's own thread.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transport/net/ib/ib_conn.h"

namespace coll::ib {

namespace {

constexpr int64_t kAliveCheckNs = 100000000;   // side-channel check while waiting
constexpr int64_t kBeaconNs = 1000000000;      // a waiting receiver's credit report
constexpr uint32_t kBeaconMagic = 0x49424233;  // "IBB3"

int64_t monoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

// Registers with `reg(access)`, adding relaxed ordering where COLL_IB_PCI_RELAXED_ORDERING
// asks for it: it lets the NIC's PCIe writes pass each other, which matters most for GPU
// memory behind a PCIe switch.
Result<Mr> IbConn::regRelaxed(int access, const std::function<Result<Mr>(int)>& reg) {
  const bool tryRo = s_->relaxedOrdering == 1 || (s_->relaxedOrdering == 2 && !s_->roRefused.load());
  Result<Mr> mr = reg(access | (tryRo ? IBV_ACCESS_RELAXED_ORDERING : 0));
  if (!mr.ok() && tryRo && s_->relaxedOrdering == 2) {
    // Where it registers without, the library or device refused relaxed ordering: go
    // without it from now on. A range refused either way leaves the choice as it was.
    mr = reg(access);
    if (mr.ok() && !s_->roRefused.exchange(true))
      COLL_INFO(NET, "ib: %s refused relaxed-ordering registrations; registering without", s_->verbs->path().c_str());
  }
  if (!mr.ok())
    return mr.takeStatus().prefix(std::string("COLL_IB_PCI_RELAXED_ORDERING=") + std::to_string(s_->relaxedOrdering) +
                                  ": ");
  return mr;
}

Status IbConn::regMr(void* data, size_t size) {
  if (size == 0 || findReg(data, size)) return okStatus();
  COLL_ASSIGN(Mr mr, regRelaxed(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                [&](int access) { return ib::regMr(v_, dev_->pd.get(), data, size, access); }));
  regs_.push_back(Reg{static_cast<char*>(data), size, std::move(mr), false});
  return okStatus();
}

Status IbConn::regMrGpu(void* data, size_t size, const NetBackend::GpuRange& range) {
  if (size == 0 || findReg(data, size)) return okStatus();
  const std::string where = "GPU memory on " + dev_->name + ":" + std::to_string(dev_->port) + ": ";
  const bool dmaBuf = range.dmaBufFd >= 0;
  if (dmaBuf && !dev_->dmaBuf)
    return invalidUsage(where + "no dma-buf registration here (" + s_->verbs->path() +
                        " lacks ibv_reg_dmabuf_mr, or the provider or kernel refuses it)" +
                        (s_->peerMem.empty() ? "" : "; register it as a CUDA pointer (dma-buf fd -1)"));
  if (!dmaBuf && s_->peerMem.empty())
    return invalidUsage(where + "a CUDA pointer registers only with the peer-memory module (nvidia-peermem) " +
                        "loaded, and it is not" + (dev_->dmaBuf ? "; register it through its dma-buf" : ""));
  // A receive's range is also read: by the flush's RDMA READ (iflush).
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | (sender_ ? 0 : IBV_ACCESS_REMOTE_READ);
  Result<Mr> mr = regRelaxed(access, [&](int a) {
    if (dmaBuf)
      return ib::regDmabufMr(v_, dev_->pd.get(), range.offset, size, reinterpret_cast<uintptr_t>(data), range.dmaBufFd,
                             a);
    return ib::regMr(v_, dev_->pd.get(), data, size, a);
  });
  if (!mr.ok())
    return mr.takeStatus().prefix(where + (dmaBuf ? "" : "(as a CUDA pointer, peer memory: " + s_->peerMem + ") "));
  regs_.push_back(Reg{static_cast<char*>(data), size, mr.take(), true});
  return okStatus();
}

const IbConn::Reg* IbConn::findReg(const void* p, size_t n) const {
  const char* c = static_cast<const char*>(p);
  for (const Reg& r : regs_)
    if (c >= r.base && c + n <= r.base + r.size) return &r;
  return nullptr;
}

Result<NetRequest*> IbConn::isend(const void* data, size_t size) {
  COLL_ASSIGN(bool ready, progressSetup());
  if (!ready) return static_cast<NetRequest*>(nullptr);
  COLL_CHECK(progress());
  IbRequest* r = &reqs_[nextSeq_ % kDepth];
  if (r->inUse) return static_cast<NetRequest*>(nullptr);  // no room: the caller retries
  if (size > UINT32_MAX) return invalidArgument("ib send of " + std::to_string(size) + " bytes: at most 4 GiB - 1");
  const Reg* reg = size ? findReg(data, size) : nullptr;
  if (size && !reg) return invalidArgument(who() + ": isend of a buffer no regMr covers");
  *r = IbRequest{};
  r->conn = this;
  r->inUse = true;
  r->seq = nextSeq_++;
  r->data = static_cast<const char*>(data);
  r->size = size;
  r->lkey = reg ? reg->mr->lkey : 0;
  COLL_CHECK(progress());
  return static_cast<NetRequest*>(r);
}

Result<NetRequest*> IbConn::irecv(void* data, size_t maxSize) {
  COLL_ASSIGN(bool ready, progressSetup());
  if (!ready) return static_cast<NetRequest*>(nullptr);
  COLL_CHECK(progress());
  IbRequest* r = &reqs_[nextSeq_ % kDepth];
  if (r->inUse) return static_cast<NetRequest*>(nullptr);
  if (maxSize > UINT32_MAX) maxSize = UINT32_MAX;
  if (maxSize && !findReg(data, maxSize)) return invalidArgument(who() + ": irecv into a buffer no regMr covers");
  *r = IbRequest{};
  r->conn = this;
  r->inUse = true;
  r->seq = nextSeq_++;
  r->data = static_cast<const char*>(data);
  r->size = maxSize;
  r->pending = static_cast<int>(qps_.size());
  Status st = postCts(r);
  if (!st.ok()) return fail(st);
  return static_cast<NetRequest*>(r);
}

// Receiver: the credit for request r, written into the sender's CTS FIFO. A zero-byte
// buffer still names a range of ours (the CTS credit buffer) so the peer's key checks pass.
Status IbConn::postCts(IbRequest* r) {
  const Reg* reg = r->size ? findReg(r->data, r->size) : nullptr;
  CtsEntry& e = cts_[r->seq % kDepth];
  e.addr = reg ? reinterpret_cast<uint64_t>(r->data) : reinterpret_cast<uint64_t>(cts_.get());
  e.rkey = reg ? reg->mr->rkey : ctsMr_->rkey;
  e.size = static_cast<uint32_t>(r->size);
  e.seq = r->seq + 1;
  ibv_sge sge{reinterpret_cast<uint64_t>(&e), sizeof(e), ctsMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kCtsTag | r->seq;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = peerInfo_.ctsAddr + (r->seq % kDepth) * sizeof(CtsEntry);
  wr.wr.rdma.rkey = peerInfo_.ctsRkey;
  ibv_send_wr* bad = nullptr;
  int rc = v_.postSend(qps_[0].get(), &wr, &bad);
  return rc == 0 ? okStatus() : systemError("ibv_post_send (credit) on QP " + std::to_string(qps_[0]->qp_num), rc);
}

// Sender: the message in parts, one per QP, each WITH_IMM carrying the whole size.
Status IbConn::postWrites(IbRequest* r, const CtsEntry& cts) {
  COLL_CHECK(checkCts(cts, r->size));
  const size_t n = qps_.size();
  const size_t part = ((r->size + n - 1) / n + 127) & ~size_t{127};
  for (size_t i = 0; i < n; ++i) {
    const size_t off = std::min(r->size, i * part);
    const size_t len = std::min(r->size - off, part);
    ibv_sge sge{reinterpret_cast<uint64_t>(r->data + off), static_cast<uint32_t>(len), r->lkey};
    ibv_send_wr wr{};
    wr.wr_id = (r->seq << 8) | i;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(r->size));
    wr.wr.rdma.remote_addr = cts.addr + off;
    wr.wr.rdma.rkey = cts.rkey;
    ibv_send_wr* bad = nullptr;
    int rc = v_.postSend(qps_[i].get(), &wr, &bad);
    if (rc != 0) return systemError("ibv_post_send (RDMA WRITE) on QP " + std::to_string(qps_[i]->qp_num), rc);
  }
  r->pending = static_cast<int>(n);
  r->written = true;
  return okStatus();
}

// Receiver: the flush's QP, connected to itself on this comm's port (as the peer is never
// involved, nothing crosses the wire: the READ turns around in the NIC), reading into a
// small registered host scratch buffer. Its completions come on the comm's CQ, whose
// spare room (createQps) holds kDepth of them.
Status IbConn::setupFlush() {
  constexpr size_t kScratch = 64;
  flushBuf_.reset(new char[kScratch]());
  COLL_ASSIGN(flushMr_, ib::regMr(v_, dev_->pd.get(), flushBuf_.get(), kScratch, IBV_ACCESS_LOCAL_WRITE));
  QpCaps caps;
  caps.maxSendWr = kDepth;
  caps.maxRecvWr = 1;
  caps.signalAll = true;
  COLL_ASSIGN(flushQp_, createRcQp(v_, dev_->pd.get(), cq_.get(), cq_.get(), caps));
  RcConnectParams p;
  p.port = dev_->port;
  p.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;  // it serves its own READs
  p.remoteQpn = flushQp_->qp_num;
  p.remotePsn = p.localPsn = psn_[0];  // one QP: what it sends is what it expects
  p.remoteLid = dev_->lid;
  p.useGid = dev_->eth;
  p.remoteGid = dev_->gid;
  p.gidIndex = dev_->gidIndex;
  p.mtu = dev_->mtu;
  p.timeout = opt_.timeout;
  p.retryCount = opt_.retryCnt;
  p.trafficClass = opt_.tc;
  p.serviceLevel = opt_.sl;
  return connectRcQp(v_, flushQp_.get(), p);
}

Result<NetRequest*> IbConn::iflush(void* data, size_t size) {
  if (!error_.ok()) return error_;
  if (sender_) return invalidUsage(who() + ": iflush on a sending comm");
  // Nothing can have arrived before the connection is established, nor in 0 bytes.
  if (size == 0 || setupPhase_ != SetupPhase::kReady) return static_cast<NetRequest*>(nullptr);
  const Reg* reg = findReg(data, size);
  if (!reg) return invalidArgument(who() + ": iflush of a buffer no regMr/regMrGpu covers");
  if (!reg->gpu) return static_cast<NetRequest*>(nullptr);  // host memory: the CPU sees the writes in order
  if (!flushQp_) {
    Status st = setupFlush();
    if (!st.ok()) return fail(st.prefix("setting up the flush QP: "));
  }
  IbRequest* r = nullptr;
  for (uint32_t i = 0; i < kDepth && !r; ++i)
    if (!flushReqs_[i].inUse) r = &flushReqs_[i];
  if (!r)
    return invalidUsage(who() + ": more than " + std::to_string(kDepth) + " flushes in flight (test() frees them)");
  *r = IbRequest{};
  r->conn = this;
  r->inUse = true;
  r->flush = true;
  // One byte is enough: the READ completes only after the writes before it are visible.
  ibv_sge sge{reinterpret_cast<uint64_t>(flushBuf_.get()), 1, flushMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kFlushTag | static_cast<uint64_t>(r - flushReqs_);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(data);
  wr.wr.rdma.rkey = reg->mr->rkey;
  ibv_send_wr* bad = nullptr;
  int rc = v_.postSend(flushQp_.get(), &wr, &bad);
  if (rc != 0) {
    r->inUse = false;
    return fail(systemError("ibv_post_send (flush RDMA READ) on QP " + std::to_string(flushQp_->qp_num), rc));
  }
  return static_cast<NetRequest*>(r);
}

Status IbConn::onCompletion(const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) {
    const char* op = (wc.wr_id & kRecvTag)    ? "RDMA WRITE WITH_IMM receive"
                     : (wc.wr_id & kCtsTag)   ? "credit (CTS) RDMA WRITE"
                     : (wc.wr_id & kFlushTag) ? "flush (iflush) RDMA READ"
                                              : "RDMA WRITE";
    return remoteError(std::string(op) + " on QP " + std::to_string(wc.qp_num) + " completed with \"" +
                       v_.wcStatusStr(wc.status) + "\" (status " + std::to_string(wc.status) + ", vendor error " +
                       std::to_string(wc.vendor_err) + ")");
  }
  if (wc.wr_id & kCtsTag) {  // the credit landed (one QP: in order)
    ++ctsLanded_;
    return okStatus();
  }
  if (wc.wr_id & kFlushTag) {
    IbRequest* r = &flushReqs_[(wc.wr_id & ~kFlushTag) % kDepth];
    if (!r->inUse || !r->flush || r->done) return internalError("a stray flush completion");
    r->done = true;
    return okStatus();
  }
  if (wc.wr_id & kRecvTag) {
    const int q = static_cast<int>(wc.wr_id & 0xff);
    IbRequest* r = &reqs_[immSeq_[q] % kDepth];
    if (!r->inUse || r->seq != immSeq_[q] || r->done)
      return remoteError("data arrived on QP " + std::to_string(wc.qp_num) + " without a posted receive");
    ++immSeq_[q];
    const size_t size = ntohl(wc.imm_data);
    if (size > r->size)
      return remoteError("the peer wrote " + std::to_string(size) + " bytes into a receive of " +
                         std::to_string(r->size));
    r->size = size;
    if (--r->pending == 0) r->done = true;
    return postRecv(q);
  }
  IbRequest* r = &reqs_[(wc.wr_id >> 8) % kDepth];
  if (!r->inUse || !r->written || r->seq != (wc.wr_id >> 8)) return internalError("a stray send completion");
  if (--r->pending == 0) r->done = true;
  return okStatus();
}

Status IbConn::pollCq(bool* any) {
  ibv_wc wc[16];
  for (;;) {
    int n = v_.pollCq(cq_.get(), 16, wc);
    if (n < 0) return systemError("ibv_poll_cq", errno);
    for (int i = 0; i < n; ++i) COLL_CHECK(onCompletion(wc[i]));
    if (n > 0) *any = true;
    if (n < 16) return okStatus();
  }
}

// Posts the writes of every request whose credit arrived (sender), and takes the
// completions; a comm that waits without news checks that its peer is still there.
Status IbConn::progress() {
  if (!error_.ok()) return error_;
  bool any = false;
  Status st = pollCq(&any);
  while (st.ok() && sender_ && writeSeq_ < nextSeq_) {
    const CtsEntry& slot = cts_[writeSeq_ % kDepth];
    if (std::atomic_ref<const uint64_t>(slot.seq).load(std::memory_order_acquire) != writeSeq_ + 1) break;
    st = postWrites(&reqs_[writeSeq_ % kDepth], slot);
    if (st.ok()) ++writeSeq_;
    any = true;
  }
  if (st.ok() && !any) st = checkPeerAlive();
  return st.ok() ? st : fail(st);
}

// The side channel stays open for the comm's life: the peer's kernel closes it when the
// process dies, which a QP learns only when it next sends (retry exceeded) or never (a
// receiver whose credits were all delivered). It also carries the beacons (Beacon).
Status IbConn::checkPeerAlive() {
  const int64_t now = monoNs();
  if (now - lastAliveCheckNs_ < kAliveCheckNs) return okStatus();
  lastAliveCheckNs_ = now;
  COLL_CHECK(readBeacons());
  if (!sender_ && waitingForData() && now - lastBeaconNs_ >= kBeaconNs) {
    lastBeaconNs_ = now;
    sendBeacon(Beacon::kCredits, ctsLanded_);
  }
  return okStatus();
}

bool IbConn::waitingForData() const {
  for (const IbRequest& r : reqs_)
    if (r.inUse && !r.done) return true;
  return false;
}

// Best effort: a beacon that does not fit the socket buffer now is sent next time.
void IbConn::sendBeacon(Beacon::Kind kind, uint64_t seq) {
  const Beacon b{kBeaconMagic, kind, seq};
  ssize_t n = ::send(sock_.fd(), &b, sizeof(b), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n > 0 && n != static_cast<ssize_t>(sizeof(b)))  // a torn beacon would desynchronize the stream
    static_cast<void>(fail(internalError("side channel: a beacon was cut short")));
}

Status IbConn::readBeacons() {
  for (;;) {
    char* into = reinterpret_cast<char*>(&beaconIn_) + beaconGot_;
    ssize_t n = ::recv(sock_.fd(), into, sizeof(Beacon) - beaconGot_, MSG_DONTWAIT);
    if (n == 0) return remoteError("the peer closed its connection (process exited?)");
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return okStatus();
      return systemError("the peer's side channel", errno);
    }
    beaconGot_ += static_cast<size_t>(n);
    if (beaconGot_ < sizeof(Beacon)) continue;
    beaconGot_ = 0;
    COLL_CHECK(onBeacon(beaconIn_));
  }
}

// A credit the receiver saw land twice in a row (a second beacon, a second later) that is
// still not in the FIFO was lost: RC delivers in order or fails loudly, so this is memory
// corruption or a broken NIC, not slowness.
Status IbConn::onBeacon(const Beacon& b) {
  if (b.magic != kBeaconMagic || (b.kind != Beacon::kCredits && b.kind != Beacon::kLost))
    return remoteError("the peer sent garbage on the side channel");
  if (b.kind == Beacon::kLost)
    return remoteError("the peer never received credit #" + std::to_string(b.seq) +
                       " that this side wrote: a lost credit");
  if (!sender_) return remoteError("a credit report sent to the receiving side");
  const CtsEntry& slot = cts_[writeSeq_ % kDepth];
  const bool missing = b.seq > writeSeq_ &&
                       std::atomic_ref<const uint64_t>(slot.seq).load(std::memory_order_acquire) != writeSeq_ + 1;
  if (!missing) {
    suspect_ = UINT64_MAX;
    return okStatus();
  }
  if (suspect_ != writeSeq_) {
    suspect_ = writeSeq_;
    return okStatus();
  }
  sendBeacon(Beacon::kLost, writeSeq_);
  return remoteError("credit #" + std::to_string(writeSeq_) + " never arrived although the peer's write of it " +
                     "completed: a lost credit");
}

Status IbConn::test(IbRequest* r, bool* done, size_t* size) {
  *done = false;
  if (!r->done) COLL_CHECK(progress());
  if (!r->done) return okStatus();
  *done = true;
  *size = r->flush ? 0 : r->size;
  r->inUse = false;
  if (r->flush) return okStatus();
  ++messages_;
  bytes_ += r->size;
  if (bytes_ == r->size && r->size > 0)  // the first bytes it carried (the log says ib moved data)
    COLL_INFO(NET, "%s: first data delivered (%zu bytes)", who().c_str(), r->size);
  return okStatus();
}

}  // namespace coll::ib

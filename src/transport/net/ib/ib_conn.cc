// One side of an ib connection: set-up over the TCP side channel, then credits and RDMA
// WRITEs (ib_net.h has the protocol, docs/DESIGN.md its diagram).
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include "base/log.h"
#include "base/param.h"
#include "transport/net/ib/ib_conn.h"

namespace coll::ib {

namespace {

// An int knob in [lo, hi]; out of range: a WARN (once per variable and value) naming the
// variable and the default used.
int64_t ranged(IntParam p, int64_t lo, int64_t hi) {
  const int64_t v = param(p);
  if (v >= lo && v <= hi) return v;
  const ParamInfo& info = paramInfo(p);
  static std::mutex mu;
  static std::set<std::pair<int, int64_t>> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert({static_cast<int>(p), v}).second)
    COLL_WARN(ENV, "COLL_%s/NCCL_%s=%lld is out of range %lld..%lld; using the default %s", info.name, info.name,
              static_cast<long long>(v), static_cast<long long>(lo), static_cast<long long>(hi), info.defaultValue);
  return std::strtoll(info.defaultValue, nullptr, 10);
}

}  // namespace

IbOptions IbOptions::read() {
  IbOptions o;
  o.qps = static_cast<int>(ranged(IntParam::IB_QPS_PER_CONNECTION, 1, kMaxQpsPerConn));
  o.timeout = static_cast<uint8_t>(ranged(IntParam::IB_TIMEOUT, 1, 31));
  o.retryCnt = static_cast<uint8_t>(ranged(IntParam::IB_RETRY_CNT, 0, 7));
  o.tc = static_cast<uint8_t>(ranged(IntParam::IB_TC, 0, 255));
  o.sl = static_cast<uint8_t>(ranged(IntParam::IB_SL, 0, 15));
  return o;
}

std::string IbConn::who() const {
  return std::string("ib ") + (sender_ ? "send to " : "receive from ") + (peer_.empty() ? "?" : peer_) + " on " +
         dev_->name + ":" + std::to_string(dev_->port);
}

IbConn::~IbConn() {
  if (setupPhase_ == SetupPhase::kReady)
    COLL_INFO(NET, "%s: closed after %llu messages, %llu bytes", who().c_str(),
              static_cast<unsigned long long>(messages_), static_cast<unsigned long long>(bytes_));
}

// The first error sticks: later calls on the comm return it.
Status IbConn::fail(Status st) {
  if (error_.ok()) error_ = st.prefix(who() + ": ");
  return error_;
}

Digest IbConn::authMacFor(bool connector) const {
  return authMac(key_, connector ? "ib connector" : "ib acceptor", {bytesOf(listenerNonce_), bytesOf(connectorNonce_)});
}

SetupMsg IbConn::localMsg() const {
  SetupMsg m{};
  m.auth.magic = kInfoMagic;
  m.auth.connectorNonce = connectorNonce_;
  m.auth.mac = authMacFor(sender_);
  PeerInfo& in = m.info;
  in.magic = kInfoMagic;
  in.nQps = static_cast<uint32_t>(qps_.size());
  in.lid = dev_->lid;
  in.eth = dev_->eth;
  in.mtu = static_cast<uint8_t>(dev_->mtu);
  std::memcpy(in.gid, dev_->gid.raw, 16);
  if (sender_) {
    in.ctsAddr = reinterpret_cast<uint64_t>(cts_.get());
    in.ctsRkey = ctsMr_->rkey;
  }
  for (size_t i = 0; i < qps_.size(); ++i) {
    in.qpn[i] = qps_[i]->qp_num;
    in.psn[i] = psn_[i];
  }
  return m;
}

Status IbConn::createQps(int n) {
  COLL_ASSIGN(cq_, createCq(v_, dev_->ctx.get(), static_cast<int>(kDepth) * (2 * n + 2)));
  std::mt19937 rng(std::random_device{}());
  QpCaps caps;
  caps.maxSendWr = 2 * kDepth;
  caps.maxRecvWr = kDepth;
  caps.signalAll = true;
  RcConnectParams p;
  p.port = dev_->port;
  for (int i = 0; i < n; ++i) {
    COLL_ASSIGN(Qp qp, createRcQp(v_, dev_->pd.get(), cq_.get(), cq_.get(), caps));
    COLL_CHECK(rcToInit(v_, qp.get(), p));
    psn_[i] = rng() & 0xffffff;
    qps_.push_back(std::move(qp));
  }
  // The CTS FIFO (sender: the peer writes credits into it) or the credit buffer of the credits
  // this receiver writes.
  cts_.reset(new CtsEntry[kDepth]());
  COLL_ASSIGN(ctsMr_, ib::regMr(v_, dev_->pd.get(), cts_.get(), kDepth * sizeof(CtsEntry),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  return okStatus();
}

Status IbConn::startConnect(const SockAddr& addr, const AuthKey& key, const AuthNonce& listenerNonce,
                            const std::atomic<bool>* cancel) {
  peer_ = addr.str();
  opt_ = IbOptions::read();
  key_ = key;
  listenerNonce_ = listenerNonce;
  COLL_ASSIGN(connectorNonce_, randomNonce());
  // The listener exists (its address came in the handle), so the kernel completes the TCP
  // connection without the peer's accept().
  COLL_ASSIGN(sock_, Socket::connect(addr, deadlineIn(30), cancel));
  COLL_CHECK(sock_.setNoDelay());
  Status st = createQps(opt_.qps);
  if (!st.ok()) return fail(st);
  COLL_CHECK(sendInfo());
  COLL_CHECK(sock_.setNonBlocking(true));
  setupPhase_ = SetupPhase::kWaitInfo;
  return okStatus();
}

Status IbConn::sendInfo() {
  const SetupMsg in = localMsg();
  Status st = sock_.sendAll(&in, sizeof(in), deadlineIn(30));
  return st.ok() ? st : fail(st.prefix("sending the connection info: "));
}

Status IbConn::acceptSocket(bool* got) {
  *got = false;
  pollfd p{listener_->fd(), POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return okStatus();
  COLL_ASSIGN(sock_, listener_->accept(deadlineIn(5)));
  COLL_CHECK(sock_.setNonBlocking(true));
  peer_ = sock_.peer().str();
  authBy_ = deadlineIn(authTimeoutS());
  *got = true;
  return okStatus();
}

// Receiver: a connection that did not prove the key is closed, and the listener waits on
// for the real sender (its connection is queued behind this one).
void IbConn::rejectPeer(const std::string& why) {
  COLL_WARN(NET, "%s: rejected the connection: %s", who().c_str(), why.c_str());
  sock_.close();
  peer_.clear();
  infoGot_ = 0;
  setupPhase_ = SetupPhase::kAccept;
}

Status IbConn::checkAuth(const IbAuth& a) {
  if (a.magic != kInfoMagic) return remoteError("not an ib connection of ours (no key presented)");
  if (!sender_) connectorNonce_ = a.connectorNonce;
  if (a.connectorNonce.bytes != connectorNonce_.bytes || !macEqual(a.mac, authMacFor(!sender_)))
    return remoteError(sender_ ? "the peer does not know this communicator's key"
                               : "wrong key, or a set-up recorded for another listener");
  return okStatus();
}

// Reads what has arrived of the peer's set-up message; *got once it is all there and
// proves the key.
Status IbConn::readSetup(bool* got) {
  *got = false;
  auto* buf = reinterpret_cast<char*>(&inMsg_);
  while (infoGot_ < sizeof(inMsg_)) {
    ssize_t n = ::recv(sock_.fd(), buf + infoGot_, sizeof(inMsg_) - infoGot_, MSG_DONTWAIT);
    if (n == 0) return remoteError("the peer closed the connection during set-up");
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return okStatus();
      return systemError("reading the peer's connection info", errno);
    }
    infoGot_ += static_cast<size_t>(n);
  }
  COLL_CHECK(checkAuth(inMsg_.auth));
  *got = true;
  return okStatus();
}

// The peer's info once it arrived (*got), proved the key and is valid. A receiver drops a
// connection that fails before it proved the key, or is slower than COLL_AUTH_TIMEOUT_S to.
Status IbConn::readInfo(bool* got) {
  Status st = readSetup(got);
  if (!sender_ && (!st.ok() || (!*got && std::chrono::steady_clock::now() >= authBy_))) {
    rejectPeer(st.ok() ? "no proof of the key within " + std::to_string(static_cast<int>(authTimeoutS())) + " s"
                       : st.message());
    *got = false;
    return okStatus();
  }
  if (!st.ok() || !*got) return st;
  *got = false;
  PeerInfo p;
  st = parseIbPeerInfo(&inMsg_.info, sizeof(inMsg_.info), !sender_, &p);
  if (st.ok() && sender_ && p.nQps != qps_.size())
    st = remoteError("ib connection info with " + std::to_string(p.nQps) + " QPs for a connection of " +
                     std::to_string(qps_.size()));
  if (!st.ok()) return st;  // progressSetup's fail() names the peer
  peerInfo_ = p;
  if (p.eth != dev_->eth)
    return invalidArgument(std::string("link layers differ: ours is ") +
                           (dev_->eth ? "Ethernet (RoCE)" : "InfiniBand"));
  *got = true;
  return okStatus();
}

Status IbConn::connectQps(const PeerInfo& peer) {
  RcConnectParams p;
  p.port = dev_->port;
  p.remoteLid = peer.lid;
  p.useGid = dev_->eth;
  std::memcpy(p.remoteGid.raw, peer.gid, 16);
  p.gidIndex = dev_->gidIndex;
  p.mtu = std::min(dev_->mtu, static_cast<ibv_mtu>(peer.mtu));
  p.timeout = opt_.timeout;
  p.retryCount = opt_.retryCnt;
  p.trafficClass = opt_.tc;
  p.serviceLevel = opt_.sl;
  for (size_t i = 0; i < qps_.size(); ++i) {
    p.remoteQpn = peer.qpn[i];
    p.remotePsn = peer.psn[i];
    p.localPsn = psn_[i];
    COLL_CHECK(rcToRtr(v_, qps_[i].get(), p));
    COLL_CHECK(rcToRts(v_, qps_[i].get(), p));
  }
  return okStatus();
}

Status IbConn::postRecv(int qp) {
  ibv_recv_wr wr{};
  wr.wr_id = kRecvTag | static_cast<uint64_t>(qp);
  ibv_recv_wr* bad = nullptr;
  int rc = v_.postRecv(qps_[qp].get(), &wr, &bad);
  return rc == 0 ? okStatus() : systemError("ibv_post_recv on QP " + std::to_string(qps_[qp]->qp_num), rc);
}

// Receiver, once the sender's info is in: QPs with receives posted before they can be
// written to, then RTR/RTS and our answer.
Status IbConn::receiverSetup() {
  opt_ = IbOptions::read();
  COLL_CHECK(createQps(static_cast<int>(peerInfo_.nQps)));
  for (int q = 0; q < static_cast<int>(qps_.size()); ++q)
    for (uint32_t i = 0; i < kDepth; ++i) COLL_CHECK(postRecv(q));
  COLL_CHECK(connectQps(peerInfo_));
  return sendInfo();
}

Result<bool> IbConn::progressSetup() {
  if (!error_.ok()) return error_;
  bool got = false;
  Status st;
  switch (setupPhase_) {
    case SetupPhase::kReady: return true;
    case SetupPhase::kAccept:
      st = acceptSocket(&got);
      if (!st.ok() || !got) break;
      setupPhase_ = SetupPhase::kReadInfo;
      [[fallthrough]];
    case SetupPhase::kReadInfo:
      st = readInfo(&got);
      if (!st.ok() || !got) break;
      st = receiverSetup();
      if (!st.ok()) break;
      listener_.reset();
      setupPhase_ = SetupPhase::kWaitReady;
      [[fallthrough]];
    case SetupPhase::kWaitReady:
      if (sender_) break;
      {
        char c = 0;
        ssize_t n = ::recv(sock_.fd(), &c, 1, MSG_DONTWAIT);
        if (n == 0) st = remoteError("the peer closed the connection during set-up");
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          st = systemError("waiting for the peer's ready", errno);
        else if (n == 1) setupPhase_ = SetupPhase::kReady;
      }
      break;
    case SetupPhase::kWaitInfo:
      st = readInfo(&got);
      if (!st.ok() || !got) break;
      st = connectQps(peerInfo_);
      if (st.ok()) st = sock_.sendAll("R", 1, deadlineIn(30));
      if (st.ok()) setupPhase_ = SetupPhase::kReady;
      break;
  }
  if (!st.ok()) return fail(st);
  if (setupPhase_ == SetupPhase::kReady) COLL_INFO(NET, "%s: connected, %zu QP(s)", who().c_str(), qps_.size());
  return setupPhase_ == SetupPhase::kReady;
}

}  // namespace coll::ib

#include "transport/transport.h"

#include <unistd.h>

#include <cstring>

#include "collectives/config.h"
#include "base/log.h"
#include "base/param.h"

namespace coll {

namespace {

struct ConnBlob {
  TransportKind kind;
  uint32_t duplex;  // net: one connection for both directions (see transport.h)
  union {
    ShmHandle shm;
    NetConnectInfo net;
    P2pHandle p2p;
  };
};

}  // namespace

const char* transportName(TransportKind k) {
  return k == TransportKind::kShm ? "shm" : k == TransportKind::kP2p ? "p2p" : "net";
}

TransportKind chooseTransport(const PeerInfo& self, const PeerInfo& peer) {
  if (paramInt("SHM_DISABLE") != 0) return TransportKind::kNet;
  if (std::strncmp(self.hostId, peer.hostId, sizeof(self.hostId)) != 0) return TransportKind::kNet;
  return TransportKind::kShm;
}

TransportKind ConnectJob::kindFor(int peer) const {
  const PeerInfo& self = bs_->peers()[bs_->rank()];
  const PeerInfo& other = bs_->peers()[peer];
  if (device_ && p2pPossible(self, other, emulated_)) return TransportKind::kP2p;
  return chooseTransport(self, other);
}

void ConnectJob::addRecv(int peer, uint64_t tag, std::unique_ptr<RecvConnector>* out) {
  recvs_.push_back({peer, tag, out, TransportKind::kShm, nullptr, nullptr, nullptr});
}

void ConnectJob::addSend(int peer, uint64_t tag, std::unique_ptr<SendConnector>* out) {
  sends_.push_back({peer, tag, out});
}

// Pairs LL and tree receive and send items that face the same peer over net (ring
// slices keep one-way connections: bulk both ways on one socket contends for its lock).
// Symmetric: the peer's job holds the matching pair (two ranks' LL pair or a tree edge: both
// sides add one recv and one send under the same tag, in the same job, and choose the
// transport from the same host ids), and every rank agrees on COLL_NET_DUPLEX (checked
// at init).
void ConnectJob::pairDuplex() {
  if (paramInt("NET_DUPLEX") == 0) return;
  bool checked = false;
  for (size_t i = 0; i < recvs_.size(); ++i) {
    RecvItem& r = recvs_[i];
    uint64_t kind = r.tag & ~((1ull << 56) - 1);
    if (kind != kTagLL && kind != kTagTree) continue;
    if (kindFor(r.peer) != TransportKind::kNet) continue;
    if (!checked && !netDuplexSupported()) return;
    checked = true;
    for (size_t j = 0; j < sends_.size(); ++j) {
      if (sends_[j].partner >= 0 || sends_[j].peer != r.peer || sends_[j].tag != r.tag) continue;
      r.partner = static_cast<int>(j);
      sends_[j].partner = static_cast<int>(i);
      break;
    }
  }
}

Status ConnectJob::phase1() {
  pairDuplex();
  const PeerInfo& self = bs_->peers()[bs_->rank()];
  for (auto& r : recvs_) {
    const PeerInfo& peer = bs_->peers()[r.peer];
    r.kind = kindFor(r.peer);
    ConnBlob blob{};
    blob.kind = r.kind;
    blob.duplex = r.partner >= 0 ? 1 : 0;
    if (r.kind == TransportKind::kP2p) {
      COLL_ASSIGN(r.p2p, p2pSetupRecv(r.peer, slotBytes_, self.cudaDev, emulated_));
      blob.p2p = r.p2p->handle();
    } else if (r.kind == TransportKind::kShm) {
      bool sameProcess = peer.pid == self.pid;  // same host id already established
      COLL_ASSIGN(r.shm, shmSetupRecv(r.peer, slotBytes_, sameProcess));
      blob.shm = r.shm->handle();
    } else if (r.partner < 0 || bs_->rank() < r.peer) {
      COLL_ASSIGN(r.net, netSetupRecv(r.peer, slotBytes_));
      blob.net = r.net->info();
    }  // else: the higher rank of a duplex pair connects to the lower one's listener
    COLL_INFO(INIT, "rank %d <- rank %d via %s%s (tag %llx)", bs_->rank(), r.peer,
              transportName(r.kind), blob.duplex ? " (duplex)" : "",
              static_cast<unsigned long long>(r.tag));
    COLL_CHECK(bs_->send(r.peer, r.tag, &blob, sizeof(blob)));
  }
  return okStatus();
}

Status ConnectJob::phase2() {
  for (auto& s : sends_) {
    ConnBlob blob{};
    COLL_CHECK(bs_->recv(s.peer, s.tag, &blob, sizeof(blob)));
    if (blob.kind == TransportKind::kNet && (blob.duplex != 0) != (s.partner >= 0))
      return internalError("rank " + std::to_string(s.peer) +
                           " and this rank disagree on a duplex connection (COLL_NET_DUPLEX)");
    if (blob.kind == TransportKind::kP2p) {
      const PeerInfo& self = bs_->peers()[bs_->rank()];
      COLL_ASSIGN(*s.out, p2pConnectSend(s.peer, blob.p2p, self.cudaDev, bs_->peers()[s.peer], emulated_));
    } else if (blob.kind == TransportKind::kShm) {
      COLL_ASSIGN(*s.out, shmConnectSend(s.peer, blob.shm));
    } else if (blob.kind == TransportKind::kNet && s.partner >= 0) {
      if (bs_->rank() > s.peer) {  // connect; the lower rank accepts in phase 3
        COLL_ASSIGN(NetDuplex d, netConnectDuplex(s.peer, blob.net));
        *s.out = std::move(d.send);
        *recvs_[static_cast<size_t>(s.partner)].out = std::move(d.recv);
      }
    } else if (blob.kind == TransportKind::kNet) {
      COLL_ASSIGN(*s.out, netConnectSend(s.peer, blob.net));
    } else {
      return internalError("rank " + std::to_string(s.peer) + " sent an unknown transport kind");
    }
    char ack = 1;
    COLL_CHECK(bs_->send(s.peer, s.tag | kTagAck, &ack, 1));
  }
  return okStatus();
}

Status ConnectJob::phase3() {
  for (auto& r : recvs_) {
    char ack = 0;
    COLL_CHECK(bs_->recv(r.peer, r.tag | kTagAck, &ack, 1));
    if (r.kind == TransportKind::kP2p) {
      *r.out = r.p2p->finish();
    } else if (r.kind == TransportKind::kShm) {
      *r.out = r.shm->finish();
    } else if (r.partner >= 0) {
      if (bs_->rank() < r.peer) {  // accept the higher rank's duplex connection
        COLL_ASSIGN(NetDuplex d, r.net->finishDuplex());
        *r.out = std::move(d.recv);
        *sends_[static_cast<size_t>(r.partner)].out = std::move(d.send);
      }
    } else {
      COLL_ASSIGN(*r.out, r.net->finish());
    }
  }
  recvs_.clear();
  sends_.clear();
  return okStatus();
}

Status ConnectJob::run() {
  COLL_CHECK(phase1());
  COLL_CHECK(phase2());
  COLL_CHECK(phase3());
  return okStatus();
}

}  // namespace coll

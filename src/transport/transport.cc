#include "transport/transport.h"

#include <unistd.h>

#include <cstring>

#include "core/log.h"
#include "core/param.h"

namespace coll {

namespace {

struct ConnBlob {
  TransportKind kind;
  uint32_t pad;
  union {
    ShmHandle shm;
    NetConnectInfo net;
  };
};

}  // namespace

const char* transportName(TransportKind k) { return k == TransportKind::kShm ? "shm" : "net"; }

TransportKind chooseTransport(const PeerInfo& self, const PeerInfo& peer) {
  if (paramInt("SHM_DISABLE") != 0) return TransportKind::kNet;
  if (std::strncmp(self.hostId, peer.hostId, sizeof(self.hostId)) != 0) return TransportKind::kNet;
  return TransportKind::kShm;
}

void ConnectJob::addRecv(int peer, uint64_t tag, std::unique_ptr<RecvConnector>* out) {
  recvs_.push_back({peer, tag, out, TransportKind::kShm, nullptr, nullptr});
}

void ConnectJob::addSend(int peer, uint64_t tag, std::unique_ptr<SendConnector>* out) {
  sends_.push_back({peer, tag, out});
}

Status ConnectJob::phase1() {
  const PeerInfo& self = bs_->peers()[bs_->rank()];
  for (auto& r : recvs_) {
    const PeerInfo& peer = bs_->peers()[r.peer];
    r.kind = chooseTransport(self, peer);
    ConnBlob blob{};
    blob.kind = r.kind;
    if (r.kind == TransportKind::kShm) {
      bool sameProcess = peer.pid == self.pid;  // same host id already established
      COLL_ASSIGN(r.shm, shmSetupRecv(r.peer, slotBytes_, sameProcess));
      blob.shm = r.shm->handle();
    } else {
      COLL_ASSIGN(r.net, netSetupRecv(r.peer, slotBytes_));
      blob.net = r.net->info();
    }
    COLL_INFO(INIT, "rank %d <- rank %d via %s (tag %llx)", bs_->rank(), r.peer,
              transportName(r.kind), static_cast<unsigned long long>(r.tag));
    COLL_CHECK(bs_->send(r.peer, r.tag, &blob, sizeof(blob)));
  }
  return okStatus();
}

Status ConnectJob::phase2() {
  for (auto& s : sends_) {
    ConnBlob blob{};
    COLL_CHECK(bs_->recv(s.peer, s.tag, &blob, sizeof(blob)));
    if (blob.kind == TransportKind::kShm) {
      COLL_ASSIGN(*s.out, shmConnectSend(s.peer, blob.shm));
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
    if (r.kind == TransportKind::kShm) {
      *r.out = r.shm->finish();
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

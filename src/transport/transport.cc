#include "transport/transport.h"

#include <cstring>
#include <string>

#include "base/log.h"

namespace coll {

namespace {

// What a receiver ships to its sender in phase 1: the row it chose and that row's handle.
// Every rank runs the same build, so the same table.
struct ConnBlob {
  uint32_t row;     // index in transportTable()
  uint16_t duplex;  // one connection for both directions (see transport.h)
  uint16_t bytes;   // of handle; 0 from the higher rank of a duplex pair, which connects
  std::byte handle[kMaxHandleBytes];
};
static_assert(sizeof(ConnBlob) == 128, "one small frame per connection");

}  // namespace

Link ConnectJob::linkTo(int peer, uint64_t tag) const {
  return {bs_->peers()[bs_->rank()], bs_->peers()[peer], peer, options_, static_cast<int>(tag & 0xff)};
}

void ConnectJob::addRecv(int peer, uint64_t tag, std::unique_ptr<RecvConnector>* out) {
  recvs_.push_back({peer, tag, out});
}

void ConnectJob::addSend(int peer, uint64_t tag, std::unique_ptr<SendConnector>* out) {
  sends_.push_back({peer, tag, out});
}

// Pairs LL and tree receive and send items that face the same peer over a row with
// enabled duplex hooks (ring slices keep one-way connections: bulk both ways on one
// socket contends for its lock). Symmetric: the peer's job holds the matching pair (two
// ranks' LL pair or a tree edge: both sides add one recv and one send under the same tag,
// in the same job, and choose the row from the same host ids), and every rank agrees on
// COLL_NET_DUPLEX (checked at init).
void ConnectJob::pairDuplex() {
  for (size_t i = 0; i < recvs_.size(); ++i) {
    RecvItem& r = recvs_[i];
    uint64_t kind = r.tag & ~((1ull << 56) - 1);
    if (kind != kTagOneShotPair && kind != kTagTree) continue;
    const DuplexHooks* duplex = transportTable()[r.row]->duplex;
    if (!duplex || !duplex->enabled(options_)) continue;
    for (size_t j = 0; j < sends_.size(); ++j) {
      if (sends_[j].partner >= 0 || sends_[j].peer != r.peer || sends_[j].tag != r.tag) continue;
      r.partner = static_cast<int>(j);
      sends_[j].partner = static_cast<int>(i);
      break;
    }
  }
}

Status ConnectJob::phase1() {
  const PeerInfo& self = bs_->peers()[bs_->rank()];
  for (auto& r : recvs_) r.row = chooseTransport(self, bs_->peers()[r.peer], options_);
  pairDuplex();
  for (auto& r : recvs_) {
    const Transport& row = *transportTable()[r.row];
    ConnBlob blob{};
    blob.row = r.row;
    blob.duplex = r.partner >= 0 ? 1 : 0;
    if (r.partner < 0 || bs_->rank() < r.peer) {
      COLL_ASSIGN(r.pending, row.setupRecv(linkTo(r.peer, r.tag), slotBytes_));
      const std::span<const std::byte> h = r.pending->handle();
      if (h.size() > kMaxHandleBytes)
        return internalError(std::string("a ") + row.name + " handle larger than kMaxHandleBytes");
      std::memcpy(blob.handle, h.data(), h.size());
      blob.bytes = static_cast<uint16_t>(h.size());
    }  // else: the higher rank of a duplex pair connects to the lower one's listener
    COLL_INFO(INIT, "rank %d <- rank %d via %s%s (tag %llx)", bs_->rank(), r.peer, row.name,
              blob.duplex ? " (duplex)" : "", static_cast<unsigned long long>(r.tag));
    COLL_CHECK(bs_->send(r.peer, r.tag, &blob, sizeof(blob)));
  }
  return okStatus();
}

// The send side of one connection through the row the receiver chose.
Status ConnectJob::connectSend(SendItem& s, const Transport& row, bool duplex, std::span<const std::byte> handle) {
  if (row.duplex && duplex != (s.partner >= 0))
    return internalError("rank " + std::to_string(s.peer) +
                         " and this rank disagree on a duplex connection (COLL_NET_DUPLEX)");
  if (!row.duplex || !duplex) {
    COLL_ASSIGN(*s.out, row.connectSend(linkTo(s.peer, s.tag), handle));
  } else if (bs_->rank() > s.peer) {  // connect; the lower rank accepts in phase 3
    COLL_ASSIGN(DuplexConnectors d, row.duplex->connect(linkTo(s.peer, s.tag), handle));
    *s.out = std::move(d.send);
    *recvs_[static_cast<size_t>(s.partner)].out = std::move(d.recv);
  }
  return okStatus();
}

Status ConnectJob::phase2() {
  const auto table = transportTable();
  for (auto& s : sends_) {
    ConnBlob blob{};
    COLL_CHECK(bs_->recv(s.peer, s.tag, &blob, sizeof(blob)));
    if (blob.row >= table.size() || blob.bytes > kMaxHandleBytes)
      return internalError("rank " + std::to_string(s.peer) + " sent an unknown transport kind");
    COLL_CHECK(connectSend(s, *table[blob.row], blob.duplex != 0, std::span<const std::byte>(blob.handle, blob.bytes)));
    char ack = 1;
    COLL_CHECK(bs_->send(s.peer, s.tag | kTagAck, &ack, 1));
  }
  return okStatus();
}

Status ConnectJob::phase3() {
  for (auto& r : recvs_) {
    char ack = 0;
    COLL_CHECK(bs_->recv(r.peer, r.tag | kTagAck, &ack, 1));
    if (r.partner < 0) {
      COLL_ASSIGN(*r.out, r.pending->finish());
    } else if (bs_->rank() < r.peer) {  // accept the higher rank's duplex connection
      COLL_ASSIGN(DuplexConnectors d, r.pending->finishDuplex());
      *r.out = std::move(d.recv);
      *sends_[static_cast<size_t>(r.partner)].out = std::move(d.send);
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

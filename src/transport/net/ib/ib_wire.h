// What the ib backend puts on the wire (ib_net.h describes the protocol): the handle a
// listener publishes, the info each side sends the other over the TCP side channel, and the
// credits (CTS entries) a receiver RDMA-writes into the sender's FIFO. Plain structs without
// verbs types; the parse/check functions check every field against its limit before the
// backend uses it, and the fuzz targets (tests/fuzz/) call them too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "bootstrap/auth.h"
#include "bootstrap/socket.h"

namespace coll::ib {

constexpr int kMaxQpsPerConn = 16;
constexpr uint32_t kHandleMagic = 0x49424831;  // "IBH1"
constexpr uint32_t kInfoMagic = 0x49424e31;    // "IBN1"

struct IbHandle {
  uint32_t magic;
  uint32_t dev;
  SockAddr addr;    // the receiver's side-channel listener
  AuthNonce nonce;  // the listener's challenge (ib_conn.h IbAuth)
};

// A receiver's credit in the sender's CTS FIFO. seq is the request's sequence number + 1,
// written with the rest in one RDMA WRITE; the sender reads the entry once seq matches.
struct alignas(32) CtsEntry {  // one entry never straddles a cache line
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;
  uint64_t seq;
  uint64_t pad;
};

// What each side sends the other over the TCP side channel.
struct PeerInfo {
  uint32_t magic;
  uint32_t nQps;
  uint16_t lid;
  uint8_t eth;
  uint8_t mtu;  // an ibv_mtu: 1 (256 bytes) .. 5 (4096 bytes)
  uint32_t reserved;
  uint8_t gid[16];
  uint64_t ctsAddr;  // sender only: its CTS FIFO
  uint32_t ctsRkey;
  uint32_t reserved2;
  uint32_t qpn[kMaxQpsPerConn];
  uint32_t psn[kMaxQpsPerConn];
};

// Each returns an error saying which field is wrong and its value; callers prefix who sent it.
Status parseIbHandle(const void* bytes, size_t n, IbHandle* out);
// fromSender: the info comes from the sending side (it must name its CTS FIFO).
Status parseIbPeerInfo(const void* bytes, size_t n, bool fromSender, PeerInfo* out);
// A credit for a message of sendBytes: the receive it offers must hold the message.
Status checkCts(const CtsEntry& cts, size_t sendBytes);

}  // namespace coll::ib

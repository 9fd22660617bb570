#include "transport/net/ib/ib_wire.h"

#include <cstring>
#include <string>

#include "bootstrap/wire.h"

namespace coll::ib {

Status parseIbHandle(const void* bytes, size_t n, IbHandle* out) {
  if (n < sizeof(IbHandle)) return remoteError("ib handle of " + std::to_string(n) + " bytes");
  IbHandle h;
  std::memcpy(&h, bytes, sizeof(h));
  if (h.magic != kHandleMagic)
    return remoteError("corrupt ib handle (magic " + std::to_string(h.magic) + "; the peer uses another net backend?)");
  COLL_RETURN_IF_FAILED(checkSockAddr(h.addr, "ib handle"));
  *out = h;
  return okStatus();
}

Status parseIbPeerInfo(const void* bytes, size_t n, bool fromSender, PeerInfo* out) {
  if (n != sizeof(PeerInfo)) return remoteError("ib connection info of " + std::to_string(n) + " bytes");
  PeerInfo p;
  std::memcpy(&p, bytes, sizeof(p));
  if (p.magic != kInfoMagic)
    return remoteError("corrupt ib connection info (magic " + std::to_string(p.magic) +
                       "; not an ib backend of this version?)");
  if (p.nQps == 0 || p.nQps > kMaxQpsPerConn)
    return remoteError("ib connection info with " + std::to_string(p.nQps) + " QPs, expected 1.." +
                       std::to_string(kMaxQpsPerConn));
  if (p.mtu < 1 || p.mtu > 5) return remoteError("ib connection info with MTU code " + std::to_string(p.mtu));
  if (p.eth > 1) return remoteError("ib connection info with link layer " + std::to_string(p.eth));
  if (fromSender && p.ctsRkey == 0) return remoteError("ib connection info from a sender without a CTS FIFO");
  *out = p;
  return okStatus();
}

Status checkCts(const CtsEntry& cts, size_t sendBytes) {
  if (sendBytes > cts.size)
    return invalidArgument("a message of " + std::to_string(sendBytes) + " bytes for a receive of at most " +
                           std::to_string(cts.size));
  return okStatus();
}

}  // namespace coll::ib

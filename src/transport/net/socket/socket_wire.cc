#include "transport/net/socket/socket_wire.h"

#include <cstring>
#include <string>

#include "bootstrap/wire.h"

namespace coll {

Status parseSockHandle(const void* bytes, size_t n, SockHandle* out) {
  if (n < sizeof(SockHandle)) return remoteError("socket handle of " + std::to_string(n) + " bytes");
  SockHandle h;
  std::memcpy(&h, bytes, sizeof(h));
  if (h.magic != kSockMagic)
    return remoteError("socket handle has magic " + std::to_string(h.magic) +
                       " (the peer uses another net backend, or another version?)");
  if (h.nsocks == 0 || h.nsocks > kMaxSocksPerConn)
    return remoteError("socket handle asks for " + std::to_string(h.nsocks) + " sockets, expected 1.." +
                       std::to_string(kMaxSocksPerConn));
  COLL_RETURN_IF_FAILED(checkSockAddr(h.addr, "socket handle"));
  *out = h;
  return okStatus();
}

Status parseSockHello(const void* bytes, size_t n, uint32_t nsocks, SockHello* out) {
  if (n != sizeof(SockHello)) return remoteError("socket hello of " + std::to_string(n) + " bytes");
  SockHello h;
  std::memcpy(&h, bytes, sizeof(h));
  if (h.body.magic != kSockMagic)
    return remoteError("socket hello has magic " + std::to_string(h.body.magic) + " (no key presented?)");
  if (h.body.idx >= nsocks)
    return remoteError("socket hello for socket " + std::to_string(h.body.idx) + " of a connection of " +
                       std::to_string(nsocks));
  *out = h;
  return okStatus();
}

Status parseSockHeader(const void* bytes, size_t n, size_t posted, SockHeader* out) {
  uint64_t word;
  if (n != sizeof(word)) return remoteError("message header of " + std::to_string(n) + " bytes");
  std::memcpy(&word, bytes, sizeof(word));
  const SockHeader h{word & kLenMask, word >> kPadShift};
  if (h.pad > kMaxPad) return remoteError("corrupt message header (padding " + std::to_string(h.pad) + ")");
  if (h.len > posted)
    return remoteError("message of " + std::to_string(h.len) + " bytes exceeds the posted " + std::to_string(posted) +
                       " bytes (do the ranks use the same COLL_BUFFSIZE?)");
  *out = h;
  return okStatus();
}

}  // namespace coll

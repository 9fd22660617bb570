// What the socket net backend puts on the wire (socket_net.h describes the protocol): the
// handle a listener publishes, the hello that opens each socket of a connection, and the
// length word before each message. The parse* functions check every field against its
// limit before the backend uses it; the fuzz targets (tests/fuzz/) call them too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/status.h"
#include "bootstrap/auth.h"
#include "bootstrap/socket.h"

namespace coll {

constexpr uint32_t kSockMagic = 0xC0115C0Cu;
constexpr uint32_t kMaxSocksPerConn = 256;  // socketsPerConn() makes at most 16 x 16
// The length word: the message's bytes below kPadShift, the padding's above.
constexpr int kPadShift = 56;
constexpr uint64_t kLenMask = (uint64_t{1} << kPadShift) - 1;
constexpr uint64_t kMaxPad = 63;  // socketHeaderPad aligns modulo 64

struct SockHandle {
  uint32_t magic;
  uint32_t nsocks;
  SockAddr addr;
  AuthNonce nonce;  // the listener's challenge: each socket's hello proves the key over it
};

// The first bytes on each socket of a connection: which socket it is, of which connection,
// and the proof that the connector knows the communicator's key (auth.h), over the
// listener's nonce and the rest of the hello.
struct SockHelloBody {
  uint32_t magic;
  uint32_t idx;  // which socket of the connection this is
  uint64_t connId;
};
struct SockHello {
  SockHelloBody body;
  Digest mac;
};

struct SockHeader {
  uint64_t len;  // the message's bytes
  uint64_t pad;  // bytes of padding between the length word and the message
};

// Each returns an error saying which field is wrong and its value; callers prefix who sent it.
Status parseSockHandle(const void* bytes, size_t n, SockHandle* out);
// nsocks: the sockets the listener expects per connection.
Status parseSockHello(const void* bytes, size_t n, uint32_t nsocks, SockHello* out);
// posted: the bytes the receiver posted for the message (it may not be longer).
Status parseSockHeader(const void* bytes, size_t n, size_t posted, SockHeader* out);

}  // namespace coll

// The socket net backend: TCP over the interface chosen by COLL_SOCKET_IFNAME.
//
// A connection is COLL_NSOCKS_PERTHREAD x COLL_SOCKET_NTHREADS sockets (at least one),
// all TCP_NODELAY and non-blocking. A message travels as an 8-byte length on socket 0
// (with the length of a padding that follows it, socketHeaderPad), then its bytes striped over the sockets in order (messages under 64 KiB use socket 0
// only). Every socket carries its parts of successive messages in message order, so the
// receiver reassembles without extra headers. The caller's thread progresses all sockets
// from test(); nothing blocks. A duplex pair (NetBackend::reverse) runs the opposite
// direction over duplicates of the same sockets, with its own queues. A peer that sent
// everything may close: each socket is read to its end, and only a receive that still
// waits for bytes on a closed socket fails (the peer's close reaches the sockets one by
// one, and the receiver posts ahead of the last message).
#pragma once

#include <memory>

#include "bootstrap/socket.h"
#include "transport/net/net.h"

namespace coll {

std::unique_ptr<NetBackend> makeSocketBackend();

// How a message of `size` bytes is split over `nsocks` sockets: part i is
// [i*partLen, min(size, (i+1)*partLen)); returns the number of parts.
int socketStripe(size_t size, int nsocks, size_t* partLen);

// Bytes of padding after the 8-byte length word of a `size`-byte message from `data`, so
// that the data's offset in the stream matches its source's offset modulo 64 (0 for
// small messages). Loopback TCP copies a message into page fragments that restart at
// offset 0 when the previous ones were consumed; data 8 bytes past its source's place in
// the page makes that copy up to 15x slower here (docs/PERFORMANCE.md).
size_t socketHeaderPad(const void* data, size_t size);

// For tests: the listener's address in a socket backend's handle, which a test may point
// elsewhere (to record what a connector sends).
SockAddr socketHandleAddr(const NetHandle& handle);
void setSocketHandleAddr(NetHandle* handle, const SockAddr& addr);

}  // namespace coll

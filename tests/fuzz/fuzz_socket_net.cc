// libFuzzer target: what the socket net backend reads from a peer (socket_wire.h): the
// handle it connects to, the hello on each accepted socket, the length word before each
// message. The first byte picks which, and sets the posted size and sockets expected.
#include <cstdint>
#include <vector>

#include "fuzz_input.h"
#include "transport/net/socket/socket_wire.h"

using namespace coll;
using coll::fuzz::padded;
using coll::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t sel = 0;
  if (!coll::fuzz::takeSelector(&data, &size, &sel)) return 0;
  switch (sel % 3) {
    case 0: {
      auto b = padded(data, size, 112);  // a NetHandle's bytes
      SockHandle h;
      if (parseSockHandle(b.data(), b.size(), &h).ok()) {
        require(h.nsocks >= 1 && h.nsocks <= kMaxSocksPerConn, "handle sockets");
        std::vector<int> socks(h.nsocks);  // what connect() makes
        (void)h.addr.str();
      }
      break;
    }
    case 1: {
      const uint32_t nsocks = 1 + (sel >> 2 & 15);
      auto b = padded(data, size, sizeof(SockHello));
      SockHello h;
      if (parseSockHello(b.data(), b.size(), nsocks, &h).ok()) require(h.body.idx < nsocks, "hello index");
      break;
    }
    default: {
      const size_t posted = size_t{1} << (sel >> 2 & 31);
      auto b = padded(data, size, sizeof(uint64_t));
      SockHeader h;
      if (parseSockHeader(b.data(), b.size(), posted, &h).ok())
        require(h.len <= posted && h.pad <= kMaxPad, "header bounds");
      break;
    }
  }
  return 0;
}

// libFuzzer target: what the ib backend reads from a peer (ib_wire.h): the handle, the
// connection info over the TCP side channel, and a credit (CTS entry) in its FIFO.
#include <cstdint>
#include <vector>

#include "fuzz_input.h"
#include "transport/net/ib/ib_wire.h"

using namespace coll;
using namespace coll::ib;
using coll::fuzz::padded;
using coll::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint8_t sel = 0;
  if (!coll::fuzz::takeSelector(&data, &size, &sel)) return 0;
  switch (sel % 3) {
    case 0: {
      auto b = padded(data, size, 112);  // a NetHandle's bytes
      IbHandle h;
      if (parseIbHandle(b.data(), b.size(), &h).ok()) (void)h.addr.str();
      break;
    }
    case 1: {
      auto b = padded(data, size, sizeof(PeerInfo));
      PeerInfo p;
      if (parseIbPeerInfo(b.data(), b.size(), sel & 4, &p).ok()) {
        require(p.nQps >= 1 && p.nQps <= kMaxQpsPerConn, "ib QPs");
        uint64_t sum = 0;
        for (uint32_t i = 0; i < p.nQps; ++i) sum += p.qpn[i] + p.psn[i];  // what connectQps reads
        (void)sum;
      }
      break;
    }
    default: {
      auto b = padded(data, size, sizeof(CtsEntry) + sizeof(uint32_t));
      CtsEntry cts;
      uint32_t send;
      std::memcpy(&cts, b.data(), sizeof(cts));
      std::memcpy(&send, b.data() + sizeof(cts), sizeof(send));
      if (checkCts(cts, send).ok()) require(send <= cts.size, "credit too small");
      break;
    }
  }
  return 0;
}

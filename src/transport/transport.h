// Connecting connectors: the three-phase exchange over the bootstrap that connects every
// receive and send this rank needs, through the rows of the transport table (table.h).
//
// The receiver decides: it takes the first row of the table that can connect it to its
// sender (p2p for device connectors where the GPUs allow, then shm on one host unless
// COLL_SHM_DISABLE=1, then net) and ships that row's index and its handle bytes to the
// sender, so both sides always agree. Connecting runs in three phases so that one thread can
// connect several communicators of one process at once (collCommInitAll, grouped
// send/recv) without deadlock:
//   1. every receiver sets up its side (FIFO or listener) and sends the handle (never blocks);
//   2. every sender waits for its handle, connects through the row, and acknowledges;
//   3. every receiver waits for the acknowledgement and finishes its pending receive.
// Duplex: an LL or tree connection whose receive and send sides face the same peer
// under one tag (two ranks' LL pair, a tree edge) is one connection when its row has
// duplex hooks that are enabled (net: COLL_NET_DUPLEX=1 and a backend that can):
// the lower rank listens, the higher connects in phase 2 and gets both directions, the
// lower accepts in phase 3 and gets both. (Measured on loopback: 8-byte exchange 10.8 ->
// 7.2 us, the acknowledgements riding on data; docs/PERFORMANCE.md.)
#pragma once

#include <memory>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "transport/table.h"

namespace coll {

class ConnectJob {
 public:
  // device: connectors for device executors (p2p where possible, transport/p2p/p2p.h);
  // emulated: COLL_DEVICE_EMULATE (p2p FIFOs in host memory between threads).
  // net: the communicator's net backend (null: the process default).
  ConnectJob(Bootstrap* bootstrap, size_t slotBytes, bool device = false, bool emulated = false,
             NetBackend* net = nullptr)
      : bs_(bootstrap),
        slotBytes_(slotBytes),
        options_{device, emulated, bootstrap->abortFlag(), &bootstrap->authKey(), net} {}
  void addRecv(int peer, uint64_t tag, std::unique_ptr<RecvConnector>* out);
  void addSend(int peer, uint64_t tag, std::unique_ptr<SendConnector>* out);
  bool empty() const { return recvs_.empty() && sends_.empty(); }

  Status phase1();
  Status phase2();
  Status phase3();
  // All three phases in order (one communicator driven by its own thread).
  Status run();

 private:
  struct RecvItem {
    int peer;
    uint64_t tag;
    std::unique_ptr<RecvConnector>* out;
    uint32_t row = 0;                                // index in transportTable()
    std::unique_ptr<PendingRecv> pending = nullptr;  // none for the higher rank of a duplex pair
    int partner = -1;                                // duplex: index of the send item to the same peer and tag
  };
  struct SendItem {
    int peer;
    uint64_t tag;
    std::unique_ptr<SendConnector>* out;
    int partner = -1;  // duplex: index of the receive item
  };
  void pairDuplex();
  Link linkTo(int peer, uint64_t tag) const;
  Status connectSend(SendItem& s, const Transport& row, bool duplex, std::span<const std::byte> handle);
  Bootstrap* bs_;
  size_t slotBytes_;
  TransportOptions options_;
  std::vector<RecvItem> recvs_;
  std::vector<SendItem> sends_;
};

// Bootstrap tags used by connection setup: kind in the top byte.
constexpr uint64_t kTagRing = 1ull << 56;
constexpr uint64_t kTagP2p = 2ull << 56;
constexpr uint64_t kTagTree = 6ull << 56;         // | tree << 8 | channel
constexpr uint64_t kTagOneShotPair = 7ull << 56;  // the one-shot pair of two ranks over net
constexpr uint64_t kTagDevice = 1ull << 54;       // | kTagRing/kTagTree/kTagP2p ...: the device set
constexpr uint64_t kTagAck = 1ull << 55;

}  // namespace coll

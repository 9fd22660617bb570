// The transport table: what one transport is to the rest of the library.
//
// A transport is one row, a `Transport` (NCCL's ncclTransport): a name, whether it can
// connect two ranks, how the receiver sets up its side and how the sender connects to
// it. The table (table.cc) lists the rows in order of preference; the receiver of each
// connection takes the first row that can connect it to its sender and ships the row's
// index and the handle bytes of its pending receive through the bootstrap, so both ends
// always agree (transport.h runs the three phases of that exchange).
//
// Every row's receive side is the same shape, `PendingRecv`: handle bytes for the sender,
// then finish() once the sender has connected. A row's own handle is a fixed-size POD of
// at most kMaxHandleBytes (handleBytes() checks it at compile time).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "bootstrap/wire.h"
#include "transport/connector.h"

namespace coll {

class NetBackend;

// What the connectors are for; the same for both ends of a connection.
struct TransportOptions {
  bool device = false;                        // connectors for device executors (p2p may serve them)
  bool emulated = false;                      // COLL_DEVICE_EMULATE: host blocks stand in for GPU memory
  const std::atomic<bool>* cancel = nullptr;  // the communicator's abort flag: ends waits to connect
  const AuthKey* auth = nullptr;              // the communicator's key: net connections prove it (auth.h)
  NetBackend* net = nullptr;                  // the communicator's net backend; null: the default
};

// The two ends a row connects, as the bootstrap knows them.
struct Link {
  const PeerInfo& self;
  const PeerInfo& peer;
  int peerRank;
  TransportOptions options;
  int channel = 0;  // the connection's channel (its tag's low byte): which net device (rail) serves it
};

// Both directions between this rank and one peer over one connection (duplex rows).
struct DuplexConnectors {
  std::unique_ptr<SendConnector> send;
  std::unique_ptr<RecvConnector> recv;
};

// The receiver's half of a connection between phase 1 and phase 3 (transport.h).
class PendingRecv {
 public:
  virtual ~PendingRecv() = default;
  // What the sender needs to connect, shipped to it through the bootstrap.
  virtual std::span<const std::byte> handle() const = 0;
  // After the sender connected and acknowledged: the receive side.
  virtual Result<std::unique_ptr<RecvConnector>> finish() = 0;
  // Rows with duplex hooks: accepts the peer's DuplexHooks::connect and sends back over
  // the same connection.
  virtual Result<DuplexConnectors> finishDuplex() { return internalError("this transport has no duplex connections"); }
};

// Optional: one connection carrying both directions of an LL pair or a tree edge (net;
// transport.h says who listens and who connects).
struct DuplexHooks {
  bool (*enabled)(const TransportOptions& options);  // configured and supported; the same on every rank
  // Connects to the peer's pending receive and receives over the same connection.
  Result<DuplexConnectors> (*connect)(const Link& link, std::span<const std::byte> handle);
};

struct Transport {
  const char* name;  // in logs ("rank 1 <- rank 0 via shm")
  bool (*canConnect)(const PeerInfo& self, const PeerInfo& peer, const TransportOptions& options);
  // Receiver, phase 1: creates what the sender will connect to. Must not block.
  Result<std::unique_ptr<PendingRecv>> (*setupRecv)(const Link& link, size_t slotBytes);
  // Sender, phase 2: connects to the receiver's PendingRecv::handle().
  Result<std::unique_ptr<SendConnector>> (*connectSend)(const Link& link, std::span<const std::byte> handle);
  const DuplexHooks* duplex = nullptr;
};

// The rows in order of preference (table.cc).
std::span<const Transport* const> transportTable();
// Index in transportTable() of the first row that can connect `self` to `peer` (the last
// row, net, always can); this is what the receiver ships to the sender.
uint32_t chooseTransport(const PeerInfo& self, const PeerInfo& peer, const TransportOptions& options = {});

// Handles travel in a fixed-size frame (transport.cc); a row's handle must fit.
constexpr size_t kMaxHandleBytes = 120;

template <typename H>
std::span<const std::byte> handleBytes(const H& h) {
  static_assert(std::is_trivially_copyable_v<H> && sizeof(H) <= kMaxHandleBytes,
                "a transport handle is a POD of at most kMaxHandleBytes");
  return std::as_bytes(std::span<const H, 1>(&h, 1));
}

// The handle a row's handleBytes() made on the receiver, back in its type.
template <typename H>
Result<H> handleAs(std::span<const std::byte> bytes, const char* transport) {
  if (bytes.size() != sizeof(H))
    return internalError(std::string("a ") + transport + " handle of " + std::to_string(bytes.size()) +
                         " bytes arrived, expected " + std::to_string(sizeof(H)));
  H h;
  std::memcpy(&h, bytes.data(), sizeof(H));
  return h;
}

}  // namespace coll

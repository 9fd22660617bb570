// The connectors one kind of executor runs over. A communicator holds two sets
// (collComm::conns): the host set, which the host executor drives, and for ranks bound to
// a device (or emulated) the device set, whose FIFOs may be in device memory (p2p) that
// the host cannot touch. Both have one shape: ring channels, tree edges, send/recv peers.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <vector>

#include "transport/connector.h"

namespace coll {

// Ring channels of the host set at most (COLL_MIN/MAX_NCHANNELS and config channel bounds
// are clamped to it); the device set's bound is device_exec.h's kDeviceMaxChannels.
constexpr int kMaxChannels = 32;

struct ConnectorSet {
  // A ring channel: data flows rank -> ring next.
  struct Channel {
    std::unique_ptr<SendConnector> send;
    std::unique_ptr<RecvConnector> recv;
  };
  // This rank's edges in one tree of one channel (algorithms/tree.cc). The shape is set at
  // init; the connectors are connected by the first operation that runs on a tree.
  struct TreeEdges {
    int parent = -1;
    std::vector<int> children;
    std::unique_ptr<SendConnector> up;    // to the parent
    std::unique_ptr<RecvConnector> down;  // from the parent
    std::vector<std::unique_ptr<RecvConnector>> fromChild;
    std::vector<std::unique_ptr<SendConnector>> toChild;
  };

  std::vector<Channel> channels;
  std::vector<std::array<TreeEdges, 2>> trees;  // [channel][tree]
  bool treesConnected = false;
  // Lazily connected point-to-point connectors, one per peer and direction.
  std::map<int, std::unique_ptr<SendConnector>> peerSend;
  std::map<int, std::unique_ptr<RecvConnector>> peerRecv;
};

}  // namespace coll

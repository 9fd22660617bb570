#include "transport/table.h"

#include "transport/net/net.h"
#include "transport/p2p/p2p.h"
#include "transport/shm/shm.h"

namespace coll {

// The transport table, in order of preference: the receiver of a connection takes the
// first row whose canConnect() holds. p2p only answers for device connectors (GPU memory
// the sender's kernel writes); shm for ranks of one host unless COLL_SHM_DISABLE=1; net
// always, so it stays last.
//
// How to add a transport: a folder src/transport/<name>/ with <name>.h declaring its row
// (`extern const Transport k<Name>Transport;`, see table.h for what a row is) and
// <name>.cc defining it with its connectors, its PendingRecv and its handle (a POD of at
// most kMaxHandleBytes); then one row below, where its preference puts it, and the .cc in
// CMakeLists.txt. Nothing in transport.cc changes (docs/DESIGN.md, "The transport table").
std::span<const Transport* const> transportTable() {
  static constexpr const Transport* kRows[] = {&kP2pTransport, &kShmTransport, &kNetTransport};
  return kRows;
}

uint32_t chooseTransport(const PeerInfo& self, const PeerInfo& peer, const TransportOptions& options) {
  const auto rows = transportTable();
  for (uint32_t i = 0; i < rows.size(); ++i)
    if (rows[i]->canConnect(self, peer, options)) return i;
  return static_cast<uint32_t>(rows.size() - 1);  // not reached: net connects any two ranks
}

}  // namespace coll

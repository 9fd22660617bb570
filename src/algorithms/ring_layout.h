// The ring: the order of a communicator's ranks that rings and chains follow, and one
// rank's place in it. Made once at init (comm/comm.cc); the algorithms, the one-shots and
// the device path read the communicator's through a reference.
#pragma once

#include <cstddef>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace coll {

struct RingLayout {
  std::vector<int> order;  // ranks in ring order (ringOrder)
  std::vector<int> posOf;  // rank -> its position in `order`
  int pos = 0;             // this rank's position
  int next = 0, prev = 0;  // the ranks after and before this one

  RingLayout() = default;
  // `order` (a permutation of the ranks) seen from `rank`.
  RingLayout(std::vector<int> order, int rank);
  int size() const { return static_cast<int>(order.size()); }
  // The rank at position p (taken modulo the size, so p may run past either end).
  int rankAt(int p) const { return order[static_cast<size_t>(((p % size()) + size()) % size())]; }
};

// The ring's order of ranks: grouped by host (hosts in order of their first rank), inside
// a host by GPU: in the host's best GPU ring (PeerInfo::ringPos, from the topology: NVLink
// and PCIe distance, graph.h), then in PCI bus id order (host-memory ranks and GPUs the
// topology did not show first), by rank inside a group. Contiguous placements keep rank
// order; round-robin ones (mpirun --map-by node, threads spread over GPUs) cross between
// hosts and GPUs once per group instead of at every hop, and a device numbering that
// jumps between sockets (CUDA_VISIBLE_DEVICES=0,4,1,5) does not make the ring jump with it.
std::vector<int> ringOrder(const std::vector<PeerInfo>& peers);

}  // namespace coll

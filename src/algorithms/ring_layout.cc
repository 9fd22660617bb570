#include "algorithms/ring_layout.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace coll {

RingLayout::RingLayout(std::vector<int> o, int rank) : order(std::move(o)), posOf(order.size(), 0) {
  for (int p = 0; p < size(); ++p) posOf[static_cast<size_t>(order[static_cast<size_t>(p)])] = p;
  pos = posOf[static_cast<size_t>(rank)];
  next = rankAt(pos + 1);
  prev = rankAt(pos - 1);
}

std::vector<int> ringOrder(const std::vector<PeerInfo>& peers) {
  const int n = static_cast<int>(peers.size());
  std::vector<std::string> hosts;  // in order of first appearance
  std::vector<int> hostOf(static_cast<size_t>(n));
  std::vector<std::string> busOf(static_cast<size_t>(n));
  std::vector<int> posOf(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const PeerInfo& p = peers[static_cast<size_t>(r)];
    const std::string host(p.hostId, strnlen(p.hostId, sizeof(p.hostId)));
    auto it = std::find(hosts.begin(), hosts.end(), host);
    if (it == hosts.end()) it = hosts.insert(hosts.end(), host);
    hostOf[static_cast<size_t>(r)] = static_cast<int>(it - hosts.begin());
    busOf[static_cast<size_t>(r)] = std::string(p.busId, strnlen(p.busId, sizeof(p.busId)));
    posOf[static_cast<size_t>(r)] = p.ringPos;
  }
  // Host, then place in the host's GPU ring (-1 first: host-memory ranks, GPUs not
  // placed), then bus id (PCI order follows the machine's switches and sockets, whatever
  // the device numbering; host-memory ranks, with none, first), then rank.
  std::vector<int> order(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) order[static_cast<size_t>(r)] = r;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    if (hostOf[ua] != hostOf[ub]) return hostOf[ua] < hostOf[ub];
    if (posOf[ua] != posOf[ub]) return posOf[ua] < posOf[ub];
    return busOf[ua] < busOf[ub];
  });
  return order;
}

}  // namespace coll

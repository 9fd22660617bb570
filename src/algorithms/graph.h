// Graph search over a topology: rings inside a node, the ring of rings and double binary
// trees across nodes.
//
// Rings inside a node. The GPUs of a node are ordered to maximise the slowest hop (the
// bottleneck of path(g[i], g[i+1]) over the cycle), then to minimise the sum of the hops'
// path types (PCI-tree-local orders beat ones that cross the CPU), then to stay closest
// to the PCI order. Up to 10 GPUs the search is exhaustive (9! cycles with the first GPU
// fixed, pruned by the bottleneck found so far); beyond, a greedy walk from the PCI order
// takes the best next hop. On an NVSwitch system every cycle is equal and the PCI order
// wins; on a PCIe box the order keeps GPUs under one switch adjacent.
//
// Channels. One channel per NIC of the node (at least one). Channel c enters the node
// through NIC c % nNics: the cycle is rotated to start at the GPU with the best path to
// that NIC and turned in the direction whose last GPU is closest to a NIC; it leaves
// through the NIC nearest that last GPU (the channel's own NIC when equally near). So
// channels spread over NICs, and every ring enters and leaves next to its end GPUs.
//
// Across nodes (ranks numbered node * gpusPerNode + position of the GPU in dev order):
//   - the ring of channel c visits node 0's ring, then node 1's, ..., and returns;
//   - double binary trees over the nodes: tree 0 is a balanced binary tree in which
//     node k's level is the number of trailing zero bits of k (node 0 the root, with one
//     child); tree 1 mirrors it (k -> n-1-k) for an even node count and shifts it
//     (k -> k+1 mod n) for an odd one. A node that is inner in one tree is a leaf in the
//     other (for an odd count, except node 0, which is inner in both). Inside a node the
//     tree is a chain in ring order: its first GPU talks to the parent and child nodes.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "topology/topo.h"

namespace coll {

struct NodeRing {
  std::vector<int> gpus;            // GPU devs in ring order (entry GPU first)
  int netIn = -1;                   // NET node index entered through (-1: no NIC)
  int netOut = -1;                  // NET node index left through
  double bw = 0;                    // slowest hop inside the node, GB/s
  PathType worst = PathType::kLoc;  // worst hop type inside the node
};

struct TreeLinks {
  int parent = -1;
  std::vector<int> children;
};

struct Graphs {
  int nodes = 1;
  int gpusPerNode = 0;
  std::vector<NodeRing> rings;                // per channel, inside one node
  std::vector<std::vector<int>> globalRings;  // per channel: every rank in ring order
  // [tree 0/1][rank]: parent and children over all ranks (per channel the same shape,
  // rotated with the channel's ring inside each node: trees[c % 2] serves channel c).
  std::vector<std::vector<std::vector<TreeLinks>>> trees;  // [channel][tree][rank]
};

// Node-level double binary tree: parent and children of `node` in tree 0 and tree 1.
void doubleBinaryTree(int nNodes, int node, TreeLinks out[2]);

// Both trees over ranks grouped by node: members[k] holds node k's ranks in chain order,
// head first. Inside a node the ranks form a chain; the heads form the double binary
// tree. Every rank in [0, nranks) must appear exactly once. [tree][rank].
std::vector<std::vector<TreeLinks>> treesOverNodes(const std::vector<std::vector<int>>& members, int nranks);

// Rings and trees for `nodes` copies of the topology's node. maxChannels caps the
// channel count (0: one per NIC). A topology without GPUs (host ranks) gets
// hostRanksPerNode ranks per node, in rank order (as host communicators run them).
Result<Graphs> searchGraphs(const Topology& topo, int nodes, int maxChannels = 0, int hostRanksPerNode = 1);

// The order of the GPUs (node indices of topo.gpus()) maximising the bottleneck, as
// described above; bottleneck and worst hop type through the out parameters.
std::vector<int> bestRingOrder(const Topology& topo, double* bw, PathType* worst);

// The position in bestRingOrder of the GPU at PCI address busId ("0000:1b:00.0"; case and
// domain width as cudaDeviceGetPCIBusId or NVML write it), or -1 if the topology has none.
// Ranks of one host sort by it (ring_layout.h ringOrder), so their ring follows NVLink and PCIe
// distance instead of bus numbers.
int gpuRingPosition(const Topology& topo, const std::string& busId);

}  // namespace coll

#include "algorithms/graph.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace coll {

void doubleBinaryTree(int nNodes, int node, TreeLinks out[2]) {
  // Tree 0 over k in [0, n): the parent of k clears its lowest set bit and sets the next
  // one up (when that stays below n), so levels follow trailing zeros; 0 is the root.
  auto btree = [nNodes](int k, TreeLinks* t) {
    t->parent = -1;
    t->children.clear();
    if (nNodes <= 1) return;
    if (k == 0) {  // the root's one child: the largest power of two below n
      int top = 1;
      while (top * 2 < nNodes) top *= 2;
      t->children.push_back(top);
      return;
    }
    int low = k & -k;
    int up = (k - low) | (low << 1);
    t->parent = up < nNodes ? up : k - low;
    for (int half = low >> 1; half > 0; half >>= 1) {
      // Children sit half a level below on either side; the right one may be past the
      // end, then the next lower level's right child stands in.
      if (t->children.empty()) t->children.push_back(k - half);
      if (k + half < nNodes) {
        t->children.push_back(k + half);
        break;
      }
    }
  };
  btree(node, &out[0]);
  TreeLinks t;
  auto map = [&](int v, bool forward) {
    if (v < 0) return v;
    if (nNodes % 2 == 0) return nNodes - 1 - v;
    return forward ? (v + nNodes - 1) % nNodes : (v + 1) % nNodes;
  };
  btree(map(node, true), &t);
  out[1].parent = map(t.parent, false);
  out[1].children.clear();
  for (int c : t.children) out[1].children.push_back(map(c, false));
}

std::vector<std::vector<TreeLinks>> treesOverNodes(const std::vector<std::vector<int>>& members, int nranks) {
  std::vector<std::vector<TreeLinks>> trees(2, std::vector<TreeLinks>(static_cast<size_t>(nranks)));
  const int nodes = static_cast<int>(members.size());
  for (int k = 0; k < nodes; ++k) {
    const std::vector<int>& m = members[static_cast<size_t>(k)];
    if (m.empty()) continue;
    TreeLinks nodeLinks[2];
    doubleBinaryTree(nodes, k, nodeLinks);
    auto head = [&](int node) { return members[static_cast<size_t>(node)].front(); };
    for (int t = 0; t < 2; ++t) {
      for (size_t i = 0; i < m.size(); ++i) {
        TreeLinks& l = trees[static_cast<size_t>(t)][static_cast<size_t>(m[i])];
        l.children.clear();
        if (i == 0) {
          l.parent = nodeLinks[t].parent < 0 ? -1 : head(nodeLinks[t].parent);
          for (int child : nodeLinks[t].children) l.children.push_back(head(child));
        } else {
          l.parent = m[i - 1];
        }
        // The chain's next rank first: it is nearest (same node).
        if (i + 1 < m.size()) l.children.insert(l.children.begin(), m[i + 1]);
      }
    }
  }
  return trees;
}

namespace {

int typeCost(PathType t) { return static_cast<int>(t); }

struct Search {
  const Topology& topo;
  std::vector<int> gpus;  // node indices
  size_t n;
  std::vector<int> cur, best;
  std::vector<bool> used;
  double bestBw = -1;
  int bestCost = 0;

  double bw(int a, int b) const { return topo.path(gpus[static_cast<size_t>(a)], gpus[static_cast<size_t>(b)]).bw; }
  int cost(int a, int b) const {
    return typeCost(topo.path(gpus[static_cast<size_t>(a)], gpus[static_cast<size_t>(b)]).type);
  }

  void dfs(double bn, int sum) {
    if (cur.size() == n) {
      double total = std::min(bn, bw(cur.back(), cur.front()));
      int c = sum + cost(cur.back(), cur.front());
      if (total > bestBw || (total == bestBw && c < bestCost)) {
        bestBw = total;
        bestCost = c;
        best = cur;
      }
      return;
    }
    for (size_t v = 0; v < n; ++v) {
      if (used[v]) continue;
      double nb = std::min(bn, bw(cur.back(), static_cast<int>(v)));
      int c = sum + cost(cur.back(), static_cast<int>(v));
      if (nb < bestBw || (nb == bestBw && c >= bestCost)) continue;  // cannot win
      used[v] = true;
      cur.push_back(static_cast<int>(v));
      dfs(nb, c);
      cur.pop_back();
      used[v] = false;
    }
  }
};

double pathBw(const Topology& t, int a, int b) { return t.path(a, b).bw; }

// The NET nodes in order of closeness to a GPU (widest path, then best type, then the
// preferred one, then dev order).
int nearestNet(const Topology& t, int gpu, int prefer) {
  int best = -1;
  for (int net : t.nets()) {
    if (best < 0) {
      best = net;
      continue;
    }
    const TopoPath& a = t.path(gpu, net);
    const TopoPath& b = t.path(gpu, best);
    if (a.bw > b.bw || (a.bw == b.bw && a.type < b.type) ||
        (a.bw == b.bw && a.type == b.type && net == prefer && best != prefer))
      best = net;
  }
  return best;
}

}  // namespace

std::vector<int> bestRingOrder(const Topology& topo, double* bw, PathType* worst) {
  Search s{topo, topo.gpus(), topo.gpus().size(), {}, {}, {}};
  *bw = 0;
  *worst = PathType::kLoc;
  if (s.n == 0) return {};
  if (s.n == 1) {
    *bw = 1e9;
    return {topo.gpus()[0]};
  }
  if (s.n <= 10) {
    s.used.assign(s.n, false);
    // Seed with the PCI (dev) order so ties keep it.
    s.best.resize(s.n);
    std::iota(s.best.begin(), s.best.end(), 0);
    s.bestBw = 1e18;
    for (size_t i = 0; i < s.n; ++i) s.bestBw = std::min(s.bestBw, s.bw(s.best[i], s.best[(i + 1) % s.n]));
    s.bestCost = 0;
    for (size_t i = 0; i < s.n; ++i) s.bestCost += s.cost(s.best[i], s.best[(i + 1) % s.n]);
    s.used[0] = true;
    s.cur = {0};
    s.dfs(1e18, 0);
  } else {
    std::vector<bool> used(s.n, false);
    s.best = {0};
    used[0] = true;
    while (s.best.size() < s.n) {
      int from = s.best.back(), pick = -1;
      for (size_t v = 0; v < s.n; ++v) {
        if (used[v]) continue;
        if (pick < 0 || s.bw(from, static_cast<int>(v)) > s.bw(from, pick) ||
            (s.bw(from, static_cast<int>(v)) == s.bw(from, pick) &&
             s.cost(from, static_cast<int>(v)) < s.cost(from, pick)))
          pick = static_cast<int>(v);
      }
      used[static_cast<size_t>(pick)] = true;
      s.best.push_back(pick);
    }
  }
  std::vector<int> order;
  double b = 1e18;
  PathType w = PathType::kLoc;
  for (size_t i = 0; i < s.n; ++i) {
    int a = topo.gpus()[static_cast<size_t>(s.best[i])];
    int c = topo.gpus()[static_cast<size_t>(s.best[(i + 1) % s.n])];
    order.push_back(a);
    b = std::min(b, pathBw(topo, a, c));
    w = std::max(w, topo.path(a, c).type);
  }
  *bw = b;
  *worst = w;
  return order;
}

namespace {

// domain:bus:device of a PCI address; false if it is not one.
bool parsePciAddress(const std::string& s, unsigned out[3]) {
  unsigned fn = 0;
  return std::sscanf(s.c_str(), "%x:%x:%x.%x", &out[0], &out[1], &out[2], &fn) == 4;
}

}  // namespace

int gpuRingPosition(const Topology& topo, const std::string& busId) {
  unsigned want[3];
  if (!parsePciAddress(busId, want)) return -1;
  double bw;
  PathType worst;
  const std::vector<int> order = bestRingOrder(topo, &bw, &worst);
  for (size_t i = 0; i < order.size(); ++i) {
    unsigned have[3];
    if (parsePciAddress(topo.node(order[i]).busId, have) && have[0] == want[0] && have[1] == want[1] &&
        have[2] == want[2])
      return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Entry: the GPU closest to this channel's NIC, preferring one not yet an entry.
size_t ringEntry(const Topology& topo, const std::vector<int>& cycle, int net, const std::vector<int>& startsUsed) {
  size_t start = 0;
  if (net >= 0) {
    auto better = [&](size_t i, size_t j) {
      const TopoPath& a = topo.path(cycle[i], net);
      const TopoPath& b = topo.path(cycle[j], net);
      if (a.bw != b.bw) return a.bw > b.bw;
      if (a.type != b.type) return a.type < b.type;
      bool ua = std::count(startsUsed.begin(), startsUsed.end(), cycle[i]) > 0;
      bool ub = std::count(startsUsed.begin(), startsUsed.end(), cycle[j]) > 0;
      return !ua && ub;
    };
    for (size_t i = 1; i < cycle.size(); ++i)
      if (better(i, start)) start = i;
  }
  return start;
}

// The cycle's nodes read from `start`, one way round or the other.
std::vector<int> orientRing(const Topology& topo, const std::vector<int>& cycle, size_t start, int net) {
  size_t n = cycle.size();
  std::vector<int> fwd, bwd;
  for (size_t i = 0; i < n; ++i) {
    fwd.push_back(cycle[(start + i) % n]);
    bwd.push_back(cycle[(start + n - i) % n]);
  }
  // Direction: the last GPU closer to a NIC (the channel's NIC breaks ties).
  if (net >= 0 && n > 1) {
    int ef = nearestNet(topo, fwd.back(), net), eb = nearestNet(topo, bwd.back(), net);
    const TopoPath& pf = topo.path(fwd.back(), ef);
    const TopoPath& pb = topo.path(bwd.back(), eb);
    bool useBwd = pb.bw > pf.bw || (pb.bw == pf.bw && pb.type < pf.type) ||
                  (pb.bw == pf.bw && pb.type == pf.type && eb == net && ef != net);
    if (useBwd) fwd.swap(bwd);
  }
  return fwd;
}

// One channel's ring inside the node over `cycle`, through NET node `net` (-1: none);
// its entry GPU is appended to startsUsed so the next channels prefer another.
NodeRing channelRing(const Topology& topo, const std::vector<int>& cycle, double bw, PathType worst, int net,
                     std::vector<int>* startsUsed) {
  NodeRing r;
  r.bw = bw;
  r.worst = worst;
  if (cycle.empty()) return r;
  size_t start = ringEntry(topo, cycle, net, *startsUsed);
  startsUsed->push_back(cycle[start]);
  const std::vector<int> fwd = orientRing(topo, cycle, start, net);
  for (int node : fwd) r.gpus.push_back(topo.node(node).index);
  r.netIn = net;
  r.netOut = net >= 0 ? nearestNet(topo, fwd.back(), net) : -1;
  return r;
}

// The rings inside one node, one per channel: a channel per NET node (at least one, at
// most maxChannels when that is positive), NET nodes taken round robin.
std::vector<NodeRing> nodeRings(const Topology& topo, int maxChannels) {
  double bw = 0;
  PathType worst = PathType::kLoc;
  std::vector<int> cycle = bestRingOrder(topo, &bw, &worst);

  int nNets = static_cast<int>(topo.nets().size());
  int nch = std::max(1, nNets);
  if (maxChannels > 0) nch = std::min(nch, maxChannels);
  std::vector<int> startsUsed;
  std::vector<NodeRing> rings;
  for (int c = 0; c < nch; ++c) {
    int net = nNets ? topo.nets()[static_cast<size_t>(c % nNets)] : -1;
    rings.push_back(channelRing(topo, cycle, bw, worst, net, &startsUsed));
  }
  return rings;
}

// Host ranks: rank order inside a node, nodes in order; one ring per channel.
void addHostRankChannels(Graphs* g, int hostRanksPerNode) {
  int nodes = g->nodes, per = hostRanksPerNode, nranks = nodes * per;
  std::vector<std::vector<int>> members(static_cast<size_t>(nodes));
  std::vector<int> ring;
  for (int r = 0; r < nranks; ++r) {
    members[static_cast<size_t>(r / per)].push_back(r);
    ring.push_back(r);
  }
  for (size_t c = 0; c < g->rings.size(); ++c) {
    g->globalRings.push_back(ring);
    g->trees.push_back(treesOverNodes(members, nranks));
  }
}

// GPU ranks: each channel's node ring repeated on every node, and its trees.
void addGpuChannels(Graphs* g, const Topology& topo) {
  int nodes = g->nodes;
  // Rank of GPU dev d on node k: k * gpusPerNode + its position in dev order.
  int per = g->gpusPerNode;
  std::vector<int> posOfDev;
  for (size_t i = 0; i < topo.gpus().size(); ++i) {
    int dev = topo.node(topo.gpus()[i]).index;
    if (static_cast<size_t>(dev) >= posOfDev.size()) posOfDev.resize(static_cast<size_t>(dev) + 1, -1);
    posOfDev[static_cast<size_t>(dev)] = static_cast<int>(i);
  }
  auto rankOf = [&](int node, int dev) { return node * per + posOfDev[static_cast<size_t>(dev)]; };
  int nranks = nodes * per;
  for (const NodeRing& r : g->rings) {
    std::vector<int> ring;
    for (int k = 0; k < nodes; ++k)
      for (int dev : r.gpus) ring.push_back(rankOf(k, dev));
    g->globalRings.push_back(std::move(ring));

    // Trees: the node-level double binary trees with a chain inside each node in this
    // channel's ring order, whose head (the entry GPU) links to the other nodes.
    std::vector<std::vector<int>> members(static_cast<size_t>(nodes));
    for (int k = 0; k < nodes; ++k)
      for (int dev : r.gpus) members[static_cast<size_t>(k)].push_back(rankOf(k, dev));
    auto trees = treesOverNodes(members, nranks);
    g->trees.push_back(std::move(trees));
  }
}

}  // namespace

Result<Graphs> searchGraphs(const Topology& topo, int nodes, int maxChannels, int hostRanksPerNode) {
  if (nodes < 1) return invalidArgument("nodes=" + std::to_string(nodes) + ": must be at least 1");
  if (hostRanksPerNode < 1)
    return invalidArgument("ranks per node " + std::to_string(hostRanksPerNode) + ": must be at least 1");
  Graphs g;
  g.nodes = nodes;
  g.gpusPerNode = static_cast<int>(topo.gpus().size());
  g.rings = nodeRings(topo, maxChannels);
  if (g.gpusPerNode == 0) addHostRankChannels(&g, hostRanksPerNode);
  else addGpuChannels(&g, topo);
  return g;
}

}  // namespace coll

// colltopo: shows the topology Collectives sees and what it builds on it.
//
//   colltopo [--topo-file F] [--nodes K] [--channels N] [--xml] [--dot] [--json]
//
// Without an output flag it prints, for this machine (probed) or the file given
// (--topo-file, or COLL_TOPO_FILE / NCCL_TOPO_FILE): the machine as a tree, the path
// matrix between GPUs and NIC ports with NCCL's path types and bottleneck bandwidths,
// the rings of each channel (inside a node, and across K nodes), and the double binary
// trees across K nodes, and the tuner's choice per collective over message sizes
// (COLL_ALGO / COLL_PROTO apply). --xml prints NCCL's topology XML (what COLL_TOPO_DUMP_FILE
// writes), --dot Graphviz with the channels' rings drawn on the machine, --json the
// graph, paths, rings and trees for scripts.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "algorithms/graph.h"
#include "algorithms/tuner.h"
#include "base/param.h"
#include "topology/probe.h"
#include "topology/topo.h"
#include "transport/net/gdr.h"

using namespace coll;

namespace {

std::string fmtBw(double bw) {
  char b[32];
  if (bw >= 1e8) return "-";
  std::snprintf(b, sizeof(b), bw >= 100 ? "%.0f" : bw >= 10 ? "%.1f" : "%.2f", bw);
  return b;
}

std::string label(const Topology& t, int n) {
  const TopoNode& x = t.node(n);
  return x.name.empty() ? std::string(nodeTypeName(x.type)) + " " + x.busId : x.name;
}

int nodeByBusId(const Topology& t, const std::string& busId, NodeType type) {
  for (int i : t.ofType(type))
    if (t.node(i).busId == busId) return i;
  return -1;
}

void printMachine(const Topology& t, const XmlNode& x, int depth) {
  std::string pad(static_cast<size_t>(depth) * 2, ' ');
  if (x.name() == "cpu") {
    std::printf("%sCPU%s  %s %s family %s model %s, affinity %s\n", pad.c_str(), x.attrOr("numaid", "?").c_str(),
                x.attrOr("arch", "").c_str(), x.attrOr("vendor", "").c_str(), x.attrOr("familyid", "?").c_str(),
                x.attrOr("modelid", "?").c_str(), x.attrOr("affinity", "").c_str());
  } else if (x.name() == "pci") {
    std::string bus = x.attrOr("busid", "");
    double bw = pciBandwidth(x.attrOr("link_speed", ""), x.attrOr("link_width", ""));
    std::string link = bw > 0 ? x.attrOr("link_speed", "") + " x" + x.attrOr("link_width", "") + " (" + fmtBw(bw) +
                                    " GB/s)"
                              : "link unknown";
    int g = nodeByBusId(t, bus, NodeType::kGpu);
    int nic = nodeByBusId(t, bus, NodeType::kNic);
    if (g >= 0) {
      const TopoNode& n = t.node(g);
      std::string nv;
      for (const TopoLink& l : n.links)
        if (l.type == LinkType::kNvl) nv += " NVLink->" + label(t, l.to) + " " + fmtBw(l.bw) + " GB/s";
      std::printf("%s%s  %s, sm %d, %s%s\n", pad.c_str(), n.name.c_str(), bus.c_str(), n.sm, link.c_str(), nv.c_str());
    } else if (nic >= 0) {
      std::printf("%sNIC  %s, %s\n", pad.c_str(), bus.c_str(), link.c_str());
      for (const TopoLink& l : t.node(nic).links)
        if (l.type == LinkType::kNet)
          std::printf("%s  port %s  %.0f Gb/s\n", pad.c_str(), t.node(l.to).name.c_str(), t.node(l.to).speedGbps);
    } else if (nodeByBusId(t, bus, NodeType::kPci) >= 0) {
      std::printf("%sPCI switch  %s, %s\n", pad.c_str(), bus.c_str(), link.c_str());
    } else {
      return;  // a device the library does not use
    }
  } else if (x.name() == "nic" && x.parent() && x.parent()->name() == "cpu") {
    for (const auto& net : x.children())
      std::printf("%sNIC (no PCI device)  port %s  %s Mb/s\n", pad.c_str(), net->attrOr("name", "").c_str(),
                  net->attrOr("speed", "?").c_str());
    return;
  } else if (x.name() != "system") {
    return;
  }
  for (const auto& c : x.children()) printMachine(t, *c, x.name() == "system" ? depth : depth + 1);
}

void printPaths(const Topology& t) {
  std::vector<int> ends = t.gpus();
  ends.insert(ends.end(), t.nets().begin(), t.nets().end());
  if (t.gpus().empty()) {
    std::printf("\nPaths: no GPUs (host ranks use shared memory inside a node, the NIC ports below across nodes)\n");
    for (int n : t.nets())
      std::printf("  %s: %s from %s, %s GB/s\n", t.node(n).name.c_str(), pathTypeName(t.path(t.localCpu(n), n).type),
                  label(t, t.localCpu(n)).c_str(), fmtBw(t.path(t.localCpu(n), n).bw).c_str());
    return;
  }
  std::printf("\nPaths (type/bottleneck GB/s):\n%-14s", "");
  for (int b : ends) std::printf(" %-12.12s", label(t, b).c_str());
  std::printf("\n");
  for (int a : t.gpus()) {
    std::printf("%-14.14s", label(t, a).c_str());
    for (int b : ends) {
      const TopoPath& p = t.path(a, b);
      std::string cell = std::string(pathTypeName(p.type)) + "/" + fmtBw(p.bw);
      std::printf(" %-12s", cell.c_str());
    }
    std::printf("\n");
  }
}

// The node of the GPU with device index `dev`, or -1.
int gpuNodeOf(const Topology& t, int dev) {
  for (int g : t.gpus())
    if (t.node(g).index == dev) return g;
  return -1;
}

// Whether a channel's NIC and GPU would use GPUDirect RDMA (transport/net/gdr.h): both
// support it (the topology's gdr attributes) and the path is within NCCL_NET_GDR_LEVEL.
std::string gdrNote(const Topology& t, int gpu, int net) {
  if (gpu < 0 || net < 0) return "";
  const PathType type = t.path(gpu, net).type;
  Result<PciPath> level = gdrLevel();
  const int path = type == PathType::kLoc   ? 0
                   : type == PathType::kPix ? 1
                   : type == PathType::kPxb ? 2
                   : type == PathType::kPhb ? 3
                                            : 4;
  std::string why;
  if (!t.node(net).gdr) why = "the NIC takes host memory only";
  else if (!t.node(gpu).gdr) why = "the GPU has no GPUDirect RDMA";
  else if (!level.ok()) why = level.status().message();
  else if (path > static_cast<int>(level.value()))
    why = std::string(pathTypeName(type)) + " beyond NCCL_NET_GDR_LEVEL " + pciPathName(level.value());
  return std::string(t.node(net).name) + ": " +
         (why.empty() ? std::string("GDR ") + pathTypeName(type) : "staged, " + why);
}

void printGraphs(const Topology& t, const Graphs& g, int hostRanks) {
  if (g.gpusPerNode == 0) {
    std::printf("\nNo GPUs: host ranks, %d per node (--ranks-per-node), rings in rank order.\n", hostRanks);
    std::printf("Ring over %d node(s):", g.nodes);
    for (int r : g.globalRings[0]) std::printf(" %d", r);
    std::printf("\n");
  } else {
    std::printf("\nRings inside a node (GPU devs, entry first; ib connections with %lld QP(s) each, "
                "NCCL_IB_QPS_PER_CONNECTION):\n",
                static_cast<long long>(param(IntParam::IB_QPS_PER_CONNECTION)));
    for (size_t c = 0; c < g.rings.size(); ++c) {
      const NodeRing& r = g.rings[c];
      std::string s;
      for (int d : r.gpus) s += " " + std::to_string(d);
      std::printf("  channel %zu: %s ->%s -> %s   slowest hop %s GB/s (%s)\n", c,
                  r.netIn >= 0 ? t.node(r.netIn).name.c_str() : "-", s.c_str(),
                  r.netOut >= 0 ? t.node(r.netOut).name.c_str() : "-", fmtBw(r.bw).c_str(), pathTypeName(r.worst));
      if (r.gpus.empty() || (r.netIn < 0 && r.netOut < 0)) continue;
      const std::string in = gdrNote(t, gpuNodeOf(t, r.gpus.front()), r.netIn);
      const std::string out = gdrNote(t, gpuNodeOf(t, r.gpus.back()), r.netOut);
      std::printf("             in %s; out %s\n", in.empty() ? "-" : in.c_str(), out.empty() ? "-" : out.c_str());
    }
    std::printf("\nRing of rings over %d node(s) (ranks = node x %d + GPU position):\n", g.nodes, g.gpusPerNode);
    for (size_t c = 0; c < g.globalRings.size(); ++c) {
      std::printf("  channel %zu:", c);
      for (int r : g.globalRings[c]) std::printf(" %d", r);
      std::printf("\n");
    }
  }
  std::printf("\nDouble binary trees (channel 0; rank: parent / children):\n");
  int nranks = static_cast<int>(g.globalRings[0].size());
  for (int tr = 0; tr < 2; ++tr) {
    std::printf("  tree %d:", tr);
    for (int r = 0; r < nranks; ++r) {
      const TreeLinks& l = g.trees[0][static_cast<size_t>(tr)][static_cast<size_t>(r)];
      std::string kids;
      for (int k : l.children) kids += (kids.empty() ? "" : ",") + std::to_string(k);
      std::printf(" %d:%s/%s", r, l.parent < 0 ? "root" : std::to_string(l.parent).c_str(),
                  kids.empty() ? "-" : kids.c_str());
    }
    std::printf("\n");
  }
}

// The tuner's view of K nodes of this topology: host ranks use the measured constants
// (COLL_TUNER_*); GPU topologies take the bandwidths from the graph (the slowest ring hop
// inside a node, the slowest NIC port between nodes).
TunerInput tunerFor(const Topology& t, const Graphs& g, int hostRanks) {
  TunerInput in;
  (void)tunerInputFromParams(&in);
  int per = g.gpusPerNode > 0 ? g.gpusPerNode : hostRanks;
  in.nranks = g.nodes * per;
  in.hosts = g.nodes;
  in.maxRanksPerHost = per;
  in.overNet = g.nodes > 1;
  in.treeAvailable = in.nranks > 1;
  in.oneShotMaxBytes = static_cast<size_t>(std::max<int64_t>(0, param(IntParam::ONESHOT_BYTES)));
  in.netOneShotMaxBytes = static_cast<size_t>(std::max<int64_t>(0, param(IntParam::NET_ONESHOT_BYTES)));
  if (g.gpusPerNode > 0) {
    if (!g.rings.empty() && g.rings[0].bw > 0 && g.rings[0].bw < 1e8) in.bwGBs = g.rings[0].bw;
    double net = 0;
    for (int n : t.nets()) net = net == 0 ? t.node(n).speedGbps / 8 : std::min(net, t.node(n).speedGbps / 8);
    if (net > 0) in.netBwGBs = net;
  }
  return in;
}

const CollKind kTunedKinds[] = {CollKind::kAllReduce, CollKind::kBroadcast, CollKind::kReduce, CollKind::kAllGather,
                                CollKind::kReduceScatter};

void printTuner(const TunerInput& in) {
  std::printf(
      "\nTuner (%d ranks on %d node(s); bandwidths %.1f GB/s inside, %.1f GB/s between; hops %.1f / %.1f us):\n",
      in.nranks, in.hosts, in.bwGBs, in.netBwGBs, in.hopUs, in.netHopUs);
  std::printf("%10s", "bytes");
  for (CollKind k : kTunedKinds) std::printf("  %-24s", collKindName(k) + 4);
  std::printf("\n");
  for (size_t bytes = 8; bytes <= (size_t{1} << 30); bytes *= 8) {
    std::printf("%10zu", bytes);
    for (CollKind k : kTunedKinds) {
      auto c = tunerChoose(in, k, bytes);
      char cell[64];
      if (c.ok())
        std::snprintf(cell, sizeof(cell), "%s/%s %.1f us", algoName(c.value().algo), protoName(c.value().proto),
                      c.value().us);
      else std::snprintf(cell, sizeof(cell), "(filtered out)");
      std::printf("  %-24s", cell);
    }
    std::printf("\n");
  }
}

std::string jsonStr(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

void printJson(const Topology& t, const Graphs& g, const std::string& origin, const TunerInput& tin) {
  std::printf("{\n  \"source\": %s,\n  \"nodes\": [", jsonStr(origin).c_str());
  for (size_t i = 0; i < t.nodes().size(); ++i) {
    const TopoNode& n = t.node(static_cast<int>(i));
    std::printf("%s\n    {\"id\": %zu, \"type\": \"%s\", \"name\": %s, \"busid\": %s, \"index\": %d}", i ? "," : "", i,
                nodeTypeName(n.type), jsonStr(label(t, static_cast<int>(i))).c_str(), jsonStr(n.busId).c_str(),
                n.index);
  }
  std::printf("\n  ],\n  \"links\": [");
  bool first = true;
  for (size_t i = 0; i < t.nodes().size(); ++i)
    for (const TopoLink& l : t.node(static_cast<int>(i)).links) {
      if (static_cast<size_t>(l.to) < i) continue;  // each undirected link once
      std::printf("%s\n    {\"from\": %zu, \"to\": %d, \"type\": \"%s\", \"bw\": %.3f}", first ? "" : ",", i, l.to,
                  linkTypeName(l.type), l.bw);
      first = false;
    }
  std::printf("\n  ],\n  \"paths\": [");
  std::vector<int> ends = t.gpus();
  ends.insert(ends.end(), t.nets().begin(), t.nets().end());
  first = true;
  for (int a : ends)
    for (int b : ends) {
      if (a == b) continue;
      const TopoPath& p = t.path(a, b);
      std::printf("%s\n    {\"from\": %d, \"to\": %d, \"type\": \"%s\", \"bw\": %.3f, \"hops\": %zu}", first ? "" : ",",
                  a, b, pathTypeName(p.type), p.bw >= 1e8 ? 0.0 : p.bw, p.hops.empty() ? 0 : p.hops.size() - 1);
      first = false;
    }
  std::printf("\n  ],\n  \"nodes_count\": %d,\n  \"gpus_per_node\": %d,\n  \"rings\": [", g.nodes, g.gpusPerNode);
  for (size_t c = 0; c < g.globalRings.size(); ++c) {
    std::printf("%s\n    [", c ? "," : "");
    for (size_t i = 0; i < g.globalRings[c].size(); ++i) std::printf("%s%d", i ? ", " : "", g.globalRings[c][i]);
    std::printf("]");
  }
  std::printf("\n  ],\n  \"node_rings\": [");
  for (size_t c = 0; c < g.rings.size(); ++c) {
    const NodeRing& r = g.rings[c];
    std::printf("%s\n    {\"channel\": %zu, \"gpus\": [", c ? "," : "", c);
    for (size_t i = 0; i < r.gpus.size(); ++i) std::printf("%s%d", i ? ", " : "", r.gpus[i]);
    std::printf("], \"net_in\": %s, \"net_out\": %s, \"bw\": %.3f, \"worst\": \"%s\"}",
                r.netIn >= 0 ? jsonStr(t.node(r.netIn).name).c_str() : "null",
                r.netOut >= 0 ? jsonStr(t.node(r.netOut).name).c_str() : "null", r.bw >= 1e8 ? 0.0 : r.bw,
                pathTypeName(r.worst));
  }
  std::printf("\n  ],\n  \"trees\": [");
  for (size_t c = 0; c < g.trees.size(); ++c) {
    std::printf("%s\n    [", c ? "," : "");
    for (size_t tr = 0; tr < 2; ++tr) {
      std::printf("%s\n      [", tr ? "," : "");
      const auto& links = g.trees[c][tr];
      for (size_t r = 0; r < links.size(); ++r) {
        std::printf("%s{\"rank\": %zu, \"parent\": %d, \"children\": [", r ? ", " : "", r, links[r].parent);
        for (size_t k = 0; k < links[r].children.size(); ++k) std::printf("%s%d", k ? ", " : "", links[r].children[k]);
        std::printf("]}");
      }
      std::printf("]");
    }
    std::printf("\n    ]");
  }
  std::printf("\n  ],\n  \"tuner\": [");
  bool firstT = true;
  for (size_t bytes = 8; bytes <= (size_t{1} << 30); bytes *= 8)
    for (CollKind k : kTunedKinds) {
      auto c = tunerChoose(tin, k, bytes);
      if (!c.ok()) continue;
      std::printf("%s\n    {\"collective\": \"%s\", \"bytes\": %zu, \"algo\": \"%s\", \"proto\": \"%s\", \"us\": %.3f}",
                  firstT ? "" : ",", collKindName(k) + 4, bytes, algoName(c.value().algo), protoName(c.value().proto),
                  c.value().us);
      firstT = false;
    }
  std::printf("\n  ]\n}\n");
}

void printDot(const Topology& t, const Graphs& g) {
  static const char* colors[] = {"red", "blue", "darkgreen", "orange", "purple", "brown", "magenta", "cyan"};
  std::printf("graph topology {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
  for (size_t i = 0; i < t.nodes().size(); ++i) {
    const TopoNode& n = t.node(static_cast<int>(i));
    const char* shape = n.type == NodeType::kGpu   ? "box"
                        : n.type == NodeType::kCpu ? "ellipse"
                        : n.type == NodeType::kNet ? "diamond"
                        : n.type == NodeType::kNvs ? "hexagon"
                                                   : "box";
    const char* style = n.type == NodeType::kGpu   ? ", style=filled, fillcolor=\"#b8e186\""
                        : n.type == NodeType::kNet ? ", style=filled, fillcolor=\"#92c5de\""
                        : n.type == NodeType::kNvs ? ", style=filled, fillcolor=\"#fdb863\""
                                                   : "";
    std::string text = label(t, static_cast<int>(i));
    if (n.type == NodeType::kGpu || n.type == NodeType::kNic) text += "\\n" + n.busId;
    std::printf("  n%zu [label=\"%s\", shape=%s%s];\n", i, text.c_str(), shape, style);
  }
  for (size_t i = 0; i < t.nodes().size(); ++i)
    for (const TopoLink& l : t.node(static_cast<int>(i)).links) {
      if (static_cast<size_t>(l.to) < i) continue;
      std::printf("  n%zu -- n%d [label=\"%s %s\", color=gray50%s];\n", i, l.to, linkTypeName(l.type),
                  fmtBw(l.bw).c_str(), l.type == LinkType::kNvl ? ", penwidth=2" : "");
    }
  // The rings: directed GPU-to-GPU hops of each channel, entry and exit through NICs.
  auto gpuNode = [&](int dev) {
    for (int gnode : t.gpus())
      if (t.node(gnode).index == dev) return gnode;
    return -1;
  };
  for (size_t c = 0; c < g.rings.size(); ++c) {
    const NodeRing& r = g.rings[c];
    const char* col = colors[c % 8];
    for (size_t i = 0; i + 1 < r.gpus.size(); ++i)
      std::printf("  n%d -- n%d [dir=forward, color=%s, constraint=false, label=\"ch%zu\", fontcolor=%s];\n",
                  gpuNode(r.gpus[i]), gpuNode(r.gpus[i + 1]), col, c, col);
    if (!r.gpus.empty() && r.netIn >= 0)
      std::printf("  n%d -- n%d [dir=forward, style=dashed, color=%s, constraint=false];\n", r.netIn,
                  gpuNode(r.gpus.front()), col);
    if (!r.gpus.empty() && r.netOut >= 0)
      std::printf("  n%d -- n%d [dir=forward, style=dashed, color=%s, constraint=false];\n", gpuNode(r.gpus.back()),
                  r.netOut, col);
  }
  std::printf("}\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"colltopo: the topology, paths, rings and trees Collectives builds"};
  std::string file;
  int nodes = 1, channels = 0, hostRanks = 1;
  bool xml = false, dot = false, json = false;
  app.add_option("--topo-file", file, "NCCL topology XML (default: COLL_TOPO_FILE, else probe this machine)");
  app.add_option("--nodes", nodes, "number of identical nodes for rings across nodes and trees")
      ->check(CLI::Range(1, 4096));
  app.add_option("--channels", channels, "at most this many channels (default: one per NIC port)")
      ->check(CLI::Range(0, 64));
  app.add_option("--ranks-per-node", hostRanks, "host ranks per node when the topology has no GPUs")
      ->check(CLI::Range(1, 1024));
  app.add_flag("--xml", xml, "print the topology as NCCL topology XML");
  app.add_flag("--dot", dot, "print Graphviz (render: dot -Tpng)");
  app.add_flag("--json", json, "print graph, paths, rings and trees as JSON");
  CLI11_PARSE(app, argc, argv);
  if (!file.empty()) setenv("COLL_TOPO_FILE", file.c_str(), 1);

  std::string origin;
  auto topo = loadSystemTopology(&origin);
  if (!topo.ok()) {
    std::fprintf(stderr, "colltopo: %s\n", topo.status().message().c_str());
    return 1;
  }
  const Topology& t = *topo.value();
  auto graphs = searchGraphs(t, nodes, channels, hostRanks);
  if (!graphs.ok()) {
    std::fprintf(stderr, "colltopo: %s\n", graphs.status().message().c_str());
    return 1;
  }
  if (xml) {
    std::fputs(xmlWrite(t.xml()).c_str(), stdout);
    return 0;
  }
  if (dot) {
    printDot(t, graphs.value());
    return 0;
  }
  TunerInput tin = tunerFor(t, graphs.value(), hostRanks);
  if (json) {
    printJson(t, graphs.value(), origin, tin);
    return 0;
  }
  std::printf("Topology: %s\n  %zu CPU(s), %zu GPU(s), %zu PCI switch(es), %zu NIC(s) with %zu port(s)%s\n\n",
              origin.c_str(), t.cpus().size(), t.gpus().size(), t.ofType(NodeType::kPci).size(),
              t.ofType(NodeType::kNic).size(), t.nets().size(), t.ofType(NodeType::kNvs).empty() ? "" : ", NVSwitch");
  printMachine(t, t.xml(), 0);
  printPaths(t);
  printGraphs(t, graphs.value(), hostRanks);
  printTuner(tin);
  return 0;
}

// The machine as a graph, built from NCCL's topology XML (probed or loaded).
//
// Nodes: GPU, PCI (a switch or bridge), NVS (all NVSwitches of the machine, as one node,
// as NCCL does), CPU (one per NUMA node), NIC (a network card) and NET (one per port or
// interface a net backend can use). Links carry a type and a bandwidth in GB/s (one
// direction):
//   NVL  GPU-GPU / GPU-NVS / GPU-CPU NVLink: links x the generation's per-link rate
//   PCI  a PCIe link: the lane rate of link_speed x link_width (a device's link to its
//        parent bridge or CPU); unknown speed or width counts as 24 GB/s
//   SYS  between two CPUs (inter-socket), a rate by CPU vendor and model
//   NET  NIC to one of its ports: the port speed
//
// Paths: between every pair of GPU, CPU and NET nodes, the route with the widest
// bottleneck (then the fewest hops), never through a NIC and through another GPU only
// over NVLink on both sides. Its type, in NCCL's vocabulary and order:
//   LOC same node; NVL NVLink, possibly through NVSwitch; NVB NVLink through another GPU;
//   PIX at most one PCIe switch; PXB several PCIe switches, no CPU; PHB through a CPU
//   (host bridge); SYS across CPUs; NET across hosts (never inside one topology).
//
// Skeleton files (cloud vendors publish only CPUs and PCI devices with classes) load as
// they are: a PCI device of class 0x0302xx/0x0300xx without a <gpu> element is a GPU, one
// of class 0x0207xx/0x0200xx without <nic> is a NIC with one port as fast as its slot.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "topology/xml.h"

namespace coll {

enum class NodeType { kGpu, kPci, kNvs, kCpu, kNic, kNet };
enum class LinkType { kNvl, kPci, kSys, kNet };
enum class PathType { kLoc, kNvl, kNvb, kPix, kPxb, kPhb, kSys, kNet, kDis };

const char* nodeTypeName(NodeType t);
const char* linkTypeName(LinkType t);
const char* pathTypeName(PathType t);

struct TopoLink {
  int to;
  LinkType type;
  double bw;  // GB/s
};

struct TopoNode {
  explicit TopoNode(NodeType t, std::string bus = {}) : type(t), busId(std::move(bus)) {}
  NodeType type;
  std::string busId;     // PCI nodes, GPUs, NICs: "0000:13:00.0"; NVS: "nvs"
  std::string name;      // GPU "GPU<dev>", CPU "CPU<numaid>", NET its interface / device name
  int index = 0;         // GPU dev, CPU numaid, NET dev
  int rank = -1;         // GPU: the rank that owns it in the file (-1 unknown)
  int sm = 0;            // GPU: compute capability x 10 (0 unknown)
  bool gdr = false;      // GPU / NET: GPUDirect RDMA
  double speedGbps = 0;  // NET
  std::string vendor;    // CPU
  std::vector<TopoLink> links;
};

struct TopoPath {
  PathType type = PathType::kDis;
  double bw = 0;          // bottleneck, GB/s
  std::vector<int> hops;  // node indices from source to destination
};

// Limits on a topology (probed or loaded): the paths between every pair of GPU, CPU and
// NET nodes cost a widest-path search each, so a file may not ask for thousands.
constexpr int kMaxTopoElements = 2048;  // XML elements under <system>
constexpr int kMaxTopoGpus = 64;        // also bounds a <gpu dev=...>
constexpr int kMaxTopoCpus = 32;
constexpr int kMaxTopoNets = 64;

class Topology {
 public:
  // Builds the graph from a <system> element; `origin` names the source in errors.
  static Result<std::unique_ptr<Topology>> fromXml(const XmlNode& system, const std::string& origin);

  const std::vector<TopoNode>& nodes() const { return nodes_; }
  const TopoNode& node(int i) const { return nodes_[static_cast<size_t>(i)]; }
  // Node indices of one type, in file order (GPUs sorted by dev).
  const std::vector<int>& gpus() const { return gpus_; }
  const std::vector<int>& cpus() const { return cpus_; }
  const std::vector<int>& nets() const { return nets_; }
  const std::vector<int>& ofType(NodeType t) const;
  // The path between two GPU / CPU / NET nodes (kDis when unreachable or not computed).
  const TopoPath& path(int from, int to) const;
  // The CPU (NUMA node) a GPU, NIC or NET hangs from.
  int localCpu(int node) const;
  // The XML the graph was built from (what a dump writes).
  const XmlNode& xml() const { return *xml_; }

 private:
  Status build(const XmlNode& system, const std::string& origin);
  // The steps of build: each <cpu> with what hangs from it, then GPU devs, then NVLinks.
  Status addCpu(const XmlNode& cpuXml, const std::string& origin);
  void addCpuNic(const XmlNode& nicXml, int cpu);  // a <nic> right under a <cpu>
  Status numberGpus(const std::string& origin);
  Status checkCounts(const std::string& origin) const;
  void resolveNvlinks();
  Status addPci(const XmlNode& pci, int parent, const std::string& origin);
  int addNode(TopoNode n);
  void link(int a, int b, LinkType t, double bw);
  void computePaths();
  TopoPath widest(int src, int dst) const;

  struct PendingNvlink {  // resolved once every GPU exists
    int gpu;
    std::string target;
    long tclass;
    int count;
  };
  std::vector<PendingNvlink> pending_;
  std::vector<TopoNode> nodes_;
  std::vector<int> gpus_, cpus_, nets_, pcis_, nics_, nvss_;
  std::vector<std::vector<TopoPath>> paths_;  // [from][to], all nodes
  std::vector<int> parentCpu_;
  std::unique_ptr<XmlNode> xml_;
};

// PCIe bandwidth in GB/s of one direction for "16 GT/s" / "32.0 GT/s PCIe" and a width;
// 0 when unknown.
double pciBandwidth(const std::string& linkSpeed, const std::string& linkWidth);
// NVLink per-link bandwidth (GB/s, one direction) for a GPU of compute capability sm.
double nvlinkBandwidth(int sm);

}  // namespace coll

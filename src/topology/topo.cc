#include "topology/topo.h"

#include <algorithm>
#include <cstdlib>
#include <queue>
#include <tuple>

namespace coll {

const char* nodeTypeName(NodeType t) {
  switch (t) {
    case NodeType::kGpu: return "GPU";
    case NodeType::kPci: return "PCI";
    case NodeType::kNvs: return "NVS";
    case NodeType::kCpu: return "CPU";
    case NodeType::kNic: return "NIC";
    case NodeType::kNet: return "NET";
  }
  return "?";
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::kNvl: return "NVL";
    case LinkType::kPci: return "PCI";
    case LinkType::kSys: return "SYS";
    case LinkType::kNet: return "NET";
  }
  return "?";
}

const char* pathTypeName(PathType t) {
  static const char* names[] = {"LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS", "NET", "DIS"};
  return names[static_cast<int>(t)];
}

double pciBandwidth(const std::string& linkSpeed, const std::string& linkWidth) {
  double gt = std::strtod(linkSpeed.c_str(), nullptr);
  long width = std::strtol(linkWidth.c_str(), nullptr, 10);
  if (gt <= 0 || width <= 0) return 0;
  // Gen1/2 encode 8b/10b, Gen3 and later 128b/130b (Gen6's FLIT mode is close to it).
  double perLane = gt <= 5.0 ? gt * 0.8 / 8 : gt * 128.0 / 130.0 / 8;
  return perLane * static_cast<double>(width);
}

double nvlinkBandwidth(int sm) {
  // Usable GB/s per link and direction: NVLink 1 (Pascal), 2 (Volta), 3 (Ampere),
  // 4 (Hopper), 5 (Blackwell).
  if (sm <= 0) return 20.0;
  if (sm < 70) return 18.0;
  if (sm < 80) return 20.0;
  if (sm < 90) return 20.0;
  if (sm < 100) return 20.6;
  return 40.1;
}

namespace {

constexpr double kUnknownPciBw = 24.0;

// Inter-socket bandwidth (GB/s) by CPU: AMD Infinity Fabric, Intel UPI by generation.
double sysBandwidth(const std::string& vendor, int model) {
  if (vendor == "GenuineIntel") return model >= 143 ? 22.0 : 10.0;  // Sapphire Rapids on
  return 16.0;
}

long classOf(const XmlNode& pci) { return std::strtol(pci.attrOr("class", "0").c_str(), nullptr, 16); }
bool isGpuClass(long cls) { return (cls >> 8) == 0x0302 || (cls >> 8) == 0x0300; }
bool isNicClass(long cls) { return (cls >> 8) == 0x0207 || (cls >> 8) == 0x0200; }
bool isBridgeClass(long cls) { return (cls >> 8) == 0x0604; }

int intAttr(const XmlNode& n, const char* key, int fallback) {
  const std::string* v = n.attr(key);
  if (!v || v->empty()) return fallback;
  return static_cast<int>(std::strtol(v->c_str(), nullptr, 0));
}

}  // namespace

int Topology::addNode(TopoNode n) {
  nodes_.push_back(std::move(n));
  parentCpu_.push_back(-1);
  return static_cast<int>(nodes_.size()) - 1;
}

void Topology::link(int a, int b, LinkType t, double bw) {
  auto add = [&](int from, int to) {
    for (TopoLink& l : nodes_[static_cast<size_t>(from)].links)
      if (l.to == to && l.type == t) {
        l.bw += bw;
        return;
      }
    nodes_[static_cast<size_t>(from)].links.push_back({to, t, bw});
  };
  add(a, b);
  add(b, a);
}

Status Topology::addPci(const XmlNode& pci, int parent, const std::string& origin) {
  const std::string* busId = pci.attr("busid");
  if (!busId || busId->empty()) return invalidArgument(origin + ": a <pci> element without busid");
  long cls = classOf(pci);
  double bw = pciBandwidth(pci.attrOr("link_speed", ""), pci.attrOr("link_width", ""));
  if (bw <= 0) bw = kUnknownPciBw;
  int cpu = parentCpu_[static_cast<size_t>(parent)];
  if (nodes_[static_cast<size_t>(parent)].type == NodeType::kCpu) cpu = parent;

  if (isGpuClass(cls)) {
    TopoNode g(NodeType::kGpu, *busId);
    const XmlNode* ge = pci.child("gpu");
    g.index = ge ? intAttr(*ge, "dev", -1) : -1;
    g.rank = ge ? intAttr(*ge, "rank", -1) : -1;
    g.sm = ge ? intAttr(*ge, "sm", 0) : 0;
    g.gdr = ge && intAttr(*ge, "gdr", 0) != 0;
    int id = addNode(std::move(g));
    parentCpu_[static_cast<size_t>(id)] = cpu;
    gpus_.push_back(id);
    link(id, parent, LinkType::kPci, bw);
    if (ge)
      for (const auto& nv : ge->children())
        if (nv->name() == "nvlink")
          pending_.push_back({id, nv->attrOr("target", ""), std::strtol(nv->attrOr("tclass", "0").c_str(), nullptr, 16),
                              intAttr(*nv, "count", 1)});
    return okStatus();
  }
  if (isNicClass(cls) || pci.child("nic")) {
    int id = addNode(TopoNode(NodeType::kNic, *busId));
    parentCpu_[static_cast<size_t>(id)] = cpu;
    nics_.push_back(id);
    link(id, parent, LinkType::kPci, bw);
    const XmlNode* nic = pci.child("nic");
    bool any = false;
    if (nic)
      for (const auto& net : nic->children()) {
        if (net->name() != "net") continue;
        any = true;
        TopoNode n(NodeType::kNet, *busId);
        n.name = net->attrOr("name", *busId);
        n.index = intAttr(*net, "dev", static_cast<int>(nets_.size()));
        n.speedGbps = intAttr(*net, "speed", 0) / 1000.0;
        if (n.speedGbps <= 0) n.speedGbps = bw * 8;
        n.gdr = intAttr(*net, "gdr", 0) != 0;
        double nbw = n.speedGbps / 8;
        int nid = addNode(std::move(n));
        parentCpu_[static_cast<size_t>(nid)] = cpu;
        nets_.push_back(nid);
        link(id, nid, LinkType::kNet, nbw);
      }
    if (!any) {  // skeleton: one port as fast as the slot
      TopoNode n(NodeType::kNet, *busId);
      n.name = *busId;
      n.index = static_cast<int>(nets_.size());
      n.speedGbps = bw * 8;
      int nid = addNode(std::move(n));
      parentCpu_[static_cast<size_t>(nid)] = cpu;
      nets_.push_back(nid);
      link(id, nid, LinkType::kNet, bw);
    }
    return okStatus();
  }
  bool hasPciChildren = false;
  for (const auto& c : pci.children()) hasPciChildren |= c->name() == "pci";
  if (!isBridgeClass(cls) && !hasPciChildren) return okStatus();  // a device we do not use
  int id = addNode(TopoNode(NodeType::kPci, *busId));
  nodes_[static_cast<size_t>(id)].name = *busId;
  parentCpu_[static_cast<size_t>(id)] = cpu;
  pcis_.push_back(id);
  link(id, parent, LinkType::kPci, bw);
  for (const auto& c : pci.children())
    if (c->name() == "pci") COLL_CHECK(addPci(*c, id, origin));
  return okStatus();
}

namespace {

int countElements(const XmlNode& n, int limit) {
  int count = 0;
  for (const auto& c : n.children()) {
    count += 1 + countElements(*c, limit - count);
    if (count > limit) break;
  }
  return count;
}

}  // namespace

Status Topology::checkCounts(const std::string& origin) const {
  auto over = [&](size_t have, int limit, const char* what) {
    return invalidArgument(origin + ": " + std::to_string(have) + " " + what + ", at most " + std::to_string(limit));
  };
  if (gpus_.size() > static_cast<size_t>(kMaxTopoGpus)) return over(gpus_.size(), kMaxTopoGpus, "GPUs");
  if (cpus_.size() > static_cast<size_t>(kMaxTopoCpus)) return over(cpus_.size(), kMaxTopoCpus, "CPUs");
  if (nets_.size() > static_cast<size_t>(kMaxTopoNets)) return over(nets_.size(), kMaxTopoNets, "network ports");
  return okStatus();
}

Status Topology::build(const XmlNode& system, const std::string& origin) {
  if (system.name() != "system")
    return invalidArgument(origin + ": the root element is <" + system.name() + ">, not <system>");
  if (int n = countElements(system, kMaxTopoElements); n > kMaxTopoElements)
    return invalidArgument(origin + ": more than " + std::to_string(kMaxTopoElements) + " elements under <system>");
  for (const auto& c : system.children()) {
    if (c->name() != "cpu") continue;
    COLL_CHECK(addCpu(*c, origin));
  }
  if (cpus_.empty()) return invalidArgument(origin + ": no <cpu> element under <system>");
  COLL_CHECK(checkCounts(origin));
  COLL_CHECK(numberGpus(origin));
  resolveNvlinks();
  computePaths();
  return okStatus();
}

Status Topology::addCpu(const XmlNode& cpuXml, const std::string& origin) {
  TopoNode cpu(NodeType::kCpu);
  cpu.index = intAttr(cpuXml, "numaid", static_cast<int>(cpus_.size()));
  cpu.name = "CPU" + std::to_string(cpu.index);
  cpu.vendor = cpuXml.attrOr("vendor", "");
  int model = intAttr(cpuXml, "modelid", 0);
  int id = addNode(std::move(cpu));
  for (int other : cpus_) link(id, other, LinkType::kSys, sysBandwidth(nodes_[static_cast<size_t>(id)].vendor, model));
  cpus_.push_back(id);
  for (const auto& d : cpuXml.children()) {
    if (d->name() == "pci") {
      COLL_CHECK(addPci(*d, id, origin));
    } else if (d->name() == "nic") {  // a NIC without a PCI position (virtual, loopback)
      addCpuNic(*d, id);
    }
  }
  return okStatus();
}

void Topology::addCpuNic(const XmlNode& nicXml, int cpu) {
  int nic = addNode(TopoNode(NodeType::kNic));
  parentCpu_[static_cast<size_t>(nic)] = cpu;
  nics_.push_back(nic);
  double total = 0;
  for (const auto& net : nicXml.children()) {
    if (net->name() != "net") continue;
    TopoNode n(NodeType::kNet);
    n.name = net->attrOr("name", "net" + std::to_string(nets_.size()));
    n.index = intAttr(*net, "dev", static_cast<int>(nets_.size()));
    n.speedGbps = intAttr(*net, "speed", 10000) / 1000.0;
    n.gdr = intAttr(*net, "gdr", 0) != 0;
    double nbw = n.speedGbps / 8;
    total += nbw;
    int nid = addNode(std::move(n));
    parentCpu_[static_cast<size_t>(nid)] = cpu;
    nets_.push_back(nid);
    link(nic, nid, LinkType::kNet, nbw);
  }
  link(nic, cpu, LinkType::kPci, total > 0 ? total : kUnknownPciBw);
}

Status Topology::numberGpus(const std::string& origin) {
  // GPU numbering: devs from the file; skeleton GPUs take the next free numbers in order.
  std::vector<bool> taken;
  for (int g : gpus_) {
    int d = nodes_[static_cast<size_t>(g)].index;
    if (d >= kMaxTopoGpus)
      return invalidArgument(origin + ": a GPU with dev=" + std::to_string(d) + ", at most " +
                             std::to_string(kMaxTopoGpus - 1));
    if (d >= 0) {
      if (static_cast<size_t>(d) >= taken.size()) taken.resize(static_cast<size_t>(d) + 1);
      if (taken[static_cast<size_t>(d)]) return invalidArgument(origin + ": two GPUs with dev=" + std::to_string(d));
      taken[static_cast<size_t>(d)] = true;
    }
  }
  int next = 0;
  for (int g : gpus_) {
    TopoNode& n = nodes_[static_cast<size_t>(g)];
    if (n.index < 0) {
      while (static_cast<size_t>(next) < taken.size() && taken[static_cast<size_t>(next)]) ++next;
      n.index = next++;
    }
    n.name = "GPU" + std::to_string(n.index);
  }
  std::sort(gpus_.begin(), gpus_.end(),
            [&](int a, int b) { return nodes_[static_cast<size_t>(a)].index < nodes_[static_cast<size_t>(b)].index; });
  return okStatus();
}

void Topology::resolveNvlinks() {
  // NVLinks: to NVSwitches (one NVS node), to GPUs by bus id, to CPUs (POWER systems).
  for (const PendingNvlink& p : pending_) {
    TopoNode& g = nodes_[static_cast<size_t>(p.gpu)];
    double bw = nvlinkBandwidth(g.sm) * std::max(1, p.count);
    if ((p.tclass >> 8) == 0x0680) {
      if (nvss_.empty()) {
        int nvs = addNode(TopoNode(NodeType::kNvs, "nvs"));
        nodes_[static_cast<size_t>(nvs)].name = "NVS";
        nvss_.push_back(nvs);
      }
      link(p.gpu, nvss_[0], LinkType::kNvl, bw);
    } else if (isGpuClass(p.tclass)) {
      if (p.target == g.busId) continue;  // a link to itself (seen in published files)
      auto it = std::find_if(gpus_.begin(), gpus_.end(),
                             [&](int o) { return nodes_[static_cast<size_t>(o)].busId == p.target; });
      if (it == gpus_.end()) continue;  // the peer GPU is not in this file
      // Each side lists the link; count it once per direction.
      if (p.gpu < *it) link(p.gpu, *it, LinkType::kNvl, bw);
    } else if ((p.tclass >> 8) == 0x0600 || (p.tclass >> 8) == 0x0b40) {
      link(p.gpu, parentCpu_[static_cast<size_t>(p.gpu)], LinkType::kNvl, bw);
    }
  }
}

const std::vector<int>& Topology::ofType(NodeType t) const {
  switch (t) {
    case NodeType::kGpu: return gpus_;
    case NodeType::kPci: return pcis_;
    case NodeType::kNvs: return nvss_;
    case NodeType::kCpu: return cpus_;
    case NodeType::kNic: return nics_;
    case NodeType::kNet: return nets_;
  }
  return gpus_;
}

int Topology::localCpu(int node) const {
  if (nodes_[static_cast<size_t>(node)].type == NodeType::kCpu) return node;
  return parentCpu_[static_cast<size_t>(node)];
}

const TopoPath& Topology::path(int from, int to) const {
  static const TopoPath none;
  if (from < 0 || to < 0 || static_cast<size_t>(from) >= paths_.size()) return none;
  return paths_[static_cast<size_t>(from)][static_cast<size_t>(to)];
}

// Widest path (largest bottleneck, then fewest hops) from src to dst, as a label-setting
// search; see the header for which nodes may be passed through.
TopoPath Topology::widest(int src, int dst) const {
  TopoPath p;
  if (src == dst) {
    p.type = PathType::kLoc;
    p.bw = 1e9;
    p.hops = {src};
    return p;
  }
  struct Label {
    double bw = -1;
    int hops = 0;
    int prev = -1;
    LinkType via = LinkType::kPci;
    bool done = false;
  };
  std::vector<Label> lab(nodes_.size());
  using Item = std::tuple<double, int, int>;  // bw, -hops, node
  std::priority_queue<Item> q;
  lab[static_cast<size_t>(src)].bw = 1e9;
  q.push({1e9, 0, src});
  while (!q.empty()) {
    auto [bw, negHops, u] = q.top();
    q.pop();
    Label& lu = lab[static_cast<size_t>(u)];
    if (lu.done) continue;
    lu.done = true;
    if (u == dst) break;
    const TopoNode& nu = nodes_[static_cast<size_t>(u)];
    if (u != src) {
      if (nu.type == NodeType::kNet) continue;                              // ports end paths
      if (nu.type == NodeType::kGpu && lu.via != LinkType::kNvl) continue;  // GPUs forward NVLink only
    }
    for (const TopoLink& l : nu.links) {
      if (u != src && nu.type == NodeType::kGpu && l.type != LinkType::kNvl) continue;
      Label& lv = lab[static_cast<size_t>(l.to)];
      if (lv.done) continue;
      double nb = std::min(bw, l.bw);
      int nh = -negHops + 1;
      if (nb > lv.bw || (nb == lv.bw && nh < lv.hops)) {
        lv.bw = nb;
        lv.hops = nh;
        lv.prev = u;
        lv.via = l.type;
        q.push({nb, -nh, l.to});
      }
    }
  }
  if (lab[static_cast<size_t>(dst)].bw < 0) return p;  // kDis
  for (int v = dst; v != -1; v = lab[static_cast<size_t>(v)].prev) p.hops.push_back(v);
  std::reverse(p.hops.begin(), p.hops.end());
  p.bw = lab[static_cast<size_t>(dst)].bw;

  // Classify: the port hop (NIC -> NET) does not count.
  bool sys = false, viaCpu = false, viaGpu = false, allNvl = true;
  int switches = 0;
  for (size_t i = 0; i + 1 < p.hops.size(); ++i) {
    int a = p.hops[i], b = p.hops[i + 1];
    for (const TopoLink& l : nodes_[static_cast<size_t>(a)].links) {
      if (l.to != b) continue;
      if (l.type == LinkType::kSys) sys = true;
      if (l.type != LinkType::kNvl && l.type != LinkType::kNet) allNvl = false;
      break;
    }
    if (i > 0) {
      NodeType t = nodes_[static_cast<size_t>(a)].type;
      viaCpu |= t == NodeType::kCpu;
      viaGpu |= t == NodeType::kGpu;
      switches += t == NodeType::kPci;
    }
  }
  if (sys) p.type = PathType::kSys;
  else if (viaCpu) p.type = PathType::kPhb;
  else if (allNvl) p.type = viaGpu ? PathType::kNvb : PathType::kNvl;
  else p.type = switches <= 1 ? PathType::kPix : PathType::kPxb;
  return p;
}

void Topology::computePaths() {
  paths_.assign(nodes_.size(), std::vector<TopoPath>(nodes_.size()));
  std::vector<int> ends = gpus_;
  ends.insert(ends.end(), cpus_.begin(), cpus_.end());
  ends.insert(ends.end(), nets_.begin(), nets_.end());
  for (int a : ends)
    for (int b : ends) paths_[static_cast<size_t>(a)][static_cast<size_t>(b)] = widest(a, b);
}

Result<std::unique_ptr<Topology>> Topology::fromXml(const XmlNode& system, const std::string& origin) {
  auto t = std::unique_ptr<Topology>(new Topology());
  COLL_CHECK(t->build(system, origin));
  t->xml_ = system.clone();
  return t;
}

}  // namespace coll

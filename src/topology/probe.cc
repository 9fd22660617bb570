#include "topology/probe.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>

#include "base/log.h"
#include "base/param.h"
#include "topology/hwloc_lib.h"
#include "transport/net/net.h"

namespace coll {

namespace {

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (in) std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string busIdString(unsigned dom, unsigned bus, unsigned dev, unsigned fn) {
  char b[32];
  std::snprintf(b, sizeof(b), "%04x:%02x:%02x.%x", dom & 0xffff, bus & 0xff, dev & 0x1f, fn & 7);
  return b;
}

// A set of CPUs as 32-bit words of its mask, least significant first.
using CpuWords = std::vector<uint32_t>;

// "ffffffff,00000000" from a CPU mask: 32-bit words, most significant first, from the
// highest word with a CPU in it (one word for an empty set).
std::string affinityString(const CpuWords& words) {
  size_t n = std::max<size_t>(words.size(), 1);
  while (n > 1 && words[n - 1] == 0) --n;
  std::string out;
  for (size_t w = n; w-- > 0;) {
    char b[16];
    std::snprintf(b, sizeof(b), "%08x", static_cast<unsigned>(w < words.size() ? words[w] : 0));
    if (!out.empty()) out += ',';
    out += b;
  }
  return out;
}

struct CpuId {
  std::string vendor, family, model;
};
CpuId cpuId() {
  CpuId id;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto value = [&] {
      size_t c = line.find(':');
      std::string v = c == std::string::npos ? "" : line.substr(c + 1);
      v.erase(0, v.find_first_not_of(' '));
      return v;
    };
    if (id.vendor.empty() && line.rfind("vendor_id", 0) == 0) id.vendor = value();
    else if (id.family.empty() && line.rfind("cpu family", 0) == 0) id.family = value();
    else if (id.model.empty() && line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) id.model = value();
    if (line.empty() && !id.vendor.empty()) break;
  }
  return id;
}

// Fills a <pci> element's attributes from sysfs (as NCCL's dump has them), with hwloc's
// class as the fallback.
void fillPciAttrs(XmlNode* e, const std::string& busId, unsigned hwlocClass) {
  std::string dir = "/sys/bus/pci/devices/" + busId + "/";
  std::string cls = readLine(dir + "class");
  if (cls.empty()) {
    char b[16];
    std::snprintf(b, sizeof(b), "0x%04x00", hwlocClass);
    cls = b;
  }
  e->setAttr("busid", busId);
  e->setAttr("class", cls);
  for (const char* k : {"vendor", "device", "subsystem_vendor", "subsystem_device"}) {
    std::string v = readLine(dir + k);
    if (!v.empty()) e->setAttr(k, v);
  }
  e->setAttr("link_speed", readLine(dir + "max_link_speed"));
  e->setAttr("link_width", readLine(dir + "max_link_width"));
}

// ---- NVML, loaded at run time ----
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr unsigned kNvmlMaxLinks = 18;

struct GpuInfo {
  std::string busId;
  int dev = 0, sm = 0;
  std::map<std::string, std::pair<int, std::string>> nvlinks;  // target -> (count, tclass)
};

// CUDA device numbers by PCI bus id, from the driver API loaded at run time (it honours
// CUDA_VISIBLE_DEVICES, which NVML does not). Empty without a driver or a visible GPU.
std::map<std::string, int> cudaDevicesByBusId() {
  std::map<std::string, int> out;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return out;
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using BusIdFn = int (*)(char*, int, int);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cuDeviceGet"));
  auto busId = reinterpret_cast<BusIdFn>(dlsym(lib, "cuDeviceGetPCIBusId"));
  int n = 0;
  if (init && count && get && busId && init(0) == 0 && count(&n) == 0) {
    for (int i = 0; i < n; ++i) {
      int dev = 0;
      char b[64] = {};
      if (get(&dev, i) != 0 || busId(b, sizeof(b), dev) != 0) continue;
      unsigned d = 0, bus = 0, slot = 0, fn = 0;
      if (std::sscanf(b, "%x:%x:%x.%x", &d, &bus, &slot, &fn) == 4) out[busIdString(d, bus, slot, 0)] = i;
    }
  }
  // The driver stays loaded: unloading libcuda under a process that uses CUDA is unsafe.
  return out;
}

std::vector<GpuInfo> probeGpus() {
  std::vector<GpuInfo> gpus;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    COLL_INFO(GRAPH, "topology probe: no NVML (%s): no GPUs", dlerror());
    return gpus;
  }
  auto sym = [&](const char* n) { return dlsym(lib, n); };
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, NvmlDevice*);
  using PciFn = int (*)(NvmlDevice, NvmlPciInfo*);
  using CcFn = int (*)(NvmlDevice, int*, int*);
  using LinkStateFn = int (*)(NvmlDevice, unsigned, int*);
  using RemotePciFn = int (*)(NvmlDevice, unsigned, NvmlPciInfo*);
  using RemoteTypeFn = int (*)(NvmlDevice, unsigned, int*);
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<InitFn>(sym("nvmlShutdown"));
  auto count = reinterpret_cast<CountFn>(sym("nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto pci = reinterpret_cast<PciFn>(sym("nvmlDeviceGetPciInfo_v3"));
  auto cc = reinterpret_cast<CcFn>(sym("nvmlDeviceGetCudaComputeCapability"));
  auto linkState = reinterpret_cast<LinkStateFn>(sym("nvmlDeviceGetNvLinkState"));
  auto remotePci = reinterpret_cast<RemotePciFn>(sym("nvmlDeviceGetNvLinkRemotePciInfo_v2"));
  auto remoteType = reinterpret_cast<RemoteTypeFn>(sym("nvmlDeviceGetNvLinkRemoteDeviceType"));
  unsigned n = 0;
  if (!init || !count || !handle || !pci || init() != 0) {
    COLL_INFO(GRAPH, "topology probe: NVML present but not usable (no driver?): no GPUs");
    dlclose(lib);
    return gpus;
  }
  if (count(&n) != 0) n = 0;
  for (unsigned i = 0; i < n; ++i) {
    NvmlDevice d = nullptr;
    NvmlPciInfo p{};
    if (handle(i, &d) != 0 || pci(d, &p) != 0) continue;
    GpuInfo g;
    g.dev = static_cast<int>(i);
    g.busId = busIdString(p.domain, p.bus, p.device, 0);
    int major = 0, minor = 0;
    if (cc && cc(d, &major, &minor) == 0) g.sm = major * 10 + minor;
    for (unsigned l = 0; linkState && remotePci && l < kNvmlMaxLinks; ++l) {
      int active = 0;
      NvmlPciInfo r{};
      if (linkState(d, l, &active) != 0 || !active || remotePci(d, l, &r) != 0) continue;
      std::string target = busIdString(r.domain, r.bus, r.device, 0);
      // Remote type: 0 GPU, 1 IBM NPU (a CPU), 2 NVSwitch; without the call, sysfs's
      // class of the remote device, and no such device means an NVSwitch the host
      // does not see (NVLink 4 systems).
      std::string tclass;
      int type = -1;
      if (remoteType && remoteType(d, l, &type) == 0) {
        tclass = type == 0 ? "0x030200" : type == 1 ? "0x060000" : "0x068000";
      } else {
        tclass = readLine("/sys/bus/pci/devices/" + target + "/class");
        if (tclass.empty()) tclass = "0x068000";
      }
      auto& e = g.nvlinks[target];
      e.first += 1;
      e.second = tclass;
    }
    gpus.push_back(std::move(g));
  }
  if (shutdown) shutdown();
  dlclose(lib);
  // dev = the CUDA device number where CUDA sees the GPU; GPUs it does not see (hidden by
  // CUDA_VISIBLE_DEVICES) are numbered after the visible ones, in NVML order.
  std::map<std::string, int> cuda = cudaDevicesByBusId();
  if (!cuda.empty()) {
    int next = static_cast<int>(cuda.size());
    for (GpuInfo& g : gpus) {
      auto it = cuda.find(g.busId);
      g.dev = it != cuda.end() ? it->second : next++;
    }
    std::sort(gpus.begin(), gpus.end(), [](const GpuInfo& a, const GpuInfo& b) { return a.dev < b.dev; });
  }
  return gpus;
}

// The PCI bus ids along a sysfs device path, from the topmost (below the host bridge,
// "pci0000:00", which is not one) down to the device itself; empty for a path without
// PCI devices (virtual interfaces).
std::vector<std::string> pciPath(const std::string& sysfsLink) {
  char real[PATH_MAX];
  if (!realpath(sysfsLink.c_str(), real)) return {};
  static const std::regex bdf("^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$");
  std::vector<std::string> found;
  std::string path = real;
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string comp = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (std::regex_match(comp, bdf)) found.push_back(comp);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return found;
}

// The PCI bus id of a network interface: the deepest PCI component of its sysfs device
// path (virtio NICs hang a virtioN node below theirs); empty for virtual interfaces.
std::string netdevBusId(const std::string& ifname) {
  std::vector<std::string> path = pciPath("/sys/class/net/" + ifname + "/device");
  return path.empty() ? "" : path.back();
}

// A device's PCI chain from the topmost bridge below the host bridge down to itself, and
// its NUMA node.
struct PciChain {
  std::vector<std::pair<std::string, unsigned>> bridges;  // bus id, class
  unsigned devClass = 0;
  int numa = -1;
};

// A NUMA node and the CPUs it holds.
struct NumaCpus {
  unsigned id = 0;
  CpuWords cpus;
};

// What the probe asks of the machine besides its GPUs and NICs: its NUMA nodes with their
// CPUs, and where a PCI device sits. hwloc answers where it loads; sysfs otherwise.
class MachineMap {
 public:
  virtual ~MachineMap() = default;
  virtual std::vector<NumaCpus> numaNodes() const = 0;  // never empty
  virtual PciChain pciChain(const std::string& busId) const = 0;
};

class HwlocMap : public MachineMap {
 public:
  explicit HwlocMap(HwlocLib lib) : lib_(std::move(lib)) {}
  ~HwlocMap() override {
    if (ok_) lib_.topologyDestroy(t_);
  }
  Status load() {
    if (lib_.topologyInit(&t_) != 0) return systemError("hwloc_topology_init", errno);
    ok_ = true;
    lib_.topologySetIoTypesFilter(t_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (lib_.topologyLoad(t_) != 0) return systemError("hwloc_topology_load (" + lib_.path + ")", errno);
    return okStatus();
  }

  std::vector<NumaCpus> numaNodes() const override {
    std::vector<NumaCpus> out;
    int n = lib_.nbobjsByType(t_, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t numa = lib_.objByType(t_, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
      out.push_back({numa->os_index, words(numa->cpuset)});
    }
    if (out.empty()) out.push_back({0, words(lib_.rootObj(t_)->cpuset)});  // no NUMA information
    return out;
  }

  PciChain pciChain(const std::string& busId) const override {
    PciChain c;
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (std::sscanf(busId.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return c;
    hwloc_obj_t o = lib_.pcidevByBusid(t_, dom, bus, dev, fn);
    if (!o) return c;
    c.devClass = o->attr->pcidev.class_id;
    for (hwloc_obj_t p = o->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
      if (p->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) continue;  // the host bridge
      const auto& u = p->attr->bridge.upstream.pci;
      c.bridges.insert(c.bridges.begin(), {busIdString(u.domain, u.bus, u.dev, u.func), u.class_id});
    }
    // The first ancestor with a cpuset is the non-I/O object the device hangs off.
    hwloc_obj_t anc = o;
    while (anc && !anc->cpuset) anc = anc->parent;
    if (anc && anc->nodeset) {
      int first = lib_.bitmapFirst(anc->nodeset);
      if (first >= 0) c.numa = first;
    }
    return c;
  }

 private:
  CpuWords words(hwloc_const_bitmap_t set) const {
    int last = lib_.bitmapLast(set);
    CpuWords out(last < 0 ? 1 : static_cast<size_t>(last / 32 + 1));
    constexpr unsigned kPerUlong = sizeof(unsigned long) / 4;
    for (unsigned w = 0; w < out.size(); ++w) {
      unsigned long v = lib_.bitmapToIthUlong(set, w / kPerUlong);
      out[w] = static_cast<uint32_t>(v >> (32 * (w % kPerUlong)));
    }
    return out;
  }

  HwlocLib lib_;
  hwloc_topology_t t_{};
  bool ok_ = false;
};

// The kernel's "ffffffff,00000000" mask (most significant word first) as words.
CpuWords parseCpuMask(const std::string& mask) {
  CpuWords out;
  size_t end = mask.size();
  while (end > 0) {
    size_t comma = mask.rfind(',', end - 1);
    size_t start = comma == std::string::npos ? 0 : comma + 1;
    out.push_back(static_cast<uint32_t>(std::strtoul(mask.substr(start, end - start).c_str(), nullptr, 16)));
    end = comma == std::string::npos ? 0 : comma;
  }
  return out;
}

// The machine as Linux's sysfs shows it, for machines without hwloc: NUMA nodes from
// /sys/devices/system/node (without it, one node holding every CPU), a device's bridges
// from its sysfs path, its NUMA node from its numa_node file.
class SysfsMap : public MachineMap {
 public:
  std::vector<NumaCpus> numaNodes() const override {
    std::map<unsigned, CpuWords> nodes;
    const std::string dir = "/sys/devices/system/node/";
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        unsigned id = 0;
        char tail = 0;
        if (std::sscanf(e->d_name, "node%u%c", &id, &tail) != 1) continue;
        nodes[id] = parseCpuMask(readLine(dir + e->d_name + "/cpumap"));
      }
      closedir(d);
    }
    std::vector<NumaCpus> out;
    for (auto& [id, cpus] : nodes) out.push_back({id, std::move(cpus)});
    if (out.empty()) {
      CpuWords all(static_cast<size_t>(std::max(get_nprocs_conf(), 1) + 31) / 32);
      for (int c = 0; c < get_nprocs_conf(); ++c) all[static_cast<size_t>(c / 32)] |= 1u << (c % 32);
      out.push_back({0, std::move(all)});
    }
    return out;
  }

  PciChain pciChain(const std::string& busId) const override {
    PciChain c;
    const std::string dir = "/sys/bus/pci/devices/" + busId;
    std::vector<std::string> path = pciPath(dir);
    if (path.empty() || path.back() != busId) return c;  // not a PCI device sysfs knows
    path.pop_back();
    for (const std::string& b : path) c.bridges.push_back({b, pciClass("/sys/bus/pci/devices/" + b)});
    c.devClass = pciClass(dir);
    std::string numa = readLine(dir + "/numa_node");
    if (!numa.empty()) c.numa = static_cast<int>(std::strtol(numa.c_str(), nullptr, 10));
    return c;
  }

 private:
  // hwloc's class id (class and subclass) from sysfs's "0x060400" (with the interface).
  static unsigned pciClass(const std::string& dir) {
    return static_cast<unsigned>(std::strtoul(readLine(dir + "/class").c_str(), nullptr, 16) >> 8);
  }
};

// hwloc's view of the machine where it loads, sysfs's otherwise; the first probe of each
// COLL_HWLOC_LIB setting that cannot load it says so at INFO.
Result<std::unique_ptr<MachineMap>> machineMap() {
  Result<HwlocLib> lib = HwlocLib::load();
  if (!lib.ok()) {
    static std::set<std::string> told;  // under probeTopologyXml's lock
    if (told.insert(param(StringParam::HWLOC_LIB)).second)
      COLL_INFO(GRAPH,
                "topology probe: no hwloc (%s): NUMA nodes, their CPUs and PCI paths are read from sysfs "
                "(every CPU of a node, not only those this process may run on; without "
                "/sys/devices/system/node: one NUMA node holding every CPU)",
                lib.status().message().c_str());
    return std::unique_ptr<MachineMap>(new SysfsMap());
  }
  auto map = std::make_unique<HwlocMap>(lib.take());
  COLL_CHECK(map->load());
  return std::unique_ptr<MachineMap>(std::move(map));
}

// The <pci> element for busId under `parent`, created (with sysfs attributes) if absent.
XmlNode* pciElement(XmlNode* parent, const std::string& busId, unsigned hwlocClass) {
  if (XmlNode* e = parent->child("pci", "busid", busId)) return e;
  XmlNode* e = parent->addChild("pci");
  fillPciAttrs(e, busId, hwlocClass);
  return e;
}

// The <cpu> elements under `system`, one per NUMA node, by NUMA node.
std::map<int, XmlNode*> addCpuElements(const MachineMap& map, XmlNode* system) {
  utsname u{};
  uname(&u);
  CpuId id = cpuId();
  std::map<int, XmlNode*> cpuByNuma;
  for (const NumaCpus& n : map.numaNodes()) {
    XmlNode* cpu = system->addChild("cpu");
    cpu->setAttr("numaid", std::to_string(n.id));
    cpu->setAttr("affinity", affinityString(n.cpus));
    cpu->setAttr("arch", u.machine);
    cpu->setAttr("vendor", id.vendor);
    cpu->setAttr("familyid", id.family);
    cpu->setAttr("modelid", id.model);
    cpuByNuma[static_cast<int>(n.id)] = cpu;
  }
  return cpuByNuma;
}

// Where probed devices go in the XML: under their NUMA node's <cpu> (the first <cpu> when
// that is unknown), behind the PCI bridges above them.
class DevicePlacer {
 public:
  DevicePlacer(const MachineMap& map, std::map<int, XmlNode*> cpuByNuma)
      : map_(map), cpuByNuma_(std::move(cpuByNuma)) {}

  XmlNode* cpuFor(int numa) { return cpuByNuma_.count(numa) ? cpuByNuma_[numa] : cpuByNuma_.begin()->second; }
  // Places a device at its PCI position; returns its <pci> element.
  XmlNode* place(const std::string& busId) {
    PciChain c = map_.pciChain(busId);
    XmlNode* at = cpuFor(c.numa);
    for (const auto& [bid, cls] : c.bridges) at = pciElement(at, bid, cls);
    return pciElement(at, busId, c.devClass);
  }

 private:
  const MachineMap& map_;
  std::map<int, XmlNode*> cpuByNuma_;
};

// A <gpu> element, with its <nvlink>s, for each CUDA device.
void addGpuElements(DevicePlacer* placer) {
  for (const GpuInfo& g : probeGpus()) {
    XmlNode* pci = placer->place(g.busId);
    if (pci->child("gpu")) continue;
    XmlNode* ge = pci->addChild("gpu");
    ge->setAttr("dev", std::to_string(g.dev));
    ge->setAttr("sm", std::to_string(g.sm));
    ge->setAttr("rank", std::to_string(g.dev));
    ge->setAttr("gdr", "0");
    for (const auto& [target, e] : g.nvlinks) {
      XmlNode* nv = ge->addChild("nvlink");
      nv->setAttr("target", target);
      nv->setAttr("count", std::to_string(e.first));
      nv->setAttr("tclass", e.second);
    }
  }
}

// A <net> element for device d of the network backend, in a <nic> at the device's PCI
// position, or under its NUMA node's <cpu> when it has none.
void addNetElement(DevicePlacer* placer, int d, const NetProperties& props) {
  std::string busId = netdevBusId(props.name);
  long mbps = std::strtol(readLine("/sys/class/net/" + props.name + "/speed").c_str(), nullptr, 10);
  if (mbps <= 0) mbps = props.speedMbps;  // virtual NICs report -1
  XmlNode* parent;
  if (!busId.empty()) {
    parent = placer->place(busId);
  } else {
    int numa = static_cast<int>(std::strtol(readLine("/sys/class/net/" + props.name + "/device/numa_node").c_str(),
                                            nullptr, 10));
    parent = placer->cpuFor(numa);
  }
  XmlNode* nic = parent->child("nic");
  if (!nic) nic = parent->addChild("nic");
  XmlNode* net = nic->addChild("net");
  net->setAttr("name", props.name);
  net->setAttr("dev", std::to_string(d));
  net->setAttr("speed", std::to_string(mbps));
  net->setAttr("port", "0");
  net->setAttr("latency", "0.000000");
  net->setAttr("guid", "0x0");
  net->setAttr("maxconn", std::to_string(props.maxComms));
  net->setAttr("gdr", props.hostMemOnly ? "0" : "1");
}

// A <net> element for each device of the network backend, when there is one.
void addNetElements(DevicePlacer* placer) {
  Result<NetBackend*> nb = netBackend();
  if (!nb.ok()) return;
  NetBackend* b = nb.value();
  for (int d = 0; d < b->devices(); ++d) {
    NetProperties props;
    if (!b->properties(d, &props).ok()) continue;
    addNetElement(placer, d, props);
  }
}

}  // namespace

// One probe at a time in a process: hwloc's load is not safe in two threads at once
// (ThreadSanitizer: its udev path writes libudev's globals unlocked when ranks that are
// threads of one process initialize together with COLL_TOPO_FILE or COLL_TOPO_DUMP_FILE).
// The lock is this copy of the library's: libcollectives.so and libnccl.so.2 in one
// process each have theirs (each is built from the same objects, nothing shared).
Result<std::unique_ptr<XmlNode>> probeTopologyXml() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  COLL_ASSIGN(std::unique_ptr<MachineMap> map, machineMap());
  auto system = std::make_unique<XmlNode>("system");
  system->setAttr("version", "1");
  DevicePlacer placer(*map, addCpuElements(*map, system.get()));
  addGpuElements(&placer);
  addNetElements(&placer);
  return system;
}

int mergeProbe(XmlNode* file, const XmlNode& probed) {
  // Bus ids of the probe's devices that carry a <gpu> or <nic>.
  std::map<std::string, const XmlNode*> found;
  std::vector<const XmlNode*> stack{&probed};
  while (!stack.empty()) {
    const XmlNode* n = stack.back();
    stack.pop_back();
    if (n->name() == "pci" && (n->child("gpu") || n->child("nic"))) found[n->attrOr("busid", "")] = n;
    for (const auto& c : n->children()) stack.push_back(c.get());
  }
  int added = 0;
  std::vector<XmlNode*> todo{file};
  while (!todo.empty()) {
    XmlNode* n = todo.back();
    todo.pop_back();
    for (const auto& c : n->children()) todo.push_back(c.get());
    if (n->name() != "pci") continue;
    auto it = found.find(n->attrOr("busid", ""));
    if (it == found.end()) continue;
    for (const char* kind : {"gpu", "nic"}) {
      const XmlNode* src = it->second->child(kind);
      if (src && !n->child(kind)) {
        n->adopt(src->clone());
        ++added;
      }
    }
  }
  return added;
}

Result<std::unique_ptr<Topology>> loadSystemTopology(std::string* origin) {
  std::string file = param(StringParam::TOPO_FILE);
  COLL_ASSIGN(auto probed, probeTopologyXml());
  if (file.empty()) {
    if (origin) *origin = "probe";
    return Topology::fromXml(*probed, "the probed topology");
  }
  COLL_ASSIGN(auto xml, xmlLoadFile(file));
  int added = mergeProbe(xml.get(), *probed);
  COLL_INFO(GRAPH, "topology from %s (%d element(s) added from the probe)", file.c_str(), added);
  if (origin) *origin = file;
  return Topology::fromXml(*xml, "topology file \"" + file + "\"");
}

Status dumpTopologyIfAsked(const Topology& topo) {
  std::string path = param(StringParam::TOPO_DUMP_FILE);
  if (path.empty()) return okStatus();
  COLL_CHECK(xmlSaveFile(path, topo.xml()));
  COLL_INFO(GRAPH, "topology written to %s", path.c_str());
  return okStatus();
}

}  // namespace coll

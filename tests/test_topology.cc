// Topology: XML parse/write, loading every fixture (published cloud files, skeletons,
// our DGX-H100-like and PCIe boxes, this VM), path types, the probe of this machine,
// merging a skeleton with probed devices, and the properties of rings and trees on every
// fixture and node count.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "algorithms/graph.h"
#include "comm/comm.h"
#include "harness.h"
#include "topology/hwloc_lib.h"
#include "topology/probe.h"
#include "topology/topo.h"
#include "topology/xml.h"

using namespace coll;

namespace {

const std::string kDir = COLL_TEST_TOPO_DIR;

const std::vector<std::string>& fixtures() {
  static const std::vector<std::string> f = {
      "azure/ndv2-topo.xml",       "azure/ndv4-topo.xml",       "azure/ndv5-topo.xml",
      "azure/ncv4-topo.xml",       "simai/topo_1A100_1CX6.xml", "simai/topo_2A100_1CX6.xml",
      "simai/topo_4A100_2CX6.xml", "simai/topo_8A100_4CX6.xml", "dgx-h100-like.xml",
      "pcie-8gpu-2socket.xml",     "vm-debian12-2core.xml",     "dgx1-like-cubemesh.xml"};
  return f;
}

std::unique_ptr<XmlNode> loadXml(const std::string& name) {
  auto r = xmlLoadFile(kDir + "/" + name);
  INFO(name << ": " << (r.ok() ? "" : r.status().message()));
  REQUIRE(r.ok());
  return r.take();
}

std::unique_ptr<Topology> loadTopo(const std::string& name) {
  auto xml = loadXml(name);
  auto t = Topology::fromXml(*xml, name);
  INFO(name << ": " << (t.ok() ? "" : t.status().message()));
  REQUIRE(t.ok());
  return t.take();
}

int gpuByDev(const Topology& t, int dev) {
  for (int g : t.gpus())
    if (t.node(g).index == dev) return g;
  return -1;
}

int netByName(const Topology& t, const std::string& name) {
  for (int n : t.nets())
    if (t.node(n).name == name) return n;
  return -1;
}

}  // namespace

TEST_CASE("xml parses and writes NCCL topology files", "[topology][xml]") {
  auto r = xmlParse("<?xml version=\"1.0\"?>\n<!-- c -->\n<system version='1'>\n  <cpu numaid=\"0\" "
                    "vendor=\"A&amp;B\"><pci busid=\"0000:01:00.0\"/></cpu>\n</system>\n",
                    "text");
  REQUIRE(r.ok());
  auto& root = *r.value();
  CHECK(root.name() == "system");
  CHECK(root.attrOr("version", "") == "1");
  REQUIRE(root.child("cpu"));
  CHECK(root.child("cpu")->attrOr("vendor", "") == "A&B");
  CHECK(xmlWrite(root) ==
        "<system version=\"1\">\n  <cpu numaid=\"0\" vendor=\"A&amp;B\">\n    <pci busid=\"0000:01:00.0\"/>\n  "
        "</cpu>\n</system>\n");

  struct Bad {
    const char* text;
    const char* says;
  };
  for (Bad b :
       {Bad{"<system>\n<cpu>\n</system>", "line 3: </system> closes <cpu>"},
        Bad{"<system a=1/>", "expected a quoted value for a"}, Bad{"<system a=\"1\" a=\"2\"/>", "attribute a twice"},
        Bad{"", "no root element"}, Bad{"<a/><b/>", "a second root element"},
        Bad{"<a x=\"&foo;\"/>", "unknown entity &foo;"}, Bad{"<system>", "never closed"}}) {
    auto e = xmlParse(b.text, "topology file \"t.xml\"");
    INFO(b.text);
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().code() == Code::kInvalidArgument);
    CHECK_THAT(e.status().message(), Catch::Contains("topology file \"t.xml\""));
    CHECK_THAT(e.status().message(), Catch::Contains(b.says));
  }
  auto missing = xmlLoadFile(kDir + "/no-such-file.xml");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("no-such-file.xml"));
}

TEST_CASE("bad topology content is named", "[topology][xml]") {
  auto check = [](const char* text, const char* says) {
    auto x = xmlParse(text, "f.xml");
    REQUIRE(x.ok());
    auto t = Topology::fromXml(*x.value(), "f.xml");
    INFO(text);
    REQUIRE_FALSE(t.ok());
    CHECK_THAT(t.status().message(), Catch::Contains(says));
  };
  check("<topology/>", "root element is <topology>");
  check("<system version=\"1\"/>", "no <cpu>");
  check("<system><cpu numaid=\"0\"><pci class=\"0x030200\"/></cpu></system>", "<pci> element without busid");
  check("<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"0\"/></pci>"
        "<pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"0\"/></pci></cpu></system>",
        "two GPUs with dev=0");
  // Limits: a dev that would size a table, and more end points than paths are computed for.
  check("<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"><gpu dev=\"2000000000\"/>"
        "</pci></cpu></system>",
        "a GPU with dev=2000000000, at most 63");
  std::string cpus = "<system>";
  for (int i = 0; i < 33; ++i) cpus += "<cpu numaid=\"" + std::to_string(i) + "\"/>";
  check((cpus + "</system>").c_str(), "f.xml: 33 CPUs, at most 32");
  std::string many = "<system><cpu numaid=\"0\">";
  for (int i = 0; i < 2100; ++i) many += "<x/>";
  check((many + "</cpu></system>").c_str(), "more than 2048 elements under <system>");
}

TEST_CASE("xml beyond its limits is refused, naming the file", "[topology][xml]") {
  std::string attrs = "<a";
  for (int i = 0; i < 300; ++i) attrs += " k" + std::to_string(i) + "=\"v\"";
  auto a = xmlParse(attrs + "/>", "many.xml");
  REQUIRE_FALSE(a.ok());
  CHECK_THAT(a.status().message(), Catch::Contains("many.xml line 1: more than 256 attributes in <a>"));
  std::string elements = "<a>";
  for (int i = 0; i < 70000; ++i) elements += "<b/>";
  auto e = xmlParse(elements + "</a>", "big.xml");
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.status().message(), Catch::Contains("big.xml line 1: more than 65536 elements"));
  // A path that never ends (a device) is read only up to the limit.
  auto z = xmlLoadFile("/dev/zero");
  REQUIRE_FALSE(z.ok());
  CHECK_THAT(z.status().message(), Catch::Contains("topology file \"/dev/zero\" is larger than 16777216 bytes"));
}

TEST_CASE("every fixture loads and dump-load-dump is a fixed point", "[topology][xml]") {
  for (const std::string& f : fixtures()) {
    INFO(f);
    auto t1 = loadTopo(f);
    std::string d1 = xmlWrite(t1->xml());
    auto x2 = xmlParse(d1, "dump of " + f);
    REQUIRE(x2.ok());
    auto t2 = Topology::fromXml(*x2.value(), "dump of " + f);
    REQUIRE(t2.ok());
    CHECK(xmlWrite(t2.value()->xml()) == d1);
    CHECK(t2.value()->gpus().size() == t1->gpus().size());
    CHECK(t2.value()->nets().size() == t1->nets().size());
  }
}

TEST_CASE("fixtures have the devices and paths of the machines they describe", "[topology]") {
  struct Want {
    const char* file;
    size_t cpus, gpus, nets;
    bool nvswitch;
  };
  for (Want w : {Want{"azure/ndv2-topo.xml", 2, 8, 1, false}, Want{"azure/ndv4-topo.xml", 4, 8, 8, false},
                 Want{"azure/ndv5-topo.xml", 2, 8, 8, false}, Want{"azure/ncv4-topo.xml", 4, 4, 1, false},
                 Want{"simai/topo_8A100_4CX6.xml", 2, 8, 5, true}, Want{"dgx-h100-like.xml", 2, 8, 8, true},
                 Want{"pcie-8gpu-2socket.xml", 2, 8, 2, false}}) {
    INFO(w.file);
    auto t = loadTopo(w.file);
    CHECK(t->cpus().size() == w.cpus);
    CHECK(t->gpus().size() == w.gpus);
    CHECK(t->nets().size() == w.nets);
    CHECK(t->ofType(NodeType::kNvs).empty() == !w.nvswitch);
    for (size_t i = 0; i < t->gpus().size(); ++i) CHECK(t->node(t->gpus()[i]).index == static_cast<int>(i));
  }

  SECTION("DGX-H100-like: NVLink between GPUs, own NIC under the same switch") {
    auto t = loadTopo("dgx-h100-like.xml");
    const TopoPath& p = t->path(gpuByDev(*t, 0), gpuByDev(*t, 7));
    CHECK(p.type == PathType::kNvl);
    CHECK(p.bw == Approx(18 * 20.6));
    CHECK(t->path(gpuByDev(*t, 0), netByName(*t, "mlx5_0")).type == PathType::kPix);
    CHECK(t->path(gpuByDev(*t, 0), netByName(*t, "mlx5_0")).bw == Approx(50.0));  // 400 Gb/s
    CHECK(t->path(gpuByDev(*t, 0), netByName(*t, "mlx5_1")).type == PathType::kPhb);
    CHECK(t->path(gpuByDev(*t, 0), netByName(*t, "mlx5_5")).type == PathType::kSys);
  }
  SECTION("PCIe box: PIX under one switch, PHB across switches, SYS across sockets") {
    auto t = loadTopo("pcie-8gpu-2socket.xml");
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 1)).type == PathType::kPix);
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 1)).bw == Approx(pciBandwidth("16.0 GT/s", "16")));
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 2)).type == PathType::kPhb);
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 5)).type == PathType::kSys);
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 5)).bw == Approx(10.0));
    CHECK(t->path(gpuByDev(*t, 1), netByName(*t, "eth0")).type == PathType::kPix);
  }
  SECTION("simai A100: NVSwitch paths, NICs through two switches") {
    auto t = loadTopo("simai/topo_8A100_4CX6.xml");
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 5)).type == PathType::kNvl);
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 5)).bw == Approx(12 * 20.0));
    CHECK(t->path(gpuByDev(*t, 1), netByName(*t, "mlx5_bond_1")).type == PathType::kPxb);
  }
  SECTION("ndv5 skeleton: each GPU shares a bridge with one NIC") {
    auto t = loadTopo("azure/ndv5-topo.xml");
    for (int g : t->gpus()) {
      int pix = 0;
      for (int n : t->nets()) pix += t->path(g, n).type == PathType::kPix;
      CHECK(pix == 1);
    }
  }
  SECTION("ncv4: a GPU's NVLink to itself is ignored") {
    auto t = loadTopo("azure/ncv4-topo.xml");
    CHECK(t->path(gpuByDev(*t, 0), gpuByDev(*t, 1)).type == PathType::kSys);
  }
}

TEST_CASE("pci bandwidth from link speed and width", "[topology]") {
  CHECK(pciBandwidth("16 GT/s", "16") == Approx(31.5).epsilon(0.01));
  CHECK(pciBandwidth("32.0 GT/s PCIe", "16") == Approx(63.0).epsilon(0.01));
  CHECK(pciBandwidth("2.5 GT/s", "1") == Approx(0.25));
  CHECK(pciBandwidth("", "0") == 0);
  CHECK(pciBandwidth("8.0 GT/s PCIe", "0") == 0);
}

TEST_CASE("the probe describes this machine and its dump reloads identically", "[topology][probe]") {
  auto x = probeTopologyXml();
  REQUIRE(x.ok());
  auto t = Topology::fromXml(*x.value(), "probe");
  REQUIRE(t.ok());
  CHECK(t.value()->cpus().size() >= 1);
  CHECK(t.value()->nets().size() >= 1);  // the socket backend's interface
  for (int n : t.value()->nets()) CHECK(t.value()->path(t.value()->localCpu(n), n).type != PathType::kDis);
  std::string d1 = xmlWrite(t.value()->xml());
  auto x2 = xmlParse(d1, "dump");
  REQUIRE(x2.ok());
  auto t2 = Topology::fromXml(*x2.value(), "dump");
  REQUIRE(t2.ok());
  CHECK(xmlWrite(t2.value()->xml()) == d1);

  // COLL_TOPO_DUMP_FILE writes it; COLL_TOPO_FILE reads it back.
  char path[] = "/tmp/colltopo-dump-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  setenv("COLL_TOPO_DUMP_FILE", path, 1);
  REQUIRE(dumpTopologyIfAsked(*t.value()).ok());
  unsetenv("COLL_TOPO_DUMP_FILE");
  setenv("COLL_TOPO_FILE", path, 1);
  std::string origin;
  auto loaded = loadSystemTopology(&origin);
  unsetenv("COLL_TOPO_FILE");
  std::remove(path);
  REQUIRE(loaded.ok());
  CHECK(origin == path);
  CHECK(xmlWrite(loaded.value()->xml()) == d1);
}

namespace {

// Bus ids of the probe's <pci> elements that hold a GPU or a NIC, and the CPUs' masks.
void probedDevices(const XmlNode& n, std::set<std::string>* devices, std::vector<std::string>* cpus) {
  if (n.name() == "pci" && (n.child("gpu") || n.child("nic"))) devices->insert(n.attrOr("busid", ""));
  if (n.name() == "cpu") cpus->push_back(n.attrOr("affinity", ""));
  for (const auto& c : n.children()) probedDevices(*c, devices, cpus);
}

}  // namespace

TEST_CASE("COLL_HWLOC_LIB is a list tried in order and a library without hwloc is named", "[topology][probe]") {
  {
    testing::ScopedEnv env("COLL_HWLOC_LIB", "/nonexistent/libhwloc.so.15,libhwloc.so.15");
    auto lib = HwlocLib::load();
    REQUIRE(lib.ok());
    CHECK(lib.value().path == "libhwloc.so.15");
  }
  testing::ScopedEnv env("COLL_HWLOC_LIB", "libc.so.6");
  auto lib = HwlocLib::load();
  REQUIRE_FALSE(lib.ok());
  CHECK_THAT(lib.status().message(), Catch::Contains("libc.so.6 lacks hwloc_get_api_version"));
}

// As on a machine without libhwloc: the probe reads sysfs, says so once per setting, and
// places the same devices (those come from NVML and the net backend, not hwloc).
TEST_CASE("the probe without hwloc reads sysfs and finds the same devices", "[topology][probe]") {
  auto with = probeTopologyXml();
  REQUIRE(with.ok());
  std::set<std::string> devWith, devWithout;
  std::vector<std::string> cpusWith, cpusWithout;
  probedDevices(*with.value(), &devWith, &cpusWith);
  // A name of its own, so no earlier probe of this process has said it.
  const std::string missing = "/nonexistent/" + std::to_string(getpid()) + "/libhwloc.so.15";
  testing::ScopedEnv env("COLL_HWLOC_LIB", missing.c_str());
  testing::ScopedEnv level("COLL_DEBUG", "INFO");
  testing::ScopedEnv subsys("COLL_DEBUG_SUBSYS", "GRAPH");
  testing::CapturedLog log("probe-without-hwloc");
  auto without = probeTopologyXml();
  REQUIRE(without.ok());
  REQUIRE(probeTopologyXml().ok());
  CHECK(log.count("topology probe: no hwloc") == 1);
  CHECK(log.count(missing) == 1);
  probedDevices(*without.value(), &devWithout, &cpusWithout);
  CHECK(devWithout == devWith);
  REQUIRE(!cpusWithout.empty());
  CHECK(std::any_of(cpusWithout.begin(), cpusWithout.end(),
                    [](const std::string& a) { return a.find_first_not_of("0,") != std::string::npos; }));
  auto t = Topology::fromXml(*without.value(), "probe without hwloc");
  REQUIRE(t.ok());
  CHECK(t.value()->nets().size() >= 1);
  for (int n : t.value()->nets()) CHECK(t.value()->path(t.value()->localCpu(n), n).type != PathType::kDis);
}

TEST_CASE("a skeleton file is completed with probed devices of the same bus id", "[topology][probe]") {
  auto file = xmlParse("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:13:00.0\" class=\"0x030200\"/>"
                       "<pci busid=\"0000:14:00.0\" class=\"0x020700\"/></cpu></system>",
                       "skeleton");
  auto probed = xmlParse("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:13:00.0\" class=\"0x030200\">"
                         "<gpu dev=\"3\" sm=\"90\" rank=\"3\" gdr=\"0\"/></pci></cpu></system>",
                         "probe");
  REQUIRE(file.ok());
  REQUIRE(probed.ok());
  CHECK(mergeProbe(file.value().get(), *probed.value()) == 1);
  CHECK(mergeProbe(file.value().get(), *probed.value()) == 0);  // nothing twice
  auto t = Topology::fromXml(*file.value(), "merged");
  REQUIRE(t.ok());
  REQUIRE(t.value()->gpus().size() == 1);
  CHECK(t.value()->node(t.value()->gpus()[0]).index == 3);
  CHECK(t.value()->node(t.value()->gpus()[0]).sm == 90);
  REQUIRE(t.value()->nets().size() == 1);  // the skeleton NIC: one port as fast as its slot
}

namespace {

// Checks one channel's trees over all ranks: one root each, parents and children agree,
// every rank reachable from the root, no rank twice.
void checkTree(const std::vector<TreeLinks>& tree, int nranks) {
  int root = -1;
  for (int r = 0; r < nranks; ++r) {
    const TreeLinks& l = tree[static_cast<size_t>(r)];
    if (l.parent < 0) {
      REQUIRE(root == -1);
      root = r;
    } else {
      const auto& kids = tree[static_cast<size_t>(l.parent)].children;
      REQUIRE(std::count(kids.begin(), kids.end(), r) == 1);
    }
    for (int k : l.children) REQUIRE(tree[static_cast<size_t>(k)].parent == r);
  }
  REQUIRE(root >= 0);
  std::vector<int> seen(static_cast<size_t>(nranks), 0), stack{root};
  while (!stack.empty()) {
    int r = stack.back();
    stack.pop_back();
    REQUIRE(seen[static_cast<size_t>(r)]++ == 0);
    for (int k : tree[static_cast<size_t>(r)].children) stack.push_back(k);
  }
  for (int s : seen) REQUIRE(s == 1);
}

}  // namespace

TEST_CASE("double binary trees are complementary for every node count", "[topology][trees]") {
  for (int n = 1; n <= 64; ++n) {
    INFO("nodes " << n);
    std::vector<TreeLinks> t0(static_cast<size_t>(n)), t1(static_cast<size_t>(n));
    int innerBoth = 0;
    for (int k = 0; k < n; ++k) {
      TreeLinks l[2];
      doubleBinaryTree(n, k, l);
      CHECK(l[0].children.size() <= 2);
      CHECK(l[1].children.size() <= 2);
      t0[static_cast<size_t>(k)] = l[0];
      t1[static_cast<size_t>(k)] = l[1];
      bool inner0 = !l[0].children.empty(), inner1 = !l[1].children.empty();
      if (n >= 2) CHECK((inner0 || inner1));  // a leaf in both would carry nothing
      innerBoth += inner0 && inner1;
    }
    checkTree(t0, n);
    checkTree(t1, n);
    // NCCL's construction: inner in one tree and leaf in the other; an odd count leaves
    // one node (node 0) inner in both.
    CHECK(innerBoth == (n % 2 == 1 && n > 1 ? 1 : 0));
  }
}

TEST_CASE("rings and trees on every fixture", "[topology][rings]") {
  for (const std::string& f : fixtures()) {
    auto t = loadTopo(f);
    for (int nodes : {1, 2, 3, 4}) {
      INFO(f << ", " << nodes << " node(s)");
      auto g = searchGraphs(*t, nodes);
      REQUIRE(g.ok());
      const Graphs& gr = g.value();
      size_t per = t->gpus().size();
      CHECK(gr.rings.size() == std::max<size_t>(1, t->nets().size()));
      std::set<int> entryNets;
      for (const NodeRing& r : gr.rings) {
        // Each ring visits every GPU of the node exactly once.
        std::vector<int> devs = r.gpus;
        std::sort(devs.begin(), devs.end());
        std::vector<int> want(per);
        for (size_t i = 0; i < per; ++i) want[i] = static_cast<int>(i);
        CHECK(devs == want);
        if (!t->nets().empty() && per > 0) {
          entryNets.insert(r.netIn);
          // Entry: no GPU is closer to the entry NIC than the first; exit: no NIC is
          // closer to the last GPU than the exit NIC.
          int first = gpuByDev(*t, r.gpus.front()), last = gpuByDev(*t, r.gpus.back());
          for (int g2 : t->gpus()) CHECK(t->path(g2, r.netIn).bw <= t->path(first, r.netIn).bw);
          for (int n : t->nets()) CHECK(t->path(last, n).bw <= t->path(last, r.netOut).bw);
        }
      }
      if (per > 0) CHECK(entryNets.size() == std::min(gr.rings.size(), t->nets().size()));
      int nranks = nodes * static_cast<int>(per);
      for (size_t c = 0; c < gr.globalRings.size(); ++c) {
        std::vector<int> ranks = gr.globalRings[c];
        std::sort(ranks.begin(), ranks.end());
        for (int r = 0; r < nranks; ++r) CHECK(ranks[static_cast<size_t>(r)] == r);
        if (per == 0) continue;
        for (int tr = 0; tr < 2; ++tr) checkTree(gr.trees[c][static_cast<size_t>(tr)], nranks);
        // Node level: each node's head is inner in one tree and a leaf in the other.
        if (nodes >= 2 && nodes % 2 == 0) {
          for (int k = 0; k < nodes; ++k) {
            int head = k * static_cast<int>(per) + 0;
            for (int i = 0; i < static_cast<int>(per); ++i)
              if (t->node(t->gpus()[static_cast<size_t>(i)]).index == gr.rings[c].gpus[0])
                head = k * static_cast<int>(per) + i;
            auto crossNode = [&](int tr) {
              int n = 0;
              for (int kid : gr.trees[c][static_cast<size_t>(tr)][static_cast<size_t>(head)].children)
                n += kid / static_cast<int>(per) != k;
              return n;
            };
            CHECK(((crossNode(0) > 0) != (crossNode(1) > 0)));
          }
        }
      }
    }
  }
}

TEST_CASE("rings maximise the slowest hop", "[topology][rings]") {
  SECTION("PCIe box: switch mates adjacent, the sockets crossed twice") {
    auto t = loadTopo("pcie-8gpu-2socket.xml");
    double bw;
    PathType worst;
    std::vector<int> order = bestRingOrder(*t, &bw, &worst);
    REQUIRE(order.size() == 8);
    int sys = 0, phb = 0, pix = 0;
    for (size_t i = 0; i < 8; ++i) {
      PathType p = t->path(order[i], order[(i + 1) % 8]).type;
      sys += p == PathType::kSys;
      phb += p == PathType::kPhb;
      pix += p == PathType::kPix;
    }
    CHECK(sys == 2);
    CHECK(phb == 2);
    CHECK(pix == 4);
    CHECK(worst == PathType::kSys);
  }
  SECTION("NVSwitch: every hop NVLink, PCI order kept") {
    auto t = loadTopo("dgx-h100-like.xml");
    double bw;
    PathType worst;
    std::vector<int> order = bestRingOrder(*t, &bw, &worst);
    CHECK(worst == PathType::kNvl);
    CHECK(bw == Approx(18 * 20.6));
    for (size_t i = 0; i < order.size(); ++i) CHECK(t->node(order[i]).index == static_cast<int>(i));
    auto g = searchGraphs(*t, 2);
    REQUIRE(g.ok());
    // Channel c enters next to GPU c (its NIC's switch mate).
    for (size_t c = 0; c < g.value().rings.size(); ++c) CHECK(g.value().rings[c].gpus[0] == static_cast<int>(c));
  }
}

// A DGX-1-like hybrid cube-mesh: in bus order (0..7) two hops have no NVLink of their own
// (3 -> 4 and 7 -> 0 go through another GPU's links, NVB), while rings of direct NVLinks
// exist. Ranks bound to
// those GPUs, in device order, must form such a ring (comm.h ringOrder with the places
// gpuRingPosition gives, as commInit sends them).
TEST_CASE("the ring of a host's GPUs follows NVLink, not bus order", "[topology][rings]") {
  auto t = loadTopo("dgx1-like-cubemesh.xml");
  std::vector<std::string> bus(8);
  for (int g : t->gpus()) bus[static_cast<size_t>(t->node(g).index)] = t->node(g).busId;
  CHECK(t->path(gpuByDev(*t, 3), gpuByDev(*t, 4)).type == PathType::kNvb);
  CHECK(t->path(gpuByDev(*t, 7), gpuByDev(*t, 0)).type == PathType::kNvb);
  std::vector<coll::PeerInfo> peers(8);
  for (size_t r = 0; r < 8; ++r) {
    std::snprintf(peers[r].hostId, sizeof(peers[r].hostId), "host");
    std::snprintf(peers[r].busId, sizeof(peers[r].busId), "%s", bus[r].c_str());
    peers[r].ringPos = gpuRingPosition(*t, bus[r]);
    CHECK(peers[r].ringPos >= 0);
  }
  // Without the places: bus order, which takes the PCI hops.
  std::vector<coll::PeerInfo> byBus = peers;
  for (auto& p : byBus) p.ringPos = -1;
  CHECK(coll::ringOrder(byBus) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  const std::vector<int> ring = coll::ringOrder(peers);
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(sorted == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  for (size_t i = 0; i < 8; ++i) {
    INFO("hop " << ring[i] << " -> " << ring[(i + 1) % 8]);
    CHECK(t->path(gpuByDev(*t, ring[i]), gpuByDev(*t, ring[(i + 1) % 8])).type == PathType::kNvl);
  }
  // Addresses as CUDA and NVML write them (upper case, 8-digit domain) find the same GPU.
  CHECK(gpuRingPosition(*t, "0000:0A:00.0") == gpuRingPosition(*t, "0000:0a:00.0"));
  CHECK(gpuRingPosition(*t, "00000000:8a:00.0") == gpuRingPosition(*t, "0000:8a:00.0"));
  CHECK(gpuRingPosition(*t, "0000:42:00.0") == -1);  // not a GPU of this host
  CHECK(gpuRingPosition(*t, "") == -1);
  CHECK(gpuRingPosition(*t, "gpu0") == -1);
  // Host-memory ranks (no GPU, place -1) come first, then the GPUs in ring order.
  std::vector<coll::PeerInfo> mixed(peers.begin(), peers.begin() + 4);
  mixed.push_back(coll::PeerInfo{});
  std::snprintf(mixed.back().hostId, sizeof(mixed.back().hostId), "host");
  CHECK(coll::ringOrder(mixed).front() == 4);
}

TEST_CASE("host ranks without GPUs get rank-order rings and trees over hosts", "[topology][trees]") {
  auto t = loadTopo("vm-debian12-2core.xml");
  for (int nodes : {1, 2, 3, 5})
    for (int per : {1, 2, 3}) {
      INFO(nodes << " node(s) x " << per);
      auto g = searchGraphs(*t, nodes, 0, per);
      REQUIRE(g.ok());
      int nranks = nodes * per;
      REQUIRE(g.value().globalRings[0].size() == static_cast<size_t>(nranks));
      for (int r = 0; r < nranks; ++r) CHECK(g.value().globalRings[0][static_cast<size_t>(r)] == r);
      for (int tr = 0; tr < 2; ++tr) checkTree(g.value().trees[0][static_cast<size_t>(tr)], nranks);
    }
  CHECK_FALSE(searchGraphs(*t, 0).ok());
  CHECK_FALSE(searchGraphs(*t, 1, 0, 0).ok());
}

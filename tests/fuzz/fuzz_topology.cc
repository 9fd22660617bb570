// libFuzzer target: a topology file (COLL_TOPO_FILE): the XML parser, then the graph built
// from it. A document that parses must also write and parse back to the same text (the
// fixed point xml.h promises), and a graph must keep its paths' node indices in range.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "topology/topo.h"
#include "topology/xml.h"

using namespace coll;
using coll::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto x = xmlParse(text, "fuzz.xml");
  if (!x.ok()) return 0;
  const std::string once = xmlWrite(*x.value());
  auto again = xmlParse(once, "dump");
  require(again.ok(), "a written document parses");
  require(xmlWrite(*again.value()) == once, "write(parse(write(x))) == write(x)");
  auto t = Topology::fromXml(*x.value(), "fuzz.xml");
  if (!t.ok()) return 0;
  const Topology& topo = *t.value();
  require(topo.gpus().size() <= kMaxTopoGpus && topo.cpus().size() <= kMaxTopoCpus, "topology counts");
  for (int g : topo.gpus()) {
    require(topo.node(g).index >= 0 && topo.node(g).index < kMaxTopoGpus, "GPU dev");
    for (int c : topo.cpus())
      for (int hop : topo.path(g, c).hops)
        require(hop >= 0 && static_cast<size_t>(hop) < topo.nodes().size(), "path hop");
    (void)topo.localCpu(g);
  }
  return 0;
}

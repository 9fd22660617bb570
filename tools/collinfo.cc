// collinfo: prints the library version, the net backends and interfaces it would use,
// and every tunable with its default, current value and documentation.
#include <cstdio>
#include <string>

#include "bootstrap/socket.h"
#include "collectives/collectives.h"
#include "collectives/config.h"
#include "base/param.h"

int main() {
  int v = 0;
  collGetVersion(&v);
  std::printf("Collectives %d.%d.%d (version code %d), CUDA support: %s\n", v / 10000, (v / 100) % 100, v % 100, v,
              COLL_HAVE_CUDA ? "built" : "not built");
  std::printf("\nNetwork interfaces (COLL_SOCKET_IFNAME):\n");
  for (const auto& nif : coll::findInterfaces()) std::printf("  %-12s %s\n", nif.name.c_str(), nif.addr.str().c_str());
  std::printf("\nNet backends: Socket\n\nParameters (COLL_<NAME>, or NCCL_<NAME>):\n");
  for (const auto& p : coll::allParams()) {
    const char* raw = coll::paramRaw(p);
    if (raw && std::string(p.name) == "AUTH_KEY") raw = "(a secret: not shown)";
    std::string unit = p.unit[0] ? std::string(" ") + p.unit : "";
    std::printf("  COLL_%-20s default %-12s%s%s\n      %s\n", p.name,
                (std::string(p.defaultValue[0] ? p.defaultValue : "\"\"") + unit).c_str(), raw ? "  set to " : "",
                raw ? raw : "", p.doc);
  }
  return 0;
}

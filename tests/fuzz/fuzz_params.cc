// libFuzzer target: parameter values as the environment gives them: integers with size
// suffixes (every COLL_* integer) and interface lists (COLL_SOCKET_IFNAME). The first byte
// splits the input into a value and, for the interface list, an interface name.
#include <cstdint>
#include <string>

#include "base/param.h"
#include "bootstrap/socket.h"
#include "fuzz_input.h"

using namespace coll;
using coll::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t cut = 1 + data[0] % size;
  const std::string value(reinterpret_cast<const char*>(data + 1), cut - 1);
  const std::string ifname(reinterpret_cast<const char*>(data + cut), size - cut);
  int64_t v = 0;
  if (parseSize(value, &v)) {
    require(v >= -kMaxIntParam && v <= kMaxIntParam, "integer parameter bound");
    volatile int64_t us = v * 1000000;  // what a timeout in seconds becomes: no overflow
    (void)us;
  }
  // Both polarities agree: "^spec" matches exactly what "spec" does not (for a non-empty list).
  const bool hit = ifNameMatches(value, ifname);
  if (!value.empty() && value[0] != '^') require(ifNameMatches("^" + value, ifname) == !hit, "exclusion inverts");
  return 0;
}

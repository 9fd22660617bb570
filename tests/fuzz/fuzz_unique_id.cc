// libFuzzer target: the unique id an application hands collCommInitRank (128 bytes that
// may have been copied, truncated or made up), through the parser the API calls.
#include <cstdint>
#include <vector>

#include "bootstrap/wire.h"
#include "collectives/collectives.h"
#include "fuzz_input.h"

using namespace coll;
using coll::fuzz::padded;
using coll::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Both what the API passes (the whole collUniqueId) and shorter buffers.
  const bool whole = size == 0 || data[0] & 1;
  std::vector<char> b = whole ? padded(data, size, COLL_UNIQUE_ID_BYTES) : std::vector<char>(data, data + size);
  UniqueIdData id;
  if (parseUniqueId(b.data(), b.size(), &id).ok()) {
    require(id.magic == kIdMagic, "unique id magic");
    require(id.root.family() == AF_INET || id.root.family() == AF_INET6, "unique id family");
    require(id.root.len() <= sizeof(id.root.u), "unique id address length");
    (void)id.root.str();
  }
  return 0;
}

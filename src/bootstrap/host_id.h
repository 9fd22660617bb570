#pragma once
#include <string>
namespace coll {
// This host's identity: COLL_HOSTID if set, else hostname + kernel boot id. Ranks with
// equal ids are on one host and may use shared memory.
std::string localHostId();
std::string localHostName();
}  // namespace coll

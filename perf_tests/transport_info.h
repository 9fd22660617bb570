// A one-line description of the transports a communicator's ring uses on this rank
// ("ring recv shm / send net, 2 channels"), for the perf_tests header and JSON.
#pragma once

#include <string>

#include "collectives/collectives.h"

namespace perf {
std::string transportSummary(collComm_t comm);
}

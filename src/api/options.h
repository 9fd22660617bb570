// collConfig_t (and NCCL's ncclConfig_t, the same layout) into the communicator's
// CommOptions: size, magic and version checked, undefined fields defaulted or inherited.
#pragma once

#include "collectives/collectives.h"
#include "comm/comm.h"
#include "base/status.h"

namespace coll::api {

// config NULL gives *inherit (a split's or shrink's parent) or the defaults. Fields this
// library has no use for are accepted and logged once per process at INFO.
Result<CommOptions> optionsFromConfig(const collConfig_t* config, const CommOptions* inherit);

}  // namespace coll::api

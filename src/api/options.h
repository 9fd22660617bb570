// collConfig_t (and NCCL's ncclConfig_t, the same layout) into the communicator's
// CommOptions: size, magic and version checked, undefined fields defaulted or inherited;
// and a call's collCollConfig_t onto its operation.
#pragma once

#include "collectives/collectives.h"
#include "comm/comm.h"
#include "base/status.h"

namespace coll::api {

// config NULL gives *inherit (a split's or shrink's parent) or the defaults. Fields this
// library has no use for are accepted and logged once per process at INFO.
Result<CommOptions> optionsFromConfig(const collConfig_t* config, const CommOptions* inherit);

// A per-call config (coll*Config; NULL: nothing) onto the call's operation od, already
// placed (od->device set): its algorithm filter, channel bounds within comm's and
// profiler tag. Checked field by field, each error naming the field and its value.
Status applyCollConfig(const collCollConfig_t* config, collComm* comm, OpDesc* od);

}  // namespace coll::api

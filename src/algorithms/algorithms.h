// Algorithm builders: each appends the steps of one operation to the channel programs of
// one communicator (programs[ch] drives channel ch). See plan.h for the step vocabulary.
#pragma once

#include <vector>

#include "algorithms/plan.h"
#include "core/comm.h"

namespace coll {

// Number of channels an operation of `bytes` bytes spreads over: one per
// COLL_CHUNK_MIN_BYTES, at most the channels the communicator wired.
int channelsFor(const collComm* c, size_t bytes, bool device);

// [begin, end) of part i when `total` is split into n nearly equal parts.
inline size_t partBegin(size_t total, size_t n, size_t i) {
  return i * (total / n) + std::min(i, total % n);
}

void buildRingAllReduce(collComm* c, const OpDesc& od, uint16_t opIndex,
                        std::vector<Program>& programs);
void buildRingReduceScatter(collComm* c, const OpDesc& od, uint16_t opIndex,
                            std::vector<Program>& programs);
void buildRingAllGather(collComm* c, const OpDesc& od, uint16_t opIndex,
                        std::vector<Program>& programs);
void buildChainBroadcast(collComm* c, const OpDesc& od, uint16_t opIndex,
                         std::vector<Program>& programs);
void buildChainReduce(collComm* c, const OpDesc& od, uint16_t opIndex,
                      std::vector<Program>& programs);
void buildTreeAllReduce(collComm* c, const OpDesc& od, uint16_t opIndex,
                        std::vector<Program>& programs);

}  // namespace coll

// Algorithm builders: each appends the steps of one operation to the channel programs of
// one communicator (programs[ch] drives channel ch). See plan.h for the step vocabulary.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "algorithms/plan.h"
#include "algorithms/ring_layout.h"
#include "transport/connector_set.h"

namespace coll {

// What a builder reads of its communicator, for the connector set the operation runs over
// (host or device).
struct BuildInput {
  int nranks = 1;
  const RingLayout* ring = nullptr;  // the communicator's ring
  size_t sliceBytes = 0;
  size_t loopSlices = 1;        // slices of a block per ring loop (ring.cc), 1..kFifoSlots/2
  int64_t channelMinBytes = 1;  // COLL_CHUNK_MIN_BYTES: bytes per channel used
  int minChannels = 1;
  bool twoTrees = false;        // slices alternate between the two trees (tree.cc)
  size_t exchangeMaxBytes = 0;  // 2 ranks: allreduces up to this many bytes exchange their blocks (ring.cc)
  const ConnectorSet* conns = nullptr;
};

// Number of channels an operation of `bytes` bytes spreads over: one per
// COLL_CHUNK_MIN_BYTES, at most the channels of the set, within od's bounds where its
// call set them (coll*Config).
int channelsFor(const BuildInput& in, const OpDesc& od, size_t bytes);

// [begin, end) of part i when `total` is split into n nearly equal parts.
inline size_t partBegin(size_t total, size_t n, size_t i) { return i * (total / n) + std::min(i, total % n); }

// Elements of es bytes that a cut rounded up to 16 bytes may add to a part beyond an even
// share (alignedCut).
inline size_t alignedCutSlack(size_t es) { return es < 16 ? 16 / es - 1 : 0; }

// Boundary i of n nearly equal parts of elements [b, e) of es bytes, rounded up to 16
// bytes from the buffer's start: the vector path of a slice (kernels/slice.h) needs every
// pointer aligned; a part that starts mid-vector moves in narrower units (element by
// element before slice.h took the widest common unit: the direct route's 24 pieces of a
// 256 MiB block did, 161 GB/s on an H100 against 16 pieces' 300).
inline size_t alignedCut(size_t b, size_t e, int n, int i, size_t es) {
  if (i <= 0) return b;
  if (i >= n) return e;
  const size_t q = alignedCutSlack(es) + 1;
  const size_t x = b + partBegin(e - b, static_cast<size_t>(n), static_cast<size_t>(i));
  return std::min(e, (x + q - 1) / q * q);
}

// The first element in [b, e) that starts on 16 bytes from the buffer's start (e where
// none does): a piece starting mid-vector is cut there, its head (under 16 bytes) a step
// of its own, so the rest runs on vectors.
inline size_t vectorStart(size_t b, size_t e, size_t es) {
  const size_t q = alignedCutSlack(es) + 1;
  return std::min(e, (b + q - 1) / q * q);
}

void buildRingAllReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& programs);
void buildRingReduceScatter(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& programs);
void buildRingAllGather(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& programs);
void buildChainBroadcast(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& programs);
void buildChainReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& programs);
void buildTreeAllReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& programs);

// Direct allreduce (direct.cc): ranks that share one address space and GPU read each
// other's buffers. At most kMaxDirectRanks ranks (the device lanes' address table).
constexpr int kMaxDirectRanks = 16;
bool directFits(int nranks);
void buildDirectAllReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& programs);

}  // namespace coll

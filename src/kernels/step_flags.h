// What one step of a schedule does with a slice (bits of Step::flags in
// algorithms/plan.h and of the device lanes' steps in device/device_lane.h): a leaf header,
// so the host plan, the device lane format and the kernels that execute both share one
// definition without including each other.
#pragma once

#include <cstdint>

namespace coll {

enum StepFlags : uint8_t {
  kRecv = 1,
  kSrc = 2,
  kDst = 4,
  kSend = 8,
  kFinal = 16,
  kStream = 32,  // write kDst with non-temporal stores (large operations)
  // Device operations only: a zero-length slot sent, then one received, on a channel the
  // operation leaves empty, so ranks that called different counts (and so spread over
  // different channels) meet a size mismatch there instead of waiting forever.
  kToken = 64,
  // Device operations of ranks sharing one address space and GPU only (algorithms.h
  // buildDirectAllReduce): with kSend or kRecv, the step moves one entry of the lane's
  // table of the ranks' buffer addresses (Step::slot) instead of data; with kSrc|kDst, it
  // reduces this rank's block straight from every rank's input into every rank's output.
  kDirect = 128,
};

}  // namespace coll

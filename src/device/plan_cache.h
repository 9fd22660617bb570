// Device plans kept for reuse. A launch's part (one communicator's operations) is built
// into Programs (algorithms/) and lowered to DeviceLanes and DeviceSteps (device_lane.h): ~15 us of
// host time for one small allreduce on 32 channels, where the kernel that runs it may
// take less. The lowering depends only on the operations (kind, buffers, count, type,
// op, root, encoding, route) and on the communicator's connectors, which live as long as it
// does; nothing of a call's state (FIFO counters, results, the resume point) is in it.
// So each communicator keeps its last plans under the words that describe the
// operations (DevicePart::planKey, built by the caller), and a call that repeats one (a
// training step's buckets, a benchmark's loop) is neither built nor lowered again.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "device/device_lane.h"
#include "device/proxy.h"

namespace coll {

// One part's lowered lanes.
struct DevicePlan {
  std::vector<DeviceLane> lanes;  // each lane's `steps`: the index of its first step in `steps`
  std::vector<DeviceStep> steps;
  std::shared_ptr<const PendingLaunch::LaneInfos> info;  // names and peers of the steps, for messages
  std::vector<SendConnector*> sends;                     // connectors the proxy moves (net)
  std::vector<RecvConnector*> recvs;
};

// A communicator's plans, the least recently used dropped beyond `capacity`
// (COLL_DEVICE_PLAN_CACHE). Plans of more than kMaxSteps steps are not kept: their kernels
// run long enough that lowering them again costs little, and they would hold memory.
class DevicePlanCache {
 public:
  static constexpr size_t kMaxSteps = 4096;
  explicit DevicePlanCache(size_t capacity) : capacity_(capacity) {}
  // The plan kept under `key`, or null.
  std::shared_ptr<const DevicePlan> find(const std::vector<uint64_t>& key);
  // Keeps `plan` under `key` (unless it is too large), replacing what was there.
  void keep(const std::vector<uint64_t>& key, std::shared_ptr<const DevicePlan> plan);
  size_t size();
  uint64_t hits();  // finds that returned a plan

 private:
  struct Entry {
    std::vector<uint64_t> key;
    uint64_t hash;
    uint64_t used;  // tick_ at the last find or keep
    std::shared_ptr<const DevicePlan> plan;
  };
  static uint64_t hashOf(const std::vector<uint64_t>& key);
  std::mutex mu_;  // a communicator is driven by one thread at a time; this keeps misuse safe
  std::vector<Entry> entries_;
  uint64_t tick_ = 0;
  uint64_t hits_ = 0;
  size_t capacity_;
};

}  // namespace coll

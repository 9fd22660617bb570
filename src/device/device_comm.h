// The device part of a communicator (collComm::dev): the core and ring it reads through
// references (set at init, fixed after), the device set's shape and limits, staging and
// the copy agent, the device connector set and the proxy. The device layer sees the
// communicator only as this, and names it in failures by `owner`, an opaque handle.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "algorithms/oneshot.h"
#include "algorithms/ring_layout.h"
#include "bootstrap/comm_core.h"
#include "device/copy_agent.h"
#include "device/plan_cache.h"
#include "device/proxy.h"
#include "transport/connector_set.h"

namespace coll {

struct DeviceComm {
  struct ::collComm* owner = nullptr;  // the communicator (failedComm of errors)
  const CommCore* core = nullptr;      // the communicator's rank, bootstrap, abort state, limits
  const RingLayout* ring = nullptr;    // the communicator's ring
  int cudaDev = -1;                    // the CUDA device this rank is bound to; -1: a host-memory rank
  bool emulate = false;                // COLL_DEVICE_EMULATE: every operation takes the device path
  bool timing = false;                 // COLL_DEVICE_TIMING
  size_t slotBytes = 0;                // the device set's slots and slices (COLL_DEVICE_BUFFSIZE / kFifoSlots)
  int64_t channelMinBytes = 0;         // COLL_DEVICE_CHUNK_MIN_BYTES: bytes per channel used
  int channels = 1;                    // the device set's ring channels (COLL_DEVICE_NCHANNELS, shaped)
  int peerLanes = 1;                   // lanes per direction for device send/recv (device_exec.h)
  int laneBudget = 1;                  // the most lanes one device launch may hold
  uint32_t yieldNs = 0;                // lanes give their block up after waiting this long (deviceYieldNs)
  bool planInParams = true;            // COLL_DEVICE_PLAN_PARAMS (device_lane.h DeviceParamPlan)
  std::atomic<uint64_t> reruns{0};     // launches of this rank run again after lanes yielded
  // Allreduces of at least this many bytes take the direct route (algorithms.h
  // buildDirectAllReduce) where every rank shares this process and GPU; SIZE_MAX: never.
  size_t directMinBytes = SIZE_MAX;
  // 2 ranks: allreduces of at most this many bytes exchange their blocks
  // (algorithms/ring.cc); 0: never.
  size_t exchangeBytes = 0;

  // Staging (stage.h): launches of at most stageBytes go through host memory where any
  // rank's lanes yield (0: never), in pinned memory kept for the next; the one-shots'
  // mailboxes and round number (read by the launching thread only), where a peer whose
  // mailbox shows a round beyond a launch's went on to a later operation (proxy.cc); null
  // without staging. Where ranks of several processes share this rank's GPU, the rank
  // that makes their staging copies (copy_agent.h), on the agent and its clients.
  size_t stageBytes = 0;
  std::shared_ptr<void> stageMemory;
  size_t stageMemoryBytes = 0;
  const OneShotState* oneShot = nullptr;
  std::unique_ptr<CopyAgent> copyAgent;

  // The device set (devicePrepare; null for host-memory ranks), and the proxy, made by
  // the first device launch. Declared in this order so the proxy, which follows
  // launches over the set's connectors, goes first.
  std::unique_ptr<ConnectorSet> conns;
  std::unique_ptr<DeviceProxy> proxy;
  // Lowered plans of recent launches (COLL_DEVICE_PLAN_CACHE; null when 0), made with the set.
  std::unique_ptr<DevicePlanCache> plans;
};

}  // namespace coll

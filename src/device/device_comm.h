// What the device path keeps of one communicator (collComm::dev): the communicator's
// identity and limits as the device layer needs them (copied at init, fixed after), the
// device connector set and the proxy. The device layer sees the communicator only as
// this, and names it in failures by `owner`, an opaque handle.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "bootstrap/bootstrap.h"
#include "device/plan_cache.h"
#include "device/proxy.h"
#include "transport/connector_set.h"
#include "transport/shm/mailbox.h"

namespace coll {

class NetBackend;

struct DeviceComm {
  struct ::collComm* owner = nullptr;  // the communicator (failedComm of errors)
  int rank = 0;
  int nranks = 0;
  int cudaDev = -1;      // the CUDA device this rank is bound to; -1: a host-memory rank
  bool emulate = false;  // COLL_DEVICE_EMULATE: every operation takes the device path
  Bootstrap* bootstrap = nullptr;
  NetBackend* net = nullptr;  // the communicator's (collComm::net)
  std::shared_ptr<AbortState> abort;
  const std::atomic<double>* opTimeoutS = nullptr;  // collCommSetTimeout; 0: none
  double stallWarnS = 0;                            // COLL_STALL_WARN_S; 0: no reports
  bool timing = false;                              // COLL_DEVICE_TIMING
  int64_t spinNs = 0;                               // COLL_SPIN_US, for waiters
  size_t slotBytes = 0;
  int ringPrev = 0, ringNext = 0;
  int channels = 1;                 // the device set's ring channels (COLL_DEVICE_NCHANNELS, shaped)
  int peerLanes = 1;                // lanes per direction for device send/recv (device_exec.h)
  int laneBudget = 1;               // the most lanes one device launch may hold
  uint32_t yieldNs = 0;             // lanes give their block up after waiting this long (deviceYieldNs)
  bool planInParams = true;         // COLL_DEVICE_PLAN_PARAMS (device_lane.h DeviceParamPlan)
  std::atomic<uint64_t> reruns{0};  // launches of this rank run again after lanes yielded
  // Where small operations are staged (COLL_DEVICE_STAGE_BYTES), their mailboxes and the
  // comm's last round number (read by the launching thread only): a peer whose mailbox
  // shows a round beyond a launch's went on to a later operation (proxy.cc).
  const Mailboxes* mailboxes = nullptr;
  const uint32_t* mailSeq = nullptr;
  // The device set (devicePrepare; null for host-memory ranks), and the proxy, made by
  // the first device launch. Declared in this order so the proxy, which follows
  // launches over the set's connectors, goes first.
  std::unique_ptr<ConnectorSet> conns;
  std::unique_ptr<DeviceProxy> proxy;
  // Lowered plans of recent launches (COLL_DEVICE_PLAN_CACHE; null when 0), made with the set.
  std::unique_ptr<DevicePlanCache> plans;
};

}  // namespace coll

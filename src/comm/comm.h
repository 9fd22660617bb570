// The communicator: one rank's view of a communicator and everything it owns.
//
// Concurrency: one thread at a time calls operations on a communicator (NCCL's rule).
// `abort` is shared with the bootstrap service thread and may be raised from any thread;
// The registry of live communicators counts API calls in flight so collCommAbort can
// wait for them to leave before freeing. lastError is written only by the thread using the communicator.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/oneshot.h"
#include "algorithms/tuner.h"
#include "algorithms/tuner_plugin.h"
#include "algorithms/ring_layout.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/comm_core.h"
#include "device/device_comm.h"
#include "profiler/profiler.h"
#include "transport/connector.h"
#include "transport/connector_set.h"
#include "transport/shm/mailbox.h"

namespace coll {

// What a communicator was asked for at init (collConfig_t, checked and defaulted by the
// API layer); a split or shrink without a config passes its parent's on.
struct CommOptions {
  bool blocking = true;
  int minChannels = 0;     // 0: COLL_MIN_NCHANNELS
  int maxChannels = 0;     // 0: COLL_MAX_NCHANNELS
  std::string netName;     // empty: COLL_NET
  std::string name;        // commName: printed in the communicator's log lines
  int compress = -1;       // collCompress_t; -1: COLL_COMPRESS
  int deterministic = -1;  // 0 or 1; -1: COLL_DETERMINISTIC
  int timeoutMs = -1;      // operation timeout, 0: none; -1: COLL_TIMEOUT_S
};

// An op made by collRedOpCreatePreMulSum: inputs times the scalar, then summed.
struct PreMulSumOp {
  collDataType_t dtype;
  bool immediate;                // the scalar was read at creation, into `value`
  const void* scalar = nullptr;  // else read from here when each operation runs
  alignas(8) unsigned char value[8] = {};
};

// Host buffers the library copies data into (PreMulSum's scaled inputs, in-place
// alltoall's copies), kept for reuse: a fresh allocation per call of 32 MiB and more is a
// new mmap whose pages fault in and zero on every call (2.4x the time of the operation,
// docs/PERFORMANCE.md). A buffer goes back to the pool when the last operation holding
// it is done; the pool outlives the communicator while any is out.
class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
 public:
  // A buffer of at least `bytes`, returned here when the last copy of the pointer dies.
  std::shared_ptr<char> take(size_t bytes);

 private:
  // Buffers kept: the largest given back (a sweep from small sizes must not fill the
  // pool with small ones); more in use at once are freed after.
  static constexpr size_t kKeep = 2;
  std::mutex mu_;
  std::vector<std::pair<size_t, std::unique_ptr<char[]>>> free_;
};

// A registration (collCommRegister / collCommWindowRegister). Its handle is a number
// never given out twice in the process, so a stale handle is never mistaken for a newer one.
struct Registration {
  const char* base;
  size_t bytes;
  bool window;
  uint64_t ordinal = 0;   // a window's: how many this communicator made before it (one_sided.h)
  uint64_t sharedId = 0;  // a symmetric window every rank mapped: its SharedWindow::id
};
}  // namespace coll

// The communicator in parts: the core (bootstrap/comm_core.h: rank, bootstrap, abort
// state, timeouts), the ring (algorithms/ring_layout.h), the host path's connectors and
// limits, the one-shots' state (algorithms/oneshot.h), the device path (dev:
// device/device_comm.h), then what the API layer keeps (options, registrations, redops).
// The layers below receive the parts they use by reference.
struct collComm : coll::CommCore {
  // The host path: its slots and slices, per-operation limits, connectors.
  size_t slotBytes = 0;
  size_t sliceBytes = 0;
  size_t loopSlices = coll::kFifoSlots / 2;  // slices of a block per ring loop (algorithms/ring.cc), 1..kFifoSlots/2
  int64_t channelMinBytes = 0;
  int minChannels = 1;
  size_t streamMinBytes = 0;  // COLL_STREAM_MIN_BYTES: non-temporal stores from here up
  uint8_t compress = 0;       // Encoding (kernels/compress.h) of fp32 collectives by default
  // The connectors the host executor runs over; the device set (dev.conns) for operations
  // on device buffers: between ranks that share a GPU or reach each other's (p2p) its
  // FIFOs are in device memory, which the host executor cannot touch. Ring channels are
  // connected at init (the device set's for ranks bound to a device, and with
  // COLL_DEVICE_EMULATE), tree edges and send/recv peers on first use. The device set is
  // null for host-memory ranks.
  coll::ConnectorSet hostConns;
  coll::ConnectorSet& conns(bool device) { return device ? *dev.conns : hostConns; }
  coll::RingLayout ring;
  // Double binary trees over hosts with a chain inside each (algorithms/tree.cc): the
  // shape is in the connector sets' trees.
  bool twoTrees = false;                               // the two trees differ (two hosts or more)
  coll::TunerInput tuner;                              // the cost model's inputs and the COLL_ALGO/PROTO filters
  std::unique_ptr<coll::TunerPluginComm> tunerPlugin;  // a tuner plugin's say (null: none)

  // One-shot algorithms for small operations (algorithms/oneshot.h): mailboxes when
  // every rank shares this host, else allreduce over channel 0 up to oneShot.netBytes.
  coll::OneShotState oneShot;

  // The device path (device/device_comm.h): the CUDA device this rank is bound to
  // (dev.cudaDev, -1 for a host-memory rank), emulation, the device connector set, its
  // limits, staging and copy agent, the proxy.
  coll::DeviceComm dev;

  coll::CommOptions options;
  // collInProgress while a non-blocking init runs on initThread, then its result.
  std::atomic<int> initState{collSuccess};
  std::thread initThread;
  std::atomic<bool> revoked{false};    // stopped by collCommRevoke (an intended state, not an error)
  std::atomic<bool> suspended{false};  // between collCommSuspend and collCommResume
  uint64_t shrinks = 0;        // collCommShrink calls: tags their rendezvous (op seq may differ after a failure)
  uint64_t grows = 0;          // collCommGrow calls: their communicators' keys derive from it
  bool growIdPending = false;  // this rank made an id (collCommGetUniqueId) no grow has used yet
  // Collective management calls (split, symmetric windows): tags their bootstrap
  // exchanges. Not the op sequence: a gather takes n+1 numbers on its root, 1 elsewhere.
  uint64_t mgmtSeq = 0;
  std::map<int, coll::PreMulSumOp> redOps;                // by op value
  std::map<uintptr_t, coll::Registration> registrations;  // by handle
  uint64_t windowsMade = 0;
  // One-sided signals (one_sided.h) per (peer, signal index): received and waited for.
  std::map<std::pair<int, int>, int64_t> signalsArrived, signalsTaken;
  std::shared_ptr<coll::ScratchPool> scratch = std::make_shared<coll::ScratchPool>();

  // Collectives issued: every rank numbers a collective alike. A send or receive takes
  // the number of the next collective without taking it (ranks make different numbers
  // of them: a gather's root n, the others one).
  uint64_t seq = 0;
  // The profiler plugin's context for this communicator (profiler/profiler.h; off when none).
  coll::Profiler profiler;
  std::string lastError;
  int liveSlot = -1;         // its slot in the registry of live communicators (comm.cc); -1: none
  std::atomic<int> busy{0};  // calls in flight, where the registry holds it outside its slots
  std::atomic<bool> destroying{false};
};

namespace coll {

// What a one-shot operation of c uses (algorithms/oneshot.h).
inline OneShotContext oneShotContext(collComm* c) {
  return {c->rank,     c->nranks,    &c->ring,
          &c->oneShot, c->slotBytes, c->hostConns.channels.empty() ? nullptr : &c->hostConns.channels[0]};
}

// Creates rank `rank` of the communicator named by id.
// cudaDev: the CUDA device this rank is bound to (-1: a host-memory rank).
Result<collComm*> commInit(const UniqueIdData& id, int nranks, int rank, int cudaDev = -1,
                           const CommOptions& opts = {});
// The same for opts.blocking == false: returns the communicator at once, registered and
// with initState collInProgress; a thread joins the rendezvous and sets initState.
collComm* commInitAsync(const UniqueIdData& id, int nranks, int rank, int cudaDev, const CommOptions& opts);
// Frees the communicator; `clean` tells the root this rank is leaving normally.
void commFree(collComm* comm, bool clean);
Result<collComm*> commSplit(collComm* comm, int color, int key, const CommOptions& opts);
// The ranks of comm not in `exclude`, in order, as a new communicator: called by those
// ranks only, works when excluded ranks are dead or comm is revoked.
Result<collComm*> commShrink(collComm* comm, const std::vector<int>& exclude, const CommOptions& opts);
// An id for growing comm (collCommGetUniqueId): a fresh root in this process, the key
// the communicator's ranks derive alike. One at a time.
Result<UniqueIdData> commGrowId(collComm* comm);
// comm's ranks' side of a grow to nranks: the one rank holding the id (`id`; NULL on the
// others) hands it to the rest, and all join the new communicator with their ranks.
Result<collComm*> commGrow(collComm* comm, int nranks, const UniqueIdData* id, const CommOptions& opts);
// A symmetric window's agreement, collective over comm: every rank passes its window's
// size and whether its own checks passed (`localError` empty); all ranks fail alike,
// naming the first rank that differs or failed. Where every rank is a host-memory
// process of this host, the ranks then map each other's part (transport/shm/shared_mem.h):
// returns the shared window's id (in comm->oneShot.windows), or 0 where not every rank
// could map every part (an INFO line says why).
Result<uint64_t> commAgreeWindow(collComm* comm, const void* buff, size_t bytes, const std::string& localError);

// Registry of live communicators, so the API can refuse destroyed or bogus handles.
void registerComm(collComm* comm);
bool isLiveComm(const collComm* comm);
// Marks an API call in flight on comm; false if comm is not live (or being destroyed).
bool acquireComm(collComm* comm);
void releaseComm(collComm* comm);
// Takes comm out of the registry and waits until no call is in flight on it.
void retireComm(collComm* comm);

}  // namespace coll

// The device path: collectives on CUDA device buffers, ordered on the caller's stream.
//
// A launch builds the same Programs as the host path (ring, tree, chain, send/recv; never
// the one-shot LL protocol, whose mailboxes the host reads), lowers each to a DeviceLane
// (device_lane.h) and hands them to an executor:
//   - CUDA (device/param_kernel.cu): one kernel per device and launch, one block per
//     lane, enqueued on the stream of the launch's first operation; the other streams of
//     the group wait for it with events, as NCCL joins the streams of a group. The call
//     returns once the kernel is enqueued.
//   - host emulation (COLL_DEVICE_EMULATE=1): the same interpreter on one host thread
//     per lane, with host buffers standing in for device buffers. The call returns when
//     the lanes are done. This is how CI, which has no GPU, runs the device executor's
//     code: lowering, the interpreter, the FIFO protocol and the proxy.
// The FIFOs are the transports' own (shm segments, in-process blocks, net staging
// FIFOs), registered with CUDA as mapped host memory so kernels reach them; net
// connectors are moved by the communicator's proxy thread (device/proxy.h).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"
#include "bootstrap/wire.h"
#include "device/device_comm.h"

namespace coll {

// Whether an operation of d's communicator on buffer p takes the device path: p is CUDA
// device memory, or it was made with COLL_DEVICE_EMULATE=1.
bool devicePathFor(const DeviceComm& d, const void* p);

// Ranks among `peers` on the GPU of peers[rank] (one host, the same PCI bus id), itself
// included; oneProcess: only threads of its process. 0 for a rank bound to no GPU.
int ranksOnGpu(const std::vector<PeerInfo>& peers, int rank, bool oneProcess);

// What to warn at init when `sharing` ranks of this process are on one GPU and the
// device runs `queues` kernels of different streams at once: those ranks' kernels wait
// for each other, so called from separate threads (a kernel each) more of them than
// queues can hang. Empty when they fit. (Ranks driven by one thread in a group share one
// kernel and are safe either way.)
std::string hardwareQueueWarning(int sharing, int queues);

// The most lanes (kernel blocks) one launch of c may hold, so that the lanes of every rank
// sharing its GPU are resident together (lanes wait on each other: a block left queued
// behind spinning ones would never run): the GPU's resident blocks divided among those
// ranks. With COLL_DEVICE_EMULATE, COLL_DEVICE_EMULATE_BLOCKS divided among the ranks of
// this process. kUnlimitedLanes where nothing limits them.
constexpr int kUnlimitedLanes = 1 << 20;
int deviceLaneBudget(const std::vector<PeerInfo>& peers, int rank, int cudaDev, bool emulate);

// How long a lane waits for a peer before it gives its kernel block up (device_lane.h
// kDeviceYielded; the proxy then runs the launch again), in nanoseconds; 0: never.
// `requestedUs` is COLL_DEVICE_YIELD_US: >= 0 as given; -1: kAutoYieldUs where the GPU's
// ranks (`onGpu`) include ranks of other processes (more than `inProcess`) and contexts
// are not shared through MPS: the GPU then time-slices the processes' contexts, so a
// kernel waiting for another process's kernel waits for its time slice to end (2.4 ms
// per round trip on an H100). A rank that yields returns from each launch when it is
// done (the proxy relaunches on its stream).
constexpr int kAutoYieldUs = 20;
uint32_t deviceYieldNs(int64_t requestedUs, int onGpu, int inProcess, bool mps);
// That for rank `rank` of `peers` (COLL_DEVICE_YIELD_US, its GPU's ranks, MPS), logged
// when its lanes yield.
uint32_t deviceYieldFor(const std::vector<PeerInfo>& peers, int rank, int cudaDev, bool emulate);

// Channels a rank may ask for (COLL_DEVICE_NCHANNELS); unset, at most kDeviceDefaultChannels.
constexpr int kDeviceMaxChannels = 64;
constexpr int kDeviceDefaultChannels = 32;

// The device set's shape for a lane budget agreed by all ranks: ring channels (at most
// `requested`, leaving room for one send and one receive lane set), and the lanes per
// direction that send/recv operations are spread over (by distance between the ranks,
// so every rank orders them alike and no two lanes wait on each other in a cycle).
struct DeviceShape {
  int channels;
  int peerLanes;
};
DeviceShape deviceShape(int nranks, int budget, int requested);

// One communicator's share of a device launch: its programs, or the plan they were
// lowered to by an earlier launch of the same operations (dev->plans, plan_cache.h).
struct DevicePart {
  DeviceComm* dev;
  const std::vector<OpDesc>* ops;          // its operations, in the order steps name them
  std::vector<Program*> programs;          // empty when `plan` is given
  std::vector<void*> streams;              // distinct cudaStream_t of its operations, in call order
  std::vector<uint64_t> planKey;           // what the programs depend on (empty: the plan is not kept)
  std::shared_ptr<const DevicePlan> plan;  // found under planKey
  uint64_t calledNs = 0;                   // COLL_DEVICE_TIMING (proxy.h wallNs): when the call or group end began
  uint64_t builtNs = 0;                    // and when its programs were built (or its plan found)
};

// Launches the caller must see end before it returns: those whose lanes yield (the proxy
// queues their reruns on the caller's stream). Waited for after the group's host lanes
// have run, which a yielding peer may be waiting for.
struct DeviceWaits {
  std::vector<std::pair<DeviceComm*, std::shared_ptr<PendingLaunch>>> launches;
};

// Lowers and starts every part; with emulation waits for them, else adds the yielding
// ones to *waits. Errors found while lowering (a lane with too many connectors, memory
// that cannot be mapped) return here; errors while running (a peer that disagrees, an
// abort) are the communicators' async errors (collCommGetAsyncError), and with emulation
// and deviceWait also returned.
Status deviceRun(std::vector<DevicePart>& parts, struct ::collComm** failedComm, DeviceWaits* waits);
// Waits for every launch of `waits`; the first error, its communicator in *failedComm.
Status deviceWait(const DeviceWaits& waits, struct ::collComm** failedComm);

// A launch of a one-rank communicator whose operations are all collectives has nothing to
// exchange: each is its input copied to its output (runCopiesOnly), no executor.
bool copiesOnly(const DeviceComm& d, std::span<const OpDesc> ops);
// Those copies: cudaMemcpyAsync device to device on each operation's stream (host memcpy
// under emulation); nothing in place. Avg over one rank is its input, and a PreMulSum op's
// input was scaled into its staged buffer when the op was prepared.
Status runCopiesOnly(const DeviceComm& d, std::span<const OpDesc> ops);

// At init of a rank bound to a CUDA device: its proxy's abort word, its channels' FIFOs
// registered for kernels, and launch memory, all before any kernel runs (page-locking
// memory later, between two ranks' launches, could keep their kernels from running
// together). Nothing for host-memory ranks and for emulation.
Status devicePrepare(DeviceComm& d);

// Waits until the communicator's device work has finished (before host-memory operations
// reuse its connectors, and before it is freed). With `abort`, first tells running
// kernels to give up.
void deviceQuiesce(DeviceComm& d, bool abort);

}  // namespace coll

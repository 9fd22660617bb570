// The engine's events for a profiler plugin (profiler/profiler.h), in NCCL's hierarchy:
//
//   GroupApi (v5: the thread's collGroupStart..End, or one call's implicit group)
//     CollApi / P2pApi (v5: one API call, from its entry to its return)
//     KernelLaunch (v5: a device launch being enqueued)
//   Group (a launch of one communicator's operations: from its start to its end)
//     Coll / P2p (one operation of the launch; parent its API event, parentGroup the Group)
//       KernelCh (a channel's run of the operation: a host lane, or a device launch's channel)
//       ProxyOp (a host lane's slots of the operation toward one peer, one per direction)
//         ProxyStep (one slot: sent once the receiver had room, received once it arrived)
//
// Unlike NCCL, whose Coll events stop once the operation is enqueued for the GPU, ours stop
// when the launch has finished the work: every event stops after its children, except the
// API events of calls inside a group, which stop when the call returns (as NCCL's) while
// their operations run at collGroupEnd.
//
// Every hook costs one check when no plugin wants its events. Each is one line where the
// engine does the work; the RAII ones stop what they started however the scope is left.
#pragma once

#include <span>
#include <vector>

#include "algorithms/plan.h"
#include "profiler/profiler.h"

struct collComm;

namespace coll {

// ---- API events (v5 on), per calling thread ----

// One API call that queues or runs an operation: its CollApi / P2pApi event (op.prof.api),
// under the thread's GroupApi event (started by the group's first call, or for this call
// alone outside a group, where it stops with the call).
class ProfApiCall {
 public:
  ProfApiCall(collComm* c, OpDesc& op, int groupDepth);
  ~ProfApiCall();

 private:
  collComm* c_;
  void* event_ = nullptr;
  bool implicitGroup_ = false;
};

// The outermost collGroupEnd (or collGroupSimulateEnd): marks its start on the thread's
// GroupApi event and stops that event when the group has run.
class ProfGroupEnd {
 public:
  ProfGroupEnd();
  ~ProfGroupEnd();
};

// ---- launch events ----

// How one operation of a launch runs, in NCCL's words.
struct ProfAlgoProto {
  const char* algo;   // "RING", "TREE"
  const char* proto;  // "SIMPLE", "LL"
  int channels;       // channels it runs on
};

// One communicator's share of a launch and its open events.
struct ProfLaunch {
  collComm* comm = nullptr;
  std::vector<OpDesc>* ops = nullptr;
  void* group = nullptr;
  void* kernelLaunch = nullptr;
  std::vector<void*> kernelCh;  // device launches: per operation and channel
};

// The Group event and each operation's Coll / P2p event (ops[i].prof.task), as the
// launch starts running them (algoProtos[i]: how ops[i] runs).
void profLaunchStart(ProfLaunch& pl, std::span<const ProfAlgoProto> algoProtos);
// A device launch being enqueued: its KernelLaunch event, and a KernelCh event per channel
// of each operation; profKernelEnqueued stops the KernelLaunch.
void profKernelStart(ProfLaunch& pl, std::span<const ProfAlgoProto> algoProtos);
void profKernelEnqueued(ProfLaunch& pl);
// The launch ended (done or failed): every event it still has open, children first.
void profLaunchStop(ProfLaunch& pl);

// A one-shot operation run outside any group (group.h enqueue's fast path): its Group and
// Coll events for the scope.
class ProfSoloOneShot {
 public:
  ProfSoloOneShot(collComm* c, OpDesc& op);
  ~ProfSoloOneShot();

 private:
  ProfLaunch pl_;
  std::vector<OpDesc> one_;
};

// ---- host lanes (comm/executor.cc) ----

// A Program becomes a lane: whether it emits KernelCh / ProxyOp / ProxyStep events.
void profLaneBegin(Program& p);
// The executor reached a slice of step s (again, while it waits): opens the operation's
// events on its first slice and the slice's ProxyStep events.
void profSliceReached(Program& p, const Step& s);
// The slice of step s was moved (encodedLen bytes through the connectors); p.cur and p.off
// already point past it. Stops its ProxyStep events, and the operation's lane events
// after its last slice on this lane.
void profSliceDone(Program& p, const Step& s, size_t encodedLen);
// The lane is gone (done or failed): whatever it still has open.
void profLaneEnd(Program& p);

}  // namespace coll

#include "comm/profile.h"

#include <unistd.h>

#include <algorithm>

#include "base/datatype.h"
#include "comm/comm.h"

namespace coll {

using namespace profabi;

namespace {

// The thread's GroupApi event: started by the first call of its outermost group (or of a
// call outside any group), on that call's communicator's profiler.
struct ThreadGroupApi {
  Profiler* prof = nullptr;
  void* event = nullptr;
};
thread_local ThreadGroupApi tlsGroupApi;

// As NCCL, an event starts when its type or any type below it is wanted, so that what
// the plugin wants always has its parents. The types below each:
constexpr uint64_t kLaneTypes = kEvKernelCh | kEvProxyOp | kEvProxyStep | kEvNetPlugin;
constexpr uint64_t kTaskTypes = kEvColl | kEvP2p | kLaneTypes;  // Coll / P2p
constexpr uint64_t kGroupTypes = kEvGroup | kTaskTypes;
constexpr uint64_t kUnderGroupApi = kEvGroupApi | kEvCollApi | kEvP2pApi | kEvKernelLaunch | kGroupTypes;

ProfFunc funcOf(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return ProfFunc::kAllReduce;
    case CollKind::kBroadcast: return ProfFunc::kBroadcast;
    case CollKind::kReduce: return ProfFunc::kReduce;
    case CollKind::kAllGather: return ProfFunc::kAllGather;
    case CollKind::kReduceScatter: return ProfFunc::kReduceScatter;
    case CollKind::kPeerSend: return ProfFunc::kPeerSend;
    case CollKind::kPeerRecv: return ProfFunc::kPeerRecv;
  }
  return ProfFunc::kAllReduce;
}

// The thread's GroupApi event where it belongs to prof's plugin context (a parent
// from another communicator's plugin would mean nothing to this one).
void* groupApiFor(const Profiler& prof) { return tlsGroupApi.prof == &prof ? tlsGroupApi.event : nullptr; }

void* startTask(Profiler& prof, OpDesc& od, void* group, const ProfAlgoProto& r) {
  DescrV6 d{};
  d.parentObj = od.prof.api;
  const auto channels = static_cast<uint8_t>(std::min(r.channels, 255));
  if (isPeerOp(od.kind)) {
    d.type = kEvP2p;
    d.p2p.func = profFuncName(funcOf(od.kind));
    d.p2p.buff = od.kind == CollKind::kPeerSend ? const_cast<void*>(od.sendbuff) : od.recvbuff;
    d.p2p.datatype = profTypeName(od.dtype);
    d.p2p.count = od.count;
    d.p2p.peer = od.root;
    d.p2p.nChannels = channels;
    d.p2p.parentGroup = group;
  } else {
    d.type = kEvColl;
    d.coll.seqNumber = prof.takeSeq(funcOf(od.kind));
    d.coll.func = profFuncName(funcOf(od.kind));
    d.coll.sendBuff = od.sendbuff;
    d.coll.recvBuff = od.recvbuff;
    d.coll.count = od.count;
    d.coll.root = rooted(od.kind) ? od.root : 0;
    d.coll.datatype = profTypeName(od.dtype);
    d.coll.nChannels = channels;
    d.coll.algo = r.algo;
    d.coll.proto = r.proto;
    d.coll.parentGroup = group;
  }
  return prof.wants(kTaskTypes) ? prof.start(d) : nullptr;
}

}  // namespace

ProfApiCall::ProfApiCall(collComm* c, OpDesc& op, int groupDepth) : c_(c) {
  Profiler& prof = c->profiler;
  if (!prof.wants(kUnderGroupApi)) return;
  if (!tlsGroupApi.prof) {
    DescrV6 d{};
    d.type = kEvGroupApi;
    d.groupApi.groupDepth = groupDepth + 1;  // NCCL counts its internal group around every call
    tlsGroupApi = {&prof, prof.start(d)};
    prof.record(tlsGroupApi.event, kStGroupStartApiStop);
    implicitGroup_ = groupDepth == 0;
  }
  if (!prof.wants((isPeerOp(op.kind) ? kEvP2pApi : kEvCollApi) | kTaskTypes)) return;
  DescrV6 d{};
  d.parentObj = groupApiFor(prof);
  if (isPeerOp(op.kind)) {
    d.type = kEvP2pApi;
    d.p2pApi = {profFuncName(funcOf(op.kind)), op.count, profTypeName(op.dtype), op.stream, false};
  } else {
    d.type = kEvCollApi;
    d.collApi = {profFuncName(funcOf(op.kind)), op.count,  profTypeName(op.dtype),
                 rooted(op.kind) ? op.root : 0, op.stream, false};
  }
  event_ = op.prof.api = prof.start(d);
}

ProfApiCall::~ProfApiCall() {
  if (!event_ && !implicitGroup_) return;  // no plugin, or one that took no event
  c_->profiler.stop(event_);
  if (implicitGroup_) {
    tlsGroupApi.prof->stop(tlsGroupApi.event);
    tlsGroupApi = {};
  }
}

ProfGroupEnd::ProfGroupEnd() {
  if (tlsGroupApi.prof) tlsGroupApi.prof->record(tlsGroupApi.event, kStGroupEndApiStart);
}

ProfGroupEnd::~ProfGroupEnd() {
  if (tlsGroupApi.prof) tlsGroupApi.prof->stop(tlsGroupApi.event);
  tlsGroupApi = {};
}

void profLaunchStart(ProfLaunch& pl, std::span<const ProfAlgoProto> algoProtos) {
  Profiler& prof = pl.comm->profiler;
  if (!prof.loaded()) return;
  if (prof.wants(kGroupTypes)) {
    DescrV6 d{};
    d.type = kEvGroup;
    pl.group = prof.start(d);
  }
  for (size_t i = 0; i < pl.ops->size(); ++i) {
    OpDesc& od = (*pl.ops)[i];
    if (isPeerOp(od.kind) && !prof.wants(kTaskTypes)) continue;
    od.prof.task = startTask(prof, od, pl.group, algoProtos[i]);  // collectives take their number even unwatched
  }
}

void profKernelStart(ProfLaunch& pl, std::span<const ProfAlgoProto> algoProtos) {
  Profiler& prof = pl.comm->profiler;
  if (prof.wants(kEvKernelLaunch) && !pl.ops->empty()) {
    DescrV6 d{};
    d.type = kEvKernelLaunch;
    d.parentObj = groupApiFor(prof);
    d.kernelLaunch.stream = pl.ops->front().stream;
    pl.kernelLaunch = prof.start(d);
  }
  if (!prof.wants(kEvKernelCh)) return;
  for (size_t i = 0; i < pl.ops->size(); ++i)
    for (int ch = 0; ch < algoProtos[i].channels; ++ch) {
      DescrV6 d{};
      d.type = kEvKernelCh;
      d.parentObj = (*pl.ops)[i].prof.task;
      d.kernelCh.channelId = static_cast<uint8_t>(ch);
      d.kernelCh.pTimer = profTimerNs();
      pl.kernelCh.push_back(prof.start(d));
    }
}

void profKernelEnqueued(ProfLaunch& pl) {
  if (!pl.kernelLaunch) return;
  pl.comm->profiler.stop(pl.kernelLaunch);
  pl.kernelLaunch = nullptr;
}

void profLaunchStop(ProfLaunch& pl) {
  Profiler& prof = pl.comm->profiler;
  profKernelEnqueued(pl);
  for (void* ev : pl.kernelCh) {
    StateArgsV4 args{};
    args.kernelCh.pTimer = profTimerNs();
    prof.record(ev, kStKernelChStop, args);
    prof.stop(ev);
  }
  pl.kernelCh.clear();
  if (pl.ops)
    for (OpDesc& od : *pl.ops) {
      prof.stop(od.prof.task);
      od.prof.task = nullptr;
    }
  prof.stop(pl.group);
  pl.group = nullptr;
}

ProfSoloOneShot::ProfSoloOneShot(collComm* c, OpDesc& op) {
  if (!c->profiler.loaded()) return;
  pl_.comm = c;
  one_.push_back(op);
  pl_.ops = &one_;
  const ProfAlgoProto algoProto{"RING", "LL", 1};
  profLaunchStart(pl_, {&algoProto, 1});
}

ProfSoloOneShot::~ProfSoloOneShot() {
  if (pl_.comm) profLaunchStop(pl_);
}

// ---- lanes ----

namespace {

// Slices of the operation at step `from` on p in one direction (send or receive), and
// the peer they go to or come from.
int slicesOf(const Program& p, size_t from, bool send, int* peer) {
  int n = 0;
  const uint16_t op = p.steps[from].op;
  for (size_t i = from; i < p.steps.size() && p.steps[i].op == op; ++i) {
    const Step& s = p.steps[i];
    if (send ? !s.send : !s.recv) continue;
    if (*peer < 0) *peer = send ? s.send->peer() : s.recv->peer();
    const size_t slice = p.sliceFor(s);
    n += static_cast<int>(slice ? (s.bytes + slice - 1) / slice : 1);
  }
  return n;
}

void openOp(Program& p, const Step& s) {
  Profiler& prof = p.comm->profiler;
  ProfLaneEvents& e = p.prof;
  e.op = s.op;
  void* task = (*p.ops)[s.op].prof.task;
  if (prof.wants(kEvKernelCh)) {
    DescrV6 d{};
    d.type = kEvKernelCh;
    d.parentObj = task;
    d.kernelCh.channelId = static_cast<uint8_t>(p.channel);
    d.kernelCh.pTimer = profTimerNs();
    e.kernelCh = prof.start(d);
  }
  if (!prof.wants(kEvProxyOp | kEvProxyStep | kEvNetPlugin)) return;
  for (int dir = 0; dir < 2; ++dir) {
    int peer = -1;
    const int n = slicesOf(p, p.cur, dir == 0, &peer);
    if (n == 0) continue;
    DescrV6 d{};
    d.type = kEvProxyOp;
    d.parentObj = task;
    d.proxyOp = {getpid(), static_cast<uint8_t>(p.channel), peer, n, static_cast<int>(p.sliceBytes), dir == 0};
    e.proxyOp[dir] = prof.start(d);
    e.steps[dir] = 0;
  }
}

void closeOp(Program& p) {
  Profiler& prof = p.comm->profiler;
  ProfLaneEvents& e = p.prof;
  for (int dir = 0; dir < 2; ++dir) {
    prof.stop(e.step[dir]);
    prof.stop(e.proxyOp[dir]);
    e.step[dir] = e.proxyOp[dir] = nullptr;
  }
  if (e.kernelCh) {
    StateArgsV4 args{};
    args.kernelCh.pTimer = profTimerNs();
    prof.record(e.kernelCh, kStKernelChStop, args);
    prof.stop(e.kernelCh);
    e.kernelCh = nullptr;
  }
  e.op = -1;
}

void openStep(Program& p, int dir) {
  Profiler& prof = p.comm->profiler;
  ProfLaneEvents& e = p.prof;
  if (e.step[dir] || !e.proxyOp[dir] || !prof.wants(kEvProxyStep | kEvNetPlugin)) return;
  DescrV6 d{};
  d.type = kEvProxyStep;
  d.parentObj = e.proxyOp[dir];
  d.proxyStep.step = e.steps[dir]++;
  e.step[dir] = prof.start(d);
  prof.record(e.step[dir], dir == 0 ? kStProxyStepSendPeerWait : kStProxyStepRecvWait);
}

}  // namespace

void profLaneBegin(Program& p) { p.prof.on = p.comm && p.ops && p.comm->profiler.wants(kLaneTypes); }

void profSliceReached(Program& p, const Step& s) {
  if (p.prof.op != s.op) {
    if (p.prof.op >= 0) closeOp(p);
    openOp(p, s);
  }
  if (s.send) openStep(p, 0);
  if (s.recv) openStep(p, 1);
}

void profSliceDone(Program& p, const Step& s, size_t encodedLen) {
  Profiler& prof = p.comm->profiler;
  ProfLaneEvents& e = p.prof;
  StateArgsV4 args{};
  args.proxyStep.transSize = encodedLen;
  if (s.recv && e.step[1]) {
    prof.record(e.step[1], kStProxyStepRecvGpuWait, args);
    prof.stop(e.step[1]);
    e.step[1] = nullptr;
  }
  if (s.send && e.step[0]) {
    prof.record(e.step[0], kStProxyStepSendWait, args);
    prof.stop(e.step[0]);
    e.step[0] = nullptr;
  }
  if (p.off == 0 && (p.cur == p.steps.size() || p.steps[p.cur].op != s.op)) closeOp(p);
}

void profLaneEnd(Program& p) {
  if (p.prof.on && p.prof.op >= 0) closeOp(p);
}

}  // namespace coll

#include "comm/group.h"

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "algorithms/oneshot.h"
#include "base/log.h"
#include "comm/executor.h"
#include "comm/launch.h"
#include "comm/profile.h"
#include "comm/watch.h"
#include "device/device_exec.h"
#include "device/proxy.h"  // wallNs
#include "kernels/compress.h"
#include "transport/transport.h"

namespace coll {

namespace {

struct Queued {
  collComm* comm;
  OpDesc op;
};

thread_local int tlsDepth = 0;
thread_local std::vector<Queued> tlsQueue;
thread_local std::vector<collComm*> tlsInits;  // groupDeferInit
struct Deferred {
  std::thread thread;
  Status result;
  std::function<void()> publish;
};
thread_local std::vector<std::unique_ptr<Deferred>> tlsDeferred;  // groupDefer
thread_local Status tlsGroupError;                                // groupNoteError

// Waits for the inits and management calls made inside the group; the first failure is
// the group's.
Status finishDeferred(collComm** failedComm) {
  std::vector<collComm*> inits;
  inits.swap(tlsInits);
  std::vector<std::unique_ptr<Deferred>> jobs;
  jobs.swap(tlsDeferred);
  Status first;
  for (collComm* c : inits) {
    // Held while joined: a destroy or abort meanwhile (from any thread) waits for us.
    if (!acquireComm(c)) {
      if (first.ok())
        first = invalidUsage("a communicator initialized in this group was destroyed before collGroupEnd");
      continue;
    }
    if (c->initThread.joinable()) c->initThread.join();
    if (c->initState.load() != collSuccess && first.ok()) {
      *failedComm = c;
      first = c->abort->status();
    }
    releaseComm(c);
  }
  for (auto& j : jobs) {
    j->thread.join();
    if (j->result.ok()) j->publish();
    else if (first.ok()) first = j->result;
  }
  return first;
}

// Drops what the group queued, giving back the sequence numbers it took.
void dropQueue() {
  std::vector<Queued> queue;
  queue.swap(tlsQueue);
  for (const Queued& q : queue)
    if (!isPeerOp(q.op.kind)) --q.comm->seq;
}

// The choice for od among what `tuner` allows: ours (tuner.h), or a tuner plugin's, which
// may also set od's channels (unless its call set them) and chunk size.
Result<Choice> choose(collComm* c, const TunerInput& tuner, OpDesc& od, size_t bytes, bool oneShot, int groupOps) {
  if (!c->tunerPlugin) return tunerChoose(tuner, od.kind, bytes, oneShot ? 1 : 0);
  const int maxChannels = static_cast<int>(c->conns(od.device).channels.size());
  const size_t slice = od.device ? c->dev.slotBytes : c->sliceBytes;
  COLL_ASSIGN(TunerPluginComm::Decision d,
              c->tunerPlugin->decide(tuner, od.kind, bytes, oneShot ? 1 : 0, groupOps, maxChannels, slice));
  if (d.channels > 0 && od.minChannels == 0 && od.maxChannels == 0) od.minChannels = od.maxChannels = d.channels;
  od.chunkBytes = d.chunkBytes;
  COLL_INFO(TUNING, "rank %d: tuner plugin %s: %s -> %s/%s, %d channel(s), chunk %zu bytes", c->rank,
            c->tunerPlugin->name(), od.describe().c_str(), algoName(d.choice.algo), protoName(d.choice.proto),
            d.channels, d.chunkBytes);
  return d.choice;
}

// Which algorithm serves od: the one-shot protocol ("LL" to COLL_PROTO) wherever it
// applies and the filters allow it, else the tuner's choice between ring and tree (tuner.h);
// a tuner plugin has its say (tuner_plugin.h). Every input is shared by all ranks
// (checked at init), so all ranks choose alike.
// Device operations never take the one-shot: its mailboxes and staging are host memory;
// large device allreduces of ranks sharing a process and GPU take the direct route.
Result<Route> routeFor(collComm* c, OpDesc& od, int groupOps) {
  if (isPeerOp(od.kind) || c->nranks == 1) return Route::kRing;
  const bool oneShot = !od.device && oneShotEligible(oneShotContext(c), od);
  const size_t bytes = od.spanBytes(c->nranks);
  // A call's own algorithm filter (a per-call config) narrows the communicator's.
  const bool callFilter = od.algos != ~AllowMask{0};
  TunerInput filtered;
  if (callFilter) {
    filtered = c->tuner;
    filtered.algos &= od.algos;
  }
  const TunerInput& tuner = callFilter ? filtered : c->tuner;
  // Its bits are the ring's: where COLL_ALGO rules the ring out, so is it.
  if (od.device && od.kind == CollKind::kAllReduce && od.encoding == kEncodingNone && bytes >= c->dev.directMinBytes &&
      allowed(tuner.algos, od.kind, static_cast<int>(Algo::kRing)))
    return Route::kDirectAllReduce;
  Result<Choice> chosen = choose(c, tuner, od, bytes, oneShot, groupOps);
  if (!chosen.ok() && callFilter) {
    if (od.forceAlgos)
      return invalidArgument("its config's algSelection leaves no algorithm this operation runs on "
                             "(with forceAlgSelection 0 the automatic choice would stand)");
    chosen = choose(c, c->tuner, od, bytes, oneShot, groupOps);
  }
  COLL_ASSIGN(Choice ch, std::move(chosen));
  COLL_INFO(TUNING, "rank %d: %s -> %s/%s, predicted %.1f us", c->rank, od.describe().c_str(), algoName(ch.algo),
            protoName(ch.proto), ch.us);
  if (ch.proto == Proto::kOneShot) return Route::kOneShot;
  return ch.algo == Algo::kTree ? Route::kTree : Route::kRing;
}

// True when the one-shot fast path may skip the tuner: nothing filters the one-shot out
// (the model prefers it wherever it applies; tests/test_tuner.cc checks that) and no
// tuner plugin has a say.
bool oneShotUnfiltered(const collComm* c, const OpDesc& od) {
  return !c->tunerPlugin && allowed(c->tuner.algos & od.algos, od.kind, static_cast<int>(Algo::kRing)) &&
         allowed(c->tuner.protos, od.kind, static_cast<int>(Proto::kOneShot));
}

// Adds this rank's tree edges of every channel to a connection job (kTagTree, one tag
// per tree and channel, shared by both directions of an edge). The device set's trees
// take their shape from the host's.
void connectTrees(ConnectJob* job, collComm* c, bool device) {
  const int ntrees = c->twoTrees ? 2 : 1;
  auto& trees = c->conns(device).trees;
  if (device) {
    const auto& shape = c->hostConns.trees;
    trees.resize(shape.size());
    for (size_t ch = 0; ch < shape.size(); ++ch)
      for (size_t t = 0; t < 2; ++t) {
        trees[ch][t].parent = shape[ch][t].parent;
        trees[ch][t].children = shape[ch][t].children;
      }
  }
  for (size_t ch = 0; ch < trees.size(); ++ch)
    for (int t = 0; t < ntrees; ++t) {
      ConnectorSet::TreeEdges& e = trees[ch][static_cast<size_t>(t)];
      const uint64_t tag = (device ? kTagDevice : 0) | kTagTree | (static_cast<uint64_t>(t) << 8) | ch;
      if (e.parent >= 0) {
        job->addRecv(e.parent, tag, &e.down);
        job->addSend(e.parent, tag, &e.up);
      }
      e.fromChild.resize(e.children.size());
      e.toChild.resize(e.children.size());
      for (size_t j = 0; j < e.children.size(); ++j) {
        job->addRecv(e.children[j], tag, &e.fromChild[j]);
        job->addSend(e.children[j], tag, &e.toChild[j]);
      }
    }
}

// Keeps every communicator of a launch "in use" so collCommAbort from another thread
// waits for the launch to return before freeing it.
class LaunchGuard {
 public:
  ~LaunchGuard() {
    for (collComm* c : held_) releaseComm(c);
  }
  bool hold(collComm* c) {
    if (!acquireComm(c)) return false;
    held_.push_back(c);
    return true;
  }

 private:
  std::vector<collComm*> held_;
};

// A failed status with context in front; an ok one as it is.
Status prefixed(Status st, const std::string& context) {
  if (!st.ok()) st.prefix(context);
  return st;
}

// Collect: one launch per communicator, operations in call order; a communicator's
// operations are all on device buffers or all on host buffers.
Status collect(std::vector<Queued>& queue, Launches& launches, collComm** failedComm) {
  std::map<collComm*, CommLaunch*> byComm;
  for (auto& q : queue) {
    auto it = byComm.find(q.comm);
    if (it == byComm.end()) {
      launches.push_back(std::make_unique<CommLaunch>());
      launches.back()->comm = q.comm;
      it = byComm.emplace(q.comm, launches.back().get()).first;
    }
    CommLaunch& l = *it->second;
    if (l.ops.size() >= 65535) return invalidUsage("more than 65535 operations in one group on one communicator");
    // Operations with data decide the kind; empty ones (no buffers checked) follow.
    if (q.op.count > 0) {
      auto other = std::find_if(l.ops.begin(), l.ops.end(),
                                [&](const OpDesc& o) { return o.count > 0 && o.device != q.op.device; });
      if (other != l.ops.end()) {
        const OpDesc& d = q.op.device ? q.op : *other;
        const OpDesc& h = q.op.device ? *other : q.op;
        return failOn(q.comm,
                      invalidUsage("rank " + std::to_string(q.comm->rank) + ": " + d.describe() +
                                   " on device buffers and " + h.describe() +
                                   " on host buffers in one group on one communicator; group them "
                                   "separately"),
                      failedComm);
      }
      l.device = q.op.device;
    }
    l.ops.push_back(q.op);
  }
  return okStatus();
}

// Admit: every communicator held for the launch, usable, able to run what it was given;
// the work due when operations run (PreMulSum scaling) done.
Status admit(Launches& launches, LaunchGuard& guard, collComm** failedComm) {
  for (auto& l : launches) {
    collComm* c = l->comm;
    if (!guard.hold(c)) return invalidUsage("a communicator queued in this group was destroyed before collGroupEnd");
    for (const OpDesc& od : l->ops)
      if (od.prepare) COLL_RETURN_IF_FAILED(failOn(c, prefixed((*od.prepare)(), od.describe() + ": "), failedComm));
    if (l->device && !c->dev.conns)
      return failOn(c,
                    invalidUsage("rank " + std::to_string(c->rank) +
                                 " was given CUDA device buffers but is not bound to a CUDA device (create it "
                                 "with collCommInitRank after cudaSetDevice, or collCommInitAll with a devlist)"),
                    failedComm);
    if (c->abort->raised()) return failOn(c, watchUnusable(c), failedComm);
  }
  return okStatus();
}

// Route: every operation's algorithm (the same on every rank).
Status route(Launches& launches, collComm** failedComm) {
  for (auto& l : launches)
    for (OpDesc& od : l->ops) {
      Result<Route> r = routeFor(l->comm, od, static_cast<int>(l->ops.size()));
      if (!r.ok()) return failOn(l->comm, r.takeStatus().prefix(od.describe() + ": "), failedComm);
      l->routes.push_back(r.value());
      l->connectsTrees |= r.value() == Route::kTree && !l->comm->conns(l->device).treesConnected;
    }
  return okStatus();
}

// The connection job of one launch: its missing tree edges and send/recv peers; null
// when none is missing (the usual case once a communicator has run its first operations:
// no job is made for nothing).
std::unique_ptr<ConnectJob> connectJobFor(CommLaunch& l) {
  collComm* c = l.comm;
  ConnectorSet& conns = c->conns(l.device);
  std::set<int> wantSend, wantRecv;
  for (auto& od : l.ops) {
    if (od.root == c->rank || od.count == 0) continue;
    if (od.kind == CollKind::kPeerSend && !conns.peerSend.count(od.root)) wantSend.insert(od.root);
    if (od.kind == CollKind::kPeerRecv && !conns.peerRecv.count(od.root)) wantRecv.insert(od.root);
  }
  if (!l.connectsTrees && wantSend.empty() && wantRecv.empty()) return nullptr;
  auto job = std::make_unique<ConnectJob>(c->bootstrap.get(), l.device ? c->dev.slotBytes : c->slotBytes, l.device,
                                          c->dev.emulate, c->net);
  if (l.connectsTrees) connectTrees(job.get(), c, l.device);
  const uint64_t p2pTag = (l.device ? kTagDevice : 0) | kTagP2p;
  for (int p : wantRecv) job->addRecv(p, p2pTag, &conns.peerRecv[p]);
  for (int p : wantSend) job->addSend(p, p2pTag, &conns.peerSend[p]);
  return job;
}

// The missing connectors of every launch, connected, phase by phase across communicators (one
// thread may connect several ranks of this process: transport.h).
Status connectMissing(Launches& launches, collComm** failedComm) {
  std::vector<std::unique_ptr<ConnectJob>> jobs;
  for (auto& l : launches) jobs.push_back(connectJobFor(*l));
  for (Status (ConnectJob::*phase)() : {&ConnectJob::phase1, &ConnectJob::phase2, &ConnectJob::phase3})
    for (size_t i = 0; i < jobs.size(); ++i)
      if (jobs[i]) COLL_RETURN_IF_FAILED(failOn(launches[i]->comm, ((*jobs[i]).*phase)(), failedComm));
  for (auto& l : launches)
    if (l->connectsTrees) l->comm->conns(l->device).treesConnected = true;
  return okStatus();
}

// Stops the launches' profiler events however the launch ends.
struct ProfStops {
  Launches& launches;
  ~ProfStops() {
    for (auto& l : launches)
      if (l->prof.comm) profLaunchStop(l->prof);
  }
};

// Build and run: every launch's programs, device parts to their executor, host programs
// to the host executor.
Status buildAndRun(Launches& launches, uint64_t calledNs, collComm** failedComm) {
  ProfStops profStops{launches};
  std::vector<std::unique_ptr<Lane>> hosts;
  std::vector<DevicePart> deviceParts;
  for (auto& l : launches) {
    if (l->device && copiesOnly(l->comm->dev, l->ops)) {
      profStart(*l);
      COLL_RETURN_IF_FAILED(failOn(l->comm, runCopiesOnly(l->comm->dev, l->ops), failedComm));
      continue;
    }
    if (l->device) {
      COLL_RETURN_IF_FAILED(failOn(l->comm, devicePart(*l, calledNs, &deviceParts), failedComm));
      profStart(*l, deviceParts.back().plan.get());
      continue;
    }
    COLL_RETURN_IF_FAILED(failOn(l->comm, buildHostPrograms(*l), failedComm));
    std::vector<Program*> mine;
    COLL_RETURN_IF_FAILED(failOn(l->comm, lanesOf(*l, &mine), failedComm));
    profStart(*l);
    // Host operations reuse the connectors: device work queued before them ends first.
    deviceQuiesce(l->comm->dev, false);
    hostLanes(*l, mine, &hosts);
  }
  // Device launches whose lanes yield are waited for after the host lanes: a peer's
  // yielding lanes may need what this rank's host lanes move first.
  DeviceWaits waits;
  Status st = deviceRun(deviceParts, failedComm, &waits);
  for (auto& l : launches) profKernelEnqueued(l->prof);
  std::vector<Lane*> lanes;
  for (auto& h : hosts) lanes.push_back(h.get());
  if (st.ok()) st = runLanes(lanes, failedComm);
  collComm* waitFailed = nullptr;
  Status w = deviceWait(waits, &waitFailed);
  if (st.ok() && !w.ok()) *failedComm = waitFailed;
  return st.ok() ? w : st;
}

// A group's (or one call's) operations: collect, admit, route, connect, build and run.
Status launch(std::vector<Queued>& queue, collComm** failedComm) {
  const uint64_t called = wallNs();  // COLL_DEVICE_TIMING's start
  LaunchGuard guard;
  Launches launches;
  COLL_RETURN_IF_FAILED(collect(queue, launches, failedComm));
  COLL_RETURN_IF_FAILED(admit(launches, guard, failedComm));
  COLL_RETURN_IF_FAILED(stage(launches, failedComm));
  // A launch the tuner cannot route fails on its own settings: not a matter for the
  // other ranks, so it is watched (comm/watch.h) from the connecting on.
  COLL_RETURN_IF_FAILED(route(launches, failedComm));
  for (auto& l : launches)
    if (!l->splitOff) watchStarted(l->comm, l->ops.front(), l->ops.size());
  Status st = connectMissing(launches, failedComm);
  if (st.ok()) st = buildAndRun(launches, called, failedComm);
  if (st.ok()) st = unstage(launches, failedComm);
  for (auto& l : launches)
    if (!l->splitOff && (st.ok() || l->comm != *failedComm)) watchFinished(l->comm);
  if (!st.ok() && *failedComm) st = watchFailed(*failedComm, std::move(st));
  return st;
}

}  // namespace

bool inGroup() { return tlsDepth > 0; }

Status groupStart() {
  ++tlsDepth;
  return okStatus();
}

Status groupEnd(collComm** failedComm) {
  if (tlsDepth == 0) return invalidUsage("collGroupEnd called without a matching collGroupStart");
  if (--tlsDepth > 0) return okStatus();
  ProfGroupEnd profEnd;
  Status deferred = finishDeferred(failedComm);
  if (!tlsGroupError.ok() || !deferred.ok()) {
    Status st = !tlsGroupError.ok() ? std::move(tlsGroupError) : std::move(deferred);
    tlsGroupError = Status();
    dropQueue();
    return st.prefix("a call inside the group failed, so nothing in it ran: ");
  }
  std::vector<Queued> queue;
  queue.swap(tlsQueue);
  if (queue.empty()) return okStatus();
  return launch(queue, failedComm);
}

void groupDeferInit(collComm* comm) { tlsInits.push_back(comm); }

void groupDefer(std::function<Status()> work, std::function<void()> publish) {
  auto job = std::make_unique<Deferred>();
  Deferred* j = job.get();
  j->publish = std::move(publish);
  j->thread = std::thread([j, w = std::move(work)] { j->result = w(); });
  tlsDeferred.push_back(std::move(job));
}

void groupNoteError(const Status& st) {
  if (tlsDepth > 0 && tlsGroupError.ok()) tlsGroupError = st;
}

namespace {

// The cost model's time for one queued operation (send/recv: one hop and its bytes).
Result<double> predictUs(collComm* c, const OpDesc& od) {
  const TunerInput& t = c->tuner;
  const size_t bytes = od.spanBytes(c->nranks);
  if (isPeerOp(od.kind)) {
    if (od.root == c->rank) return bytes / (t.bwGBs * 1e3);
    return (t.overNet ? t.netHopUs : t.hopUs) + bytes / ((t.overNet ? t.netBwGBs : t.bwGBs) * 1e3);
  }
  if (c->nranks == 1) return 0.0;
  const bool oneShot = !od.device && oneShotEligible(oneShotContext(c), od);
  COLL_ASSIGN(Choice ch, tunerChoose(t, od.kind, bytes, oneShot ? 1 : 0));
  return ch.us;
}

}  // namespace

Status groupSimulateEnd(double* us) {
  if (tlsDepth == 0) return invalidUsage("collGroupSimulateEnd called without a matching collGroupStart");
  std::map<collComm*, double> perComm;
  Status st;
  for (const Queued& q : tlsQueue) {
    if (!acquireComm(q.comm)) {
      st = invalidUsage("a communicator queued in this group was destroyed before collGroupSimulateEnd");
      break;
    }
    Result<double> t = predictUs(q.comm, q.op);
    releaseComm(q.comm);
    if (!t.ok()) {
      st = t.takeStatus().prefix(q.op.describe() + ": ");
      break;
    }
    perComm[q.comm] += t.value();
  }
  *us = 0;
  for (const auto& [c, t] : perComm) *us = std::max(*us, t);
  if (--tlsDepth > 0) return st;
  ProfGroupEnd profEnd;
  collComm* failed = nullptr;
  Status deferred = finishDeferred(&failed);
  tlsGroupError = Status();
  // Nothing ran: the next operations take the sequence numbers these took, as on ranks
  // that never simulated.
  dropQueue();
  return st.ok() ? deferred : st;
}

Status enqueue(collComm* comm, OpDesc&& op, collComm** failedComm) {
  op.seq = isPeerOp(op.kind) ? comm->seq : comm->seq++;
  ProfApiCall profApi(comm, op, tlsDepth);
  if (tlsDepth > 0) {
    tlsQueue.push_back({comm, std::move(op)});
    return okStatus();
  }
  const OneShotContext ctx = oneShotContext(comm);
  if (!op.device && oneShotEligible(ctx, op) && oneShotUnfiltered(comm, op)) {
    if (comm->abort->raised()) {
      *failedComm = comm;
      return watchUnusable(comm);
    }
    deviceQuiesce(comm->dev, false);
    Status st = op.prepare ? (*op.prepare)() : okStatus();
    if (!st.ok()) {
      *failedComm = comm;
      return st;
    }
    watchStarted(comm, op, 1);
    ProfSoloOneShot profSolo(comm, op);
    st = runOneShot(comm, ctx, op, failedComm);
    if (st.ok()) watchFinished(comm);
    return st.ok() ? st : watchFailed(comm, std::move(st));
  }
  std::vector<Queued> one{{comm, std::move(op)}};
  return launch(one, failedComm);
}

}  // namespace coll

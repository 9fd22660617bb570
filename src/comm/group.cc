#include "comm/group.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <thread>

#include "algorithms/algorithms.h"
#include "algorithms/oneshot.h"
#include "base/datatype.h"
#include "kernels/compress.h"
#include "comm/executor.h"
#include "comm/profile.h"
#include "comm/watch.h"
#include "base/log.h"
#include "comm/stage.h"
#include "device/device_lane.h"
#include "device/device_exec.h"
#include "device/plan_cache.h"
#include "device/proxy.h"  // wallNs
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

enum class Route : uint8_t { kOneShot, kRing, kTree, kDirectAllReduce };

// The choice for od among what `tuner` allows: ours (tuner.h), or a tuner plugin's, which
// may also set od's channels (unless its call set them) and chunk size.
Result<Choice> choose(collComm* c, const TunerInput& tuner, OpDesc& od, size_t bytes, bool oneShot, int groupOps) {
  if (!c->tunerPlugin) return tunerChoose(tuner, od.kind, bytes, oneShot ? 1 : 0);
  const int maxChannels = static_cast<int>(c->conns(od.device).channels.size());
  const size_t slice = od.device ? c->deviceSlotBytes : c->sliceBytes;
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
  if (od.device && od.kind == CollKind::kAllReduce && od.encoding == kEncodingNone &&
      bytes >= c->deviceDirectMinBytes && allowed(tuner.algos, od.kind, static_cast<int>(Algo::kRing)))
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
// (the model prefers it wherever it applies; tests/test_topology.cc checks that) and no
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

// Everything one communicator runs in one launch.
struct CommLaunch {
  collComm* comm;
  bool device = false;  // its operations are on device buffers (all of them: checked)
  std::vector<OpDesc> ops;
  std::vector<Route> routes;  // per op
  bool connectsTrees = false;
  std::vector<Program> channels;
  // Host launches with one-shot operations: what channel 0 runs before its current
  // program, in call order (a one-shot shares channel 0's connectors and the mailboxes
  // with the ring operations around it).
  struct Segment {
    std::unique_ptr<Program> program;  // ring steps before a one-shot
    std::shared_ptr<OneShot> oneShot;
  };
  std::vector<Segment> channel0Before;
  // Host: one program per peer. Device: per lane, peers spread by distance (peerLane).
  std::map<int, Program> sends, recvs;
  Program self;                      // send/recv to oneself
  std::unique_ptr<Staging> staging;  // a device launch run from host memory (comm/stage.h)
  bool splitOff = false;             // its staged operations, split from the comm's device launch
  ProfLaunch prof;                   // its profiler events (comm/profile.h)
};

// What the algorithm builders read of c, over the connector set `conns`.
BuildInput buildInput(const collComm* c, const ConnectorSet& conns) {
  BuildInput in;
  in.nranks = c->nranks;
  in.ringPos = c->ringPos;
  in.ring = c->ring;
  in.ringPosOf = c->ringPosOf;
  const bool host = &conns == &c->hostConns;
  in.sliceBytes = host ? c->sliceBytes : c->deviceSlotBytes;
  in.loopSlices = c->loopSlices;
  in.channelMinBytes = host ? c->channelMinBytes : c->deviceChannelMinBytes;
  in.exchangeMaxBytes = host ? 0 : c->deviceExchangeBytes;
  in.minChannels = c->minChannels;
  in.twoTrees = c->twoTrees;
  in.conns = &conns;
  return in;
}

void initProgram(Program& p, CommLaunch& l, std::string lane) {
  p.lane = std::move(lane);
  p.ops = &l.ops;
  p.comm = l.comm;
  p.sliceBytes = l.device ? l.comm->deviceSlotBytes : l.comm->sliceBytes;
  p.streamMinBytes = l.comm->streamMinBytes;
  p.nranks = l.comm->nranks;
  p.rank = l.comm->rank;
}

Status buildSelfCopies(CommLaunch& l) {
  std::vector<size_t> sends, recvs;
  for (size_t i = 0; i < l.ops.size(); ++i) {
    const OpDesc& od = l.ops[i];
    if (od.root != l.comm->rank) continue;
    if (od.kind == CollKind::kPeerSend) sends.push_back(i);
    if (od.kind == CollKind::kPeerRecv) recvs.push_back(i);
  }
  if (sends.size() != recvs.size())
    return invalidUsage("rank " + std::to_string(l.comm->rank) + " posted " + std::to_string(sends.size()) +
                        " send(s) to itself but " + std::to_string(recvs.size()) +
                        " receive(s) from itself in one group; they must pair up");
  for (size_t k = 0; k < sends.size(); ++k) {
    const OpDesc& s = l.ops[sends[k]];
    const OpDesc& r = l.ops[recvs[k]];
    const size_t sb = s.bytes(), rb = r.bytes();
    if (sb != rb)
      return invalidUsage("rank " + std::to_string(l.comm->rank) + ": " + s.describe() + " to itself pairs with " +
                          r.describe() + " of a different size");
    l.self.add(kSrc | kDst, s, static_cast<uint16_t>(sends[k]), static_cast<const char*>(s.sendbuff),
               static_cast<char*>(r.recvbuff), sb, nullptr, nullptr);
  }
  return okStatus();
}

// Distance from the sender to the receiver along the ring of ranks: the same number on
// both ends of a send/recv pair.
int peerDistance(const collComm* c, const OpDesc& od) {
  const int from = od.kind == CollKind::kPeerSend ? c->rank : od.root;
  const int to = od.kind == CollKind::kPeerSend ? od.root : c->rank;
  return (to - from + c->nranks) % c->nranks;
}

// Device send/recv lanes. A device lane runs its steps in order and blocks, and only so
// many fit on the GPU (device_exec.h), so a rank's sends share devicePeerLanes lanes (its
// receives as many more): the pair at distance d goes to lane d % lanes on both ends,
// and every lane takes its peers by increasing distance. The lowest distance any lane
// waits at can always progress (its partner lane is at that distance too, or done with
// the ones below), so the lanes of all ranks never wait on each other in a cycle.
int peerLane(const collComm* c, const OpDesc& od) { return peerDistance(c, od) % c->dev.peerLanes; }

// A one-shot operation runs on channel 0 in call order with the ring operations (the
// ring one-shot shares channel 0's connectors; two ranks over net: the LL connection,
// comm.h): the steps so far become a segment of their own, then the one-shot, and channel
// 0 starts a new program. Numbered now (its mailbox rounds), in call order.
void cutChannel0(CommLaunch& l, std::shared_ptr<OneShot> os) {
  Program& ch0 = l.channels[0];
  if (!ch0.steps.empty()) {
    l.channel0Before.push_back({std::make_unique<Program>(std::move(ch0)), nullptr});
    ch0 = Program();
    initProgram(ch0, l, "channel 0");
  }
  l.channel0Before.push_back({nullptr, std::move(os)});
}

// Device launches: a channel an operation leaves empty carries a token each way; a
// channel that carries nothing else in the launch (small operations on a GPU's 32
// channels: 31 of them) would take a lane, a thread block with its plan, for that
// alone. Such channels' tokens run in one lane per kDeviceMaxConns / 2 channels instead:
// per operation, the token sent on each of them, then the one received on each. Every
// channel's steps stay in one lane in operation order, and no receive comes before the
// sends that a peer doing the same waits for.
void mergeTokenLanes(CommLaunch& l) {
  auto tokensOnly = [](const Program& p) {
    return !p.steps.empty() && p.steps.size() % 2 == 0 &&
           std::all_of(p.steps.begin(), p.steps.end(), [](const Step& s) { return (s.flags & kToken) != 0; });
  };
  // Every such channel holds one pair per device collective of the launch: alike.
  std::vector<size_t> only;
  for (size_t ch = 0; ch < l.channels.size(); ++ch)
    if (tokensOnly(l.channels[ch]) && (only.empty() || l.channels[ch].steps.size() == l.channels[only[0]].steps.size()))
      only.push_back(ch);
  constexpr size_t kGroup = kDeviceMaxConns / 2;
  for (size_t g = 0; g + 1 < only.size(); g += kGroup) {
    const size_t end = std::min(only.size(), g + kGroup);
    Program& lane = l.channels[only[g]];
    std::vector<Step> merged;
    for (size_t i = 0; i < lane.steps.size(); i += 2)
      for (size_t half = 0; half < 2; ++half)  // the sends, then the receives
        for (size_t k = g; k < end; ++k) merged.push_back(l.channels[only[k]].steps[i + half]);
    for (size_t k = g + 1; k < end; ++k) {
      Program& p = l.channels[only[k]];
      lane.flushTargets.insert(lane.flushTargets.end(), p.flushTargets.begin(), p.flushTargets.end());
      p.steps.clear();
    }
    lane.steps = std::move(merged);
    lane.lane = "tokens of channels " + std::to_string(only[g]) + "-" + std::to_string(only[end - 1]);
  }
}

// A tuner plugin's chunk size as a slice: within a slot (NCCL clamps it so too), in
// whole 64-byte units (a ring loop must hold more than a cut's slack: ring.cc).
size_t tunedSlice(size_t chunkBytes, size_t slotBytes) {
  return std::clamp<size_t>(chunkBytes / 64 * 64, 64, slotBytes);
}

Status buildPrograms(CommLaunch& l) {
  collComm* c = l.comm;
  ConnectorSet& conns = c->conns(l.device);
  const BuildInput shared = buildInput(c, conns);
  l.channels.resize(conns.channels.size());
  for (size_t ch = 0; ch < l.channels.size(); ++ch) initProgram(l.channels[ch], l, "channel " + std::to_string(ch));
  for (size_t ch = 0; ch < l.channels.size(); ++ch) l.channels[ch].channel = static_cast<int>(ch);
  initProgram(l.self, l, "copy to self");
  // Call order; device send/recv by distance (collectives keep theirs: other programs).
  std::vector<size_t> order(l.ops.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (l.device)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      auto key = [&](const OpDesc& od) { return isPeerOp(od.kind) ? peerDistance(c, od) : 0; };
      return key(l.ops[a]) < key(l.ops[b]);
    });
  for (size_t i : order) {
    const OpDesc& od = l.ops[i];
    auto idx = static_cast<uint16_t>(i);
    BuildInput in = shared;
    in.sliceBytes = sliceBytesFor(od.encoding, shared.sliceBytes);  // the caller's bytes of a slot
    if (od.chunkBytes > 0 && od.encoding == kEncodingNone) in.sliceBytes = tunedSlice(od.chunkBytes, in.sliceBytes);
    if (l.routes[i] == Route::kOneShot) {
      cutChannel0(l, std::make_shared<OneShot>(oneShotContext(c), od));
      continue;
    }
    // Device collectives: every channel the operation leaves empty gets a token.
    std::vector<size_t> before;
    const bool tokens = l.device && od.count > 0 && c->nranks > 1 && od.kind != CollKind::kPeerSend &&
                        od.kind != CollKind::kPeerRecv;
    if (tokens)
      for (const Program& p : l.channels) before.push_back(p.steps.size());
    switch (od.kind) {
      case CollKind::kAllReduce:
        if (l.routes[i] == Route::kTree) buildTreeAllReduce(in, od, idx, l.channels);
        else if (l.routes[i] == Route::kDirectAllReduce) buildDirectAllReduce(in, od, idx, l.channels);
        else buildRingAllReduce(in, od, idx, l.channels);
        break;
      case CollKind::kReduceScatter: buildRingReduceScatter(in, od, idx, l.channels); break;
      case CollKind::kAllGather: buildRingAllGather(in, od, idx, l.channels); break;
      case CollKind::kBroadcast: buildChainBroadcast(in, od, idx, l.channels); break;
      case CollKind::kReduce: buildChainReduce(in, od, idx, l.channels); break;
      case CollKind::kPeerSend: {
        if (od.root == c->rank || od.count == 0) break;
        const int key = l.device ? peerLane(c, od) : od.root;
        Program& p = l.sends[key];
        if (!p.comm)
          initProgram(p, l, l.device ? "send lane " + std::to_string(key) : "send to rank " + std::to_string(key));
        p.add(kSrc | kSend, od, idx, static_cast<const char*>(od.sendbuff), nullptr, od.bytes(),
              conns.peerSend.at(od.root).get(), nullptr);
        break;
      }
      case CollKind::kPeerRecv: {
        if (od.root == c->rank || od.count == 0) break;
        const int key = l.device ? peerLane(c, od) : od.root;
        Program& p = l.recvs[key];
        if (!p.comm)
          initProgram(p, l,
                      l.device ? "receive lane " + std::to_string(key) : "receive from rank " + std::to_string(key));
        p.add(kRecv | kDst, od, idx, nullptr, static_cast<char*>(od.recvbuff), od.bytes(), nullptr,
              conns.peerRecv.at(od.root).get());
        break;
      }
    }
    for (size_t ch = 0; tokens && ch < l.channels.size(); ++ch)
      if (l.channels[ch].steps.size() == before[ch])
        l.channels[ch].addToken(idx, conns.channels[ch].send.get(), conns.channels[ch].recv.get());
  }
  COLL_CHECK(buildSelfCopies(l));
  if (l.device) mergeTokenLanes(l);
  if (l.device && !l.self.steps.empty()) {
    // Copies to oneself wait for nobody: first in send lane 0, not a lane of their own.
    Program& p = l.sends[0];
    if (!p.comm) initProgram(p, l, "send lane 0");
    p.steps.insert(p.steps.begin(), l.self.steps.begin(), l.self.steps.end());
    l.self.steps.clear();
  }
  return okStatus();
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

// A failed phase of a launch: names the communicator it failed on.
Status failOn(collComm* c, Status st, collComm** failedComm) {
  if (!st.ok()) *failedComm = c;
  return st;
}

// A failed status with context in front; an ok one as it is.
Status prefixed(Status st, const std::string& context) {
  if (!st.ok()) st.prefix(context);
  return st;
}

using Launches = std::vector<std::unique_ptr<CommLaunch>>;

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

// Stage: small device launches of a time-sliced GPU run from host memory (comm/stage.h),
// as host launches from here on.
Status stage(Launches& launches, collComm** failedComm) {
  Launches split;
  for (auto& l : launches) {
    if (!l->device || l->comm->deviceStageBytes == 0) continue;
    std::vector<OpDesc> host, device;
    for (OpDesc& od : l->ops) (stagedOp(l->comm, od) ? host : device).push_back(std::move(od));
    l->ops = std::move(device);
    if (host.empty()) continue;
    CommLaunch* h = l.get();
    if (!l->ops.empty()) {  // the staged operations become a launch of their own
      split.push_back(std::make_unique<CommLaunch>());
      h = split.back().get();
      h->comm = l->comm;
      h->splitOff = true;
    }
    h->ops = std::move(host);
    h->staging = std::make_unique<Staging>();
    COLL_RETURN_IF_FAILED(failOn(l->comm, stageIn(l->comm, h->ops, h->staging.get()), failedComm));
    h->device = false;
  }
  for (auto& s : split) launches.push_back(std::move(s));
  return okStatus();
}

// Their outputs back to the caller's device buffers.
Status unstage(Launches& launches, collComm** failedComm) {
  for (auto& l : launches)
    if (l->staging) COLL_RETURN_IF_FAILED(failOn(l->comm, stageOut(l->comm, *l->staging), failedComm));
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
  auto job = std::make_unique<ConnectJob>(c->bootstrap.get(), l.device ? c->deviceSlotBytes : c->slotBytes, l.device,
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

// The non-empty programs of a built launch; device launches must fit their lane budget.
Status lanesOf(CommLaunch& l, std::vector<Program*>* mine) {
  for (auto& p : l.channels)
    if (!p.steps.empty()) mine->push_back(&p);
  for (auto& [peer, p] : l.sends)
    if (!p.steps.empty()) mine->push_back(&p);
  for (auto& [peer, p] : l.recvs)
    if (!p.steps.empty()) mine->push_back(&p);
  if (!l.self.steps.empty()) mine->push_back(&l.self);
  if (l.device && mine->size() > static_cast<size_t>(l.comm->dev.laneBudget))
    return invalidUsage("rank " + std::to_string(l.comm->rank) + ": this group needs " + std::to_string(mine->size()) +
                        " device lanes (thread blocks) but only " + std::to_string(l.comm->dev.laneBudget) +
                        " fit beside the other ranks sharing its GPU (the GPU's resident blocks divided "
                        "among them); put fewer ranks on one GPU");
  return okStatus();
}

// Build and run: every launch's programs, device parts to their executor, host programs
// to the host executor.
// The host lanes of a built launch: its programs, channel 0 after the segments before it.
void hostLanes(CommLaunch& l, const std::vector<Program*>& programs, std::vector<std::unique_ptr<Lane>>* lanes) {
  std::vector<std::unique_ptr<Lane>> channel0;
  for (CommLaunch::Segment& s : l.channel0Before)
    channel0.push_back(s.program ? programLane(*s.program) : oneShotLane(l.comm, s.oneShot));
  const size_t first = lanes->size();  // channel 0 leads, as in `programs`
  for (Program* p : programs) {
    if (p == &l.channels[0] && !channel0.empty()) channel0.push_back(programLane(*p));
    else lanes->push_back(programLane(*p));
  }
  if (!channel0.empty())
    lanes->insert(lanes->begin() + static_cast<std::ptrdiff_t>(first), sequenceLane(std::move(channel0)));
}

// What a device launch's programs depend on beyond its communicator's fixed state (ring,
// channels, slot sizes, connectors): every operation's kind, buffers, count, type, op,
// root, encoding and route. The key of its plan (device/plan_cache.h).
std::vector<uint64_t> planKey(const CommLaunch& l) {
  std::vector<uint64_t> key;
  key.reserve(1 + l.ops.size() * 8);
  key.push_back(l.ops.size());
  for (size_t i = 0; i < l.ops.size(); ++i) {
    const OpDesc& od = l.ops[i];
    key.insert(key.end(), {static_cast<uint64_t>(od.kind), reinterpret_cast<uintptr_t>(od.sendbuff),
                           reinterpret_cast<uintptr_t>(od.recvbuff), od.count,
                           static_cast<uint64_t>(od.dtype) | uint64_t{od.encoding} << 32,
                           static_cast<uint64_t>(static_cast<uint32_t>(od.op)),
                           static_cast<uint64_t>(static_cast<uint32_t>(od.root)), static_cast<uint64_t>(l.routes[i])});
  }
  return key;
}

// A device launch's part: the plan an earlier launch of the same operations left, or its
// programs built now.
Status devicePart(CommLaunch& l, uint64_t calledNs, std::vector<DevicePart>* parts) {
  DevicePart part{&l.comm->dev, &l.ops, {}, {}, {}, nullptr, calledNs, 0};
  if (l.comm->dev.plans) {
    part.planKey = planKey(l);
    part.plan = l.comm->dev.plans->find(part.planKey);
  }
  if (!part.plan) {
    COLL_CHECK(buildPrograms(l));
    COLL_CHECK(lanesOf(l, &part.programs));
  }
  for (const OpDesc& od : l.ops)
    if (std::find(part.streams.begin(), part.streams.end(), od.stream) == part.streams.end())
      part.streams.push_back(od.stream);
  part.builtNs = wallNs();
  parts->push_back(std::move(part));
  return okStatus();
}

// Profiler events: how each operation of a built launch runs, in NCCL's words. The
// one-shot is reported as NCCL's LL protocol (the name COLL_PROTO gives it), ring and tree
// as algorithms; broadcast and reduce (chains) and the device's direct allreduce as RING.
// Its channels: the lanes that move its data (a device launch's token lanes aside), in
// its programs or in the device plan reused instead of them.
std::vector<ProfAlgoProto> profAlgoProtos(const CommLaunch& l, const DevicePlan* plan) {
  std::vector<ProfAlgoProto> algoProtos;
  for (size_t i = 0; i < l.ops.size(); ++i) {
    const Route r = i < l.routes.size() ? l.routes[i] : Route::kRing;
    auto moves = [&](const auto& s) { return s.op == i && !(s.flags & kToken); };
    int channels = 0;
    auto count = [&](const Program& p) { channels += std::any_of(p.steps.begin(), p.steps.end(), moves); };
    for (const Program& p : l.channels) count(p);
    for (const auto& [peer, p] : l.sends) count(p);
    for (const auto& [peer, p] : l.recvs) count(p);
    count(l.self);
    for (const CommLaunch::Segment& s : l.channel0Before)
      if (s.program) count(*s.program);
    for (size_t k = 0; plan && k < plan->lanes.size(); ++k) {
      const DeviceLane& lane = plan->lanes[k];  // its `steps`: the index of its first step
      const auto first = plan->steps.begin() + static_cast<std::ptrdiff_t>(reinterpret_cast<uintptr_t>(lane.steps));
      channels += std::any_of(first, first + lane.nsteps, moves);
    }
    if (r == Route::kOneShot) channels = 1;
    algoProtos.push_back({r == Route::kTree ? "TREE" : "RING", r == Route::kOneShot ? "LL" : "SIMPLE", channels});
  }
  return algoProtos;
}

void profStart(CommLaunch& l, const DevicePlan* plan = nullptr) {
  if (!l.comm->profiler.loaded()) return;
  l.prof.comm = l.comm;
  l.prof.ops = &l.ops;
  const std::vector<ProfAlgoProto> algoProtos = profAlgoProtos(l, plan);
  profLaunchStart(l.prof, algoProtos);
  if (l.device) profKernelStart(l.prof, algoProtos);
}

// Stops the launches' profiler events however the launch ends.
struct ProfStops {
  Launches& launches;
  ~ProfStops() {
    for (auto& l : launches)
      if (l->prof.comm) profLaunchStop(l->prof);
  }
};

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
    COLL_RETURN_IF_FAILED(failOn(l->comm, buildPrograms(*l), failedComm));
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

Status enqueue(collComm* comm, OpDesc op, collComm** failedComm) {
  op.seq = isPeerOp(op.kind) ? comm->seq : comm->seq++;
  ProfApiCall profApi(comm, op, tlsDepth);
  if (tlsDepth > 0) {
    tlsQueue.push_back({comm, op});
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
  std::vector<Queued> one{{comm, op}};
  return launch(one, failedComm);
}

}  // namespace coll

#include "comm/launch.h"

#include <algorithm>
#include <numeric>

#include "device/device_lane.h"
#include "device/plan_cache.h"
#include "device/proxy.h"  // wallNs

namespace coll {

namespace {

// Device send/recv lanes. A device lane runs its steps in order and blocks, and only so
// many fit on the GPU (device_exec.h), so a rank's sends share devicePeerLanes lanes (its
// receives as many more): the pair at distance d goes to lane d % lanes on both ends,
// and every lane takes its peers by increasing distance. The lowest distance any lane
// waits at can always progress (its partner lane is at that distance too, or done with
// the ones below), so the lanes of all ranks never wait on each other in a cycle.
int peerLane(const collComm* c, const OpDesc& od) { return peerDistance(c, od) % c->dev.peerLanes; }

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

// Device collectives: every channel operation i left empty gets a token (`before`: the
// channels' steps before it).
void addTokens(CommLaunch& l, size_t i, const std::vector<size_t>& before) {
  const ConnectorSet& conns = *l.comm->dev.conns;
  for (size_t ch = 0; ch < l.channels.size(); ++ch)
    if (l.channels[ch].steps.size() == before[ch])
      l.channels[ch].addToken(static_cast<uint16_t>(i), conns.channels[ch].send.get(), conns.channels[ch].recv.get());
}

}  // namespace

Status buildDevicePrograms(CommLaunch& l) {
  collComm* c = l.comm;
  const BuildInput shared = startPrograms(l);
  // Call order; send/recv by distance (collectives keep theirs: other programs).
  std::vector<size_t> order(l.ops.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    auto key = [&](const OpDesc& od) { return isPeerOp(od.kind) ? peerDistance(c, od) : 0; };
    return key(l.ops[a]) < key(l.ops[b]);
  });
  for (size_t i : order) {
    const OpDesc& od = l.ops[i];
    if (isPeerOp(od.kind)) {
      const int lane = peerLane(c, od);
      buildPeerStep(l, i, lane,
                    (od.kind == CollKind::kPeerSend ? "send lane " : "receive lane ") + std::to_string(lane));
      continue;
    }
    std::vector<size_t> before;
    for (const Program& p : l.channels) before.push_back(p.steps.size());
    buildCollective(l, shared, i);
    if (od.count > 0 && c->nranks > 1) addTokens(l, i, before);
  }
  COLL_CHECK(buildSelfCopies(l));
  mergeTokenLanes(l);
  if (!l.self.steps.empty()) {
    // Copies to oneself wait for nobody: first in send lane 0, not a lane of their own.
    Program& p = l.sends[0];
    if (!p.comm) initProgram(p, l, "send lane 0");
    p.steps.insert(p.steps.begin(), l.self.steps.begin(), l.self.steps.end());
    l.self.steps.clear();
  }
  return okStatus();
}

Status devicePart(CommLaunch& l, uint64_t calledNs, std::vector<DevicePart>* parts) {
  DevicePart part{&l.comm->dev, &l.ops, {}, {}, {}, nullptr, calledNs, 0};
  if (l.comm->dev.plans) {
    part.planKey = planKey(l);
    part.plan = l.comm->dev.plans->find(part.planKey);
  }
  if (!part.plan) {
    COLL_CHECK(buildDevicePrograms(l));
    COLL_CHECK(lanesOf(l, &part.programs));
  }
  for (const OpDesc& od : l.ops)
    if (std::find(part.streams.begin(), part.streams.end(), od.stream) == part.streams.end())
      part.streams.push_back(od.stream);
  part.builtNs = wallNs();
  parts->push_back(std::move(part));
  return okStatus();
}

Status stage(Launches& launches, collComm** failedComm) {
  Launches split;
  for (auto& l : launches) {
    if (!l->device || l->comm->dev.stageBytes == 0) continue;
    std::vector<OpDesc> host, device;
    for (OpDesc& od : l->ops) (stagedOp(l->comm->dev, od) ? host : device).push_back(std::move(od));
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
    COLL_RETURN_IF_FAILED(failOn(l->comm, stageIn(l->comm->dev, h->ops, h->staging.get()), failedComm));
    h->device = false;
  }
  for (auto& s : split) launches.push_back(std::move(s));
  return okStatus();
}

Status unstage(Launches& launches, collComm** failedComm) {
  for (auto& l : launches)
    if (l->staging) COLL_RETURN_IF_FAILED(failOn(l->comm, stageOut(l->comm->dev, *l->staging), failedComm));
  return okStatus();
}

}  // namespace coll

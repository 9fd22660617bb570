#include "comm/launch.h"

#include <algorithm>

#include "kernels/compress.h"

namespace coll {

namespace {

// A tuner plugin's chunk size as a slice: within a slot (NCCL clamps it so too), in
// whole 64-byte units (a ring loop must hold more than a cut's slack: ring.cc).
size_t tunedSlice(size_t chunkBytes, size_t slotBytes) {
  return std::clamp<size_t>(chunkBytes / 64 * 64, 64, slotBytes);
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

}  // namespace

void initProgram(Program& p, CommLaunch& l, std::string lane) {
  p.lane = std::move(lane);
  p.ops = &l.ops;
  p.comm = l.comm;
  p.sliceBytes = l.device ? l.comm->dev.slotBytes : l.comm->sliceBytes;
  p.streamMinBytes = l.comm->streamMinBytes;
  p.nranks = l.comm->nranks;
  p.rank = l.comm->rank;
}

BuildInput startPrograms(CommLaunch& l) {
  collComm* c = l.comm;
  const ConnectorSet& conns = c->conns(l.device);
  l.channels.resize(conns.channels.size());
  for (size_t ch = 0; ch < l.channels.size(); ++ch) {
    initProgram(l.channels[ch], l, "channel " + std::to_string(ch));
    l.channels[ch].channel = static_cast<int>(ch);
  }
  initProgram(l.self, l, "copy to self");
  BuildInput in;
  in.nranks = c->nranks;
  in.ring = &c->ring;
  in.sliceBytes = l.device ? c->dev.slotBytes : c->sliceBytes;
  in.loopSlices = c->loopSlices;
  in.channelMinBytes = l.device ? c->dev.channelMinBytes : c->channelMinBytes;
  in.exchangeMaxBytes = l.device ? c->dev.exchangeBytes : 0;
  in.minChannels = c->minChannels;
  in.twoTrees = c->twoTrees;
  in.conns = &conns;
  return in;
}

void buildCollective(CommLaunch& l, const BuildInput& shared, size_t i) {
  const OpDesc& od = l.ops[i];
  const auto idx = static_cast<uint16_t>(i);
  BuildInput in = shared;
  in.sliceBytes = sliceBytesFor(od.encoding, shared.sliceBytes);  // the caller's bytes of a slot
  if (od.chunkBytes > 0 && od.encoding == kEncodingNone) in.sliceBytes = tunedSlice(od.chunkBytes, in.sliceBytes);
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
    case CollKind::kPeerSend:
    case CollKind::kPeerRecv: break;  // buildPeerStep
  }
}

void buildPeerStep(CommLaunch& l, size_t i, int key, const std::string& lane) {
  const OpDesc& od = l.ops[i];
  if (od.root == l.comm->rank || od.count == 0) return;
  const auto idx = static_cast<uint16_t>(i);
  const ConnectorSet& conns = l.comm->conns(l.device);
  if (od.kind == CollKind::kPeerSend) {
    Program& p = l.sends[key];
    if (!p.comm) initProgram(p, l, lane);
    p.add(kSrc | kSend, od, idx, static_cast<const char*>(od.sendbuff), nullptr, od.bytes(),
          conns.peerSend.at(od.root).get(), nullptr);
  } else {
    Program& p = l.recvs[key];
    if (!p.comm) initProgram(p, l, lane);
    p.add(kRecv | kDst, od, idx, nullptr, static_cast<char*>(od.recvbuff), od.bytes(), nullptr,
          conns.peerRecv.at(od.root).get());
  }
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

int peerDistance(const collComm* c, const OpDesc& od) {
  const int from = od.kind == CollKind::kPeerSend ? c->rank : od.root;
  const int to = od.kind == CollKind::kPeerSend ? od.root : c->rank;
  return (to - from + c->nranks) % c->nranks;
}

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

void profStart(CommLaunch& l, const DevicePlan* plan) {
  if (!l.comm->profiler.loaded()) return;
  l.prof.comm = l.comm;
  l.prof.ops = &l.ops;
  const std::vector<ProfAlgoProto> algoProtos = profAlgoProtos(l, plan);
  profLaunchStart(l.prof, algoProtos);
  if (l.device) profKernelStart(l.prof, algoProtos);
}

}  // namespace coll

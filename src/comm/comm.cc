#include "comm/comm.h"
#include "comm/watch.h"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "algorithms/algorithms.h"
#include "algorithms/graph.h"
#include "bootstrap/failure.h"
#include "bootstrap/host_id.h"
#include "base/env_plugin.h"
#include "base/log.h"
#include "base/param.h"
#include "base/sha256.h"
#include "collectives/config.h"
#include "device/device_exec.h"
#include "kernels/compress.h"
#if COLL_HAVE_CUDA
#include "cuda/gpu.h"
#endif
#include "device/proxy.h"
#include "topology/probe.h"
#include "transport/net/net.h"
#include "transport/transport.h"

namespace coll {

namespace {

// The registry of live communicators. API calls look a handle up on every call, so the
// lookup takes no lock: a communicator sits in one slot of a fixed table near its
// pointer's hash, and the slot (static memory, never freed) counts the calls in flight,
// so a stale handle is compared, never dereferenced. Registering and retiring take
// gLiveMu. A communicator whose slots are all taken goes to the overflow set, looked up
// under the lock.
struct alignas(64) LiveSlot {  // a cache line each: ranks that are threads use their own
  std::atomic<const collComm*> comm{nullptr};
  std::atomic<int> busy{0};  // calls in flight on comm
};
constexpr size_t kLiveSlots = 4096;
constexpr size_t kLiveProbes = 16;  // slots a communicator may take, from its hash on
LiveSlot gLiveSlots[kLiveSlots];
std::mutex gLiveMu;
std::set<const collComm*> gLiveOverflow;
std::atomic<size_t> gLiveOverflowSize{0};

size_t liveSlotOf(const collComm* comm, size_t probe) {
  const uint64_t h = (reinterpret_cast<uintptr_t>(comm) >> 4) * 0x9E3779B97F4A7C15ull;
  return (static_cast<size_t>(h >> 40) + probe) % kLiveSlots;
}

// The slot holding comm, or -1.
int findLiveSlot(const collComm* comm) {
  for (size_t i = 0; i < kLiveProbes; ++i) {
    const size_t s = liveSlotOf(comm, i);
    if (gLiveSlots[s].comm.load(std::memory_order_acquire) == comm) return static_cast<int>(s);
  }
  return -1;
}

constexpr uint64_t kTagConfig = 3ull << 56;
constexpr uint64_t kTagSplit = 4ull << 56;
constexpr uint64_t kTagShrink = 8ull << 56;
constexpr uint64_t kTagWindow = 9ull << 56;
constexpr uint64_t kTagGrow = 11ull << 56;

// Settings every rank must agree on, checked at init.
struct SharedConfig {
  int64_t buffSize;
  int64_t deviceBuffSize;
  int64_t oneShotBytes;
  int64_t netOneShotBytes;
  int32_t nChannels;
  int32_t shmDisable;
  int32_t direct;
  int32_t netDuplex;
  int32_t deviceEmulate;
  int32_t deviceChannels;
  int32_t deviceLaneBudget;  // not compared: the smallest over all ranks applies
  int32_t deviceYields;      // not compared: staging is on when any rank's lanes yield
  int64_t deviceStageBytes;
  int64_t deviceExchangeBytes;
  int32_t compress;       // collCompress_t
  int32_t deterministic;  // config->deterministic, else COLL_DETERMINISTIC
  uint64_t algos;         // COLL_ALGO / COLL_PROTO filters (tuner.h)
  uint64_t protos;
  double tunerConsts[5];
  char netName[32];   // the net backend this rank would use ("": no network); compared apart
  int32_t netChosen;  // by config->netName or COLL_NET, not by the probe
};
constexpr uint64_t kTagMailbox = 5ull << 56;

// Every rank on this host (and shared memory allowed): the one-shot mailboxes.
bool allOnOneHost(const collComm* c) {
  const auto& peers = c->bootstrap->peers();
  for (const PeerInfo& p : peers)
    if (!sameHost(p, peers[0])) return false;
  return true;
}

}  // namespace

std::shared_ptr<char> ScratchPool::take(size_t bytes) {
  std::unique_ptr<char[]> buf;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest kept buffer that fits.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->first >= bytes && (best == free_.end() || it->first < best->first)) best = it;
    if (best != free_.end()) {
      bytes = best->first;
      buf = std::move(best->second);
      free_.erase(best);
    }
  }
  if (!buf) buf.reset(new char[bytes]);
  char* raw = buf.release();
  return std::shared_ptr<char>(raw, [pool = shared_from_this(), bytes](char* p) {
    std::unique_ptr<char[]> back(p);
    std::lock_guard<std::mutex> lock(pool->mu_);
    auto& kept = pool->free_;
    if (kept.size() < kKeep) {
      kept.emplace_back(bytes, std::move(back));
      return;
    }
    auto smallest = std::min_element(kept.begin(), kept.end(),
                                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (smallest->first < bytes) *smallest = {bytes, std::move(back)};  // the smaller one is freed
  });
}

void registerComm(collComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  for (size_t i = 0; i < kLiveProbes; ++i) {
    LiveSlot& slot = gLiveSlots[liveSlotOf(comm, i)];
    // A slot whose retired communicator still has calls leaving stays theirs.
    if (slot.comm.load(std::memory_order_relaxed) || slot.busy.load(std::memory_order_seq_cst) != 0) continue;
    comm->liveSlot = static_cast<int>(liveSlotOf(comm, i));
    slot.comm.store(comm, std::memory_order_release);
    return;
  }
  comm->liveSlot = -1;
  gLiveOverflow.insert(comm);
  gLiveOverflowSize.store(gLiveOverflow.size(), std::memory_order_release);
}
bool isLiveComm(const collComm* comm) {
  if (!comm) return false;
  if (findLiveSlot(comm) >= 0) return true;
  if (gLiveOverflowSize.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(gLiveMu);
  return gLiveOverflow.count(comm) != 0;
}
bool acquireComm(collComm* comm) {
  if (!comm) return false;
  for (size_t i = 0; i < kLiveProbes; ++i) {
    LiveSlot& slot = gLiveSlots[liveSlotOf(comm, i)];
    if (slot.comm.load(std::memory_order_acquire) != comm) continue;
    // Counted first, then checked again: a retire that cleared the slot meanwhile either
    // sees this count and waits, or is seen here.
    slot.busy.fetch_add(1, std::memory_order_seq_cst);
    if (slot.comm.load(std::memory_order_seq_cst) == comm) return true;
    slot.busy.fetch_sub(1, std::memory_order_release);
  }
  if (gLiveOverflowSize.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (!gLiveOverflow.count(comm)) return false;
  comm->busy.fetch_add(1);
  return true;
}
void releaseComm(collComm* comm) {
  if (comm->liveSlot >= 0) gLiveSlots[comm->liveSlot].busy.fetch_sub(1, std::memory_order_release);
  else comm->busy.fetch_sub(1);
}
void retireComm(collComm* comm) {
  std::atomic<int>* busy = &comm->busy;
  {
    std::lock_guard<std::mutex> lock(gLiveMu);
    if (comm->liveSlot >= 0) {
      LiveSlot& slot = gLiveSlots[comm->liveSlot];
      if (slot.comm.load(std::memory_order_relaxed) == comm) slot.comm.store(nullptr, std::memory_order_seq_cst);
      busy = &slot.busy;
    } else {
      gLiveOverflow.erase(comm);
      gLiveOverflowSize.store(gLiveOverflow.size(), std::memory_order_release);
    }
  }
  while (busy->load(std::memory_order_seq_cst) > 0) usleep(1000);
}

// The double binary trees over hosts (ranks grouped by host id in order of first
// appearance, in ring order inside a host: by GPU, then rank) and the tuner's view of
// the communicator. The trees' connectors are connected by the first operation that runs on
// them (group.cc).
static void initTrees(collComm* c, int nch, bool shmDisable) {
  const auto& peers = c->bootstrap->peers();
  std::vector<std::string> ids;
  std::vector<std::vector<int>> members;
  for (int r : c->ring.order) {
    std::string h(peers[r].hostId, strnlen(peers[r].hostId, sizeof(peers[r].hostId)));
    auto it = std::find(ids.begin(), ids.end(), h);
    if (it == ids.end()) {
      ids.push_back(h);
      members.emplace_back();
      it = ids.end() - 1;
    }
    members[static_cast<size_t>(it - ids.begin())].push_back(r);
  }
  const int hosts = static_cast<int>(ids.size());
  c->twoTrees = hosts >= 2;
  auto trees = treesOverNodes(members, c->nranks);
  c->hostConns.trees.resize(static_cast<size_t>(nch));
  for (auto& perTree : c->hostConns.trees)
    for (int t = 0; t < 2; ++t) {
      perTree[t].parent = trees[t][c->rank].parent;
      perTree[t].children = trees[t][c->rank].children;
    }
  size_t maxPer = 1, minPer = static_cast<size_t>(c->nranks);
  for (const auto& m : members) {
    maxPer = std::max(maxPer, m.size());
    minPer = std::min(minPer, m.size());
  }
  c->tuner.nranks = c->nranks;
  c->tuner.hosts = hosts;
  c->tuner.maxRanksPerHost = static_cast<int>(maxPer);
  c->tuner.minRanksPerHost = static_cast<int>(minPer);
  c->tuner.overNet = hosts > 1 || shmDisable;
  c->tuner.intraNet = shmDisable;
  c->tuner.treeAvailable = c->nranks > 1;
  // The LL limits stay unset: at run time oneShotEligible() decides where LL applies.
}

// The machine's topology when asked for (COLL_TOPO_FILE, COLL_TOPO_DUMP_FILE): loaded
// (a bad file fails init naming it), logged under GRAPH, and dumped by rank 0. Host
// ranks' rings and trees follow rank order and host ids, so nothing else needs it here;
// the probe's cost (hwloc) is paid only when asked.
static Status initTopology(collComm* c) {
  if (param(StringParam::TOPO_FILE).empty() && param(StringParam::TOPO_DUMP_FILE).empty()) return okStatus();
  std::string origin;
  COLL_ASSIGN(auto topo, loadSystemTopology(&origin));
  COLL_INFO(GRAPH, "rank %d: topology from %s: %zu CPU(s), %zu GPU(s), %zu NIC port(s)", c->rank, origin.c_str(),
            topo->cpus().size(), topo->gpus().size(), topo->nets().size());
  if (c->rank == 0) COLL_CHECK(dumpTopologyIfAsked(*topo));
  return okStatus();
}

// A FIFO size parameter's value, brought into 1 KiB..1 GiB with a warning.
static int64_t fifoBytesOf(IntParam which) {
  const int64_t minBuff = 1024;
  const int64_t maxBuff = int64_t{1} << 30;  // a FIFO slot's bytes travel as 32 bits (FifoCtrl::sizes)
  int64_t buff = param(which);
  if (buff < minBuff || buff > maxBuff) {
    const int64_t use = buff < minBuff ? minBuff : maxBuff;
    COLL_WARN(ENV, "COLL_%s=%lld is outside %lld..%lld; using %lld", paramInfo(which).name,
              static_cast<long long>(buff), static_cast<long long>(minBuff), static_cast<long long>(maxBuff),
              static_cast<long long>(use));
    buff = use;
  }
  return buff;
}

// COLL_BUFFSIZE, or for rings that cross the network COLL_NET_BUFFSIZE unless
// COLL_BUFFSIZE is set: over TCP 256 KiB slices beat 128 KiB ones by 5-26 % from 256 KiB
// up, while over shared memory 128 KiB is 7-12 % faster (docs/PERFORMANCE.md). Every rank
// sees the same hosts, so they agree (and the shared config checks it).
static int64_t configuredFifoBytes(bool overNet) {
  return fifoBytesOf(overNet && paramRaw(IntParam::BUFFSIZE) == nullptr ? IntParam::NET_BUFFSIZE : IntParam::BUFFSIZE);
}

// COLL_DEVICE_BUFFSIZE, else 4 MiB on GPUs of one host (NCCL's default FIFO; the H100 run:
// 512 KiB slots moved 1.3x the busbw of 128 KiB ones at 256 MiB, 2 ranks, 32 channels),
// else the host FIFOs' size (across hosts, and under emulation, where no GPU memory holds
// them).
static int64_t deviceFifoBytes(bool overNet, bool emulate, int64_t hostBytes) {
  if (param(IntParam::DEVICE_BUFFSIZE) != 0) return fifoBytesOf(IntParam::DEVICE_BUFFSIZE);
  return overNet || emulate ? hostBytes : int64_t{4} << 20;
}

static_assert(int{collCompressFloat16} == int{kEncodingFp16} && int{collCompressBfloat16} == int{kEncodingBf16} &&
              int{collCompressNone} == int{kEncodingNone});

// The communicator's default compression (collCompress_t): its config's, else COLL_COMPRESS.
static Result<int32_t> compressSetting(const CommOptions& o) {
  if (o.compress >= 0) return o.compress;
  const std::string v = param(StringParam::COMPRESS);
  if (v.empty() || v == "off" || v == "none" || v == "0") return int32_t{collCompressNone};
  if (v == "fp16" || v == "half") return int32_t{collCompressFloat16};
  if (v == "bf16" || v == "bfloat16") return int32_t{collCompressBfloat16};
  return invalidArgument("COLL_COMPRESS=" + v + " is not off, fp16 or bf16");
}

// This rank's side of the settings every rank must share; tuner inputs go to c->tuner.
static Result<SharedConfig> localConfig(collComm* c, bool shmDisable, bool overNet, int64_t minCh) {
  // collConfig_t's maxCTAs bounds the channels where given.
  const CommOptions& o = c->options;
  const int64_t maxCh = std::clamp<int64_t>(o.maxChannels > 0 ? o.maxChannels : param(IntParam::MAX_NCHANNELS), 1,
                                            kMaxChannels);
  SharedConfig mine{};
  mine.buffSize = configuredFifoBytes(overNet);
  mine.deviceEmulate = param(IntParam::DEVICE_EMULATE) != 0 ? 1 : 0;
  mine.deviceBuffSize = deviceFifoBytes(overNet, mine.deviceEmulate != 0, mine.buffSize);
  mine.oneShotBytes = std::clamp<int64_t>(param(IntParam::ONESHOT_BYTES), 0, 64 << 20);
  mine.netOneShotBytes = std::max<int64_t>(0, param(IntParam::NET_ONESHOT_BYTES));
  mine.nChannels = static_cast<int32_t>(std::max(minCh, maxCh));
  mine.shmDisable = shmDisable ? 1 : 0;
  mine.direct = static_cast<int32_t>(std::clamp<int64_t>(param(IntParam::DIRECT), 0, 2));
  mine.netDuplex = param(IntParam::NET_DUPLEX) != 0 ? 1 : 0;
  mine.deviceChannels = static_cast<int32_t>(std::clamp<int64_t>(param(IntParam::DEVICE_NCHANNELS), 0,
                                                                 kDeviceMaxChannels));
  mine.deviceLaneBudget = deviceLaneBudget(c->bootstrap->peers(), c->rank, c->dev.cudaDev, mine.deviceEmulate != 0);
  c->dev.yieldNs = deviceYieldFor(c->bootstrap->peers(), c->rank, c->dev.cudaDev, mine.deviceEmulate != 0);
  mine.deviceYields = c->dev.yieldNs != 0 ? 1 : 0;
  mine.deviceStageBytes = std::clamp<int64_t>(param(IntParam::DEVICE_STAGE_BYTES), 0, int64_t{1} << 30);
  mine.deviceExchangeBytes = std::clamp<int64_t>(param(IntParam::DEVICE_EXCHANGE_BYTES), 0, int64_t{1} << 30);
  COLL_ASSIGN(mine.compress, compressSetting(o));
  mine.deterministic = o.deterministic >= 0 ? o.deterministic : param(IntParam::DETERMINISTIC) != 0 ? 1 : 0;
  COLL_CHECK(tunerInputFromParams(&c->tuner));
  mine.algos = c->tuner.algos;
  mine.protos = c->tuner.protos;
  const double consts[5] = {c->tuner.hopUs, c->tuner.netHopUs, c->tuner.oneShotUs, c->tuner.bwGBs, c->tuner.netBwGBs};
  std::memcpy(mine.tunerConsts, consts, sizeof(consts));
  if (overNet) {
    bool chosen = !o.netName.empty();
    const std::string net = chosen ? o.netName : defaultNetName(&chosen);
    if (net.size() >= sizeof(mine.netName)) return invalidArgument("net backend name \"" + net + "\" is too long");
    std::memcpy(mine.netName, net.c_str(), net.size() + 1);
    mine.netChosen = chosen ? 1 : 0;
  }
  return mine;
}

// The settings of s every rank must share, exactly (doubles to 17 digits): two ranks
// agree when their descriptions are equal. deviceLaneBudget is not among them (the
// smallest over all ranks applies).
static std::string describeShared(const SharedConfig& s) {
  std::string consts;
  for (double v : s.tunerConsts) {
    char text[32];
    std::snprintf(text, sizeof(text), "%s%.17g", consts.empty() ? "" : "/", v);
    consts += text;
  }
  return "FIFO bytes (COLL_BUFFSIZE or COLL_NET_BUFFSIZE) " + std::to_string(s.buffSize) +
         ", device FIFO bytes (COLL_DEVICE_BUFFSIZE) " + std::to_string(s.deviceBuffSize) + ", " +
         std::to_string(s.nChannels) + " channels, COLL_ONESHOT_BYTES=" + std::to_string(s.oneShotBytes) +
         ", COLL_NET_ONESHOT_BYTES=" + std::to_string(s.netOneShotBytes) +
         ", COLL_SHM_DISABLE=" + std::to_string(s.shmDisable) + ", COLL_DIRECT=" + std::to_string(s.direct) +
         ", COLL_NET_DUPLEX=" + std::to_string(s.netDuplex) +
         ", COLL_DEVICE_EMULATE=" + std::to_string(s.deviceEmulate) +
         ", COLL_DEVICE_NCHANNELS=" + std::to_string(s.deviceChannels) +
         ", COLL_DEVICE_STAGE_BYTES=" + std::to_string(s.deviceStageBytes) +
         ", COLL_DEVICE_EXCHANGE_BYTES=" + std::to_string(s.deviceExchangeBytes) +
         ", COLL_COMPRESS (or config->compress) " + std::to_string(s.compress) +
         ", COLL_DETERMINISTIC (or config->deterministic) " + std::to_string(s.deterministic) +
         ", COLL_ALGO/COLL_PROTO filters " + std::to_string(s.algos) + "/" + std::to_string(s.protos) +
         ", COLL_TUNER_* " + consts;
}

// Every rank's SharedConfig; fails naming the first rank that differs from rank 0.
static Result<std::vector<SharedConfig>> agreeConfig(collComm* c, const SharedConfig& mine) {
  std::vector<SharedConfig> all(c->nranks);
  all[c->rank] = mine;
  COLL_CHECK(c->bootstrap->allGather(all.data(), sizeof(SharedConfig), kTagConfig));
  const std::string first = describeShared(all[0]);
  for (int r = 1; r < c->nranks; ++r) {
    const std::string other = describeShared(all[r]);
    if (other != first)
      return invalidUsage("ranks disagree on settings: rank 0 has " + first + ", rank " + std::to_string(r) + " has " +
                          other);
  }
  return all;
}

// The one net backend of c's ranks. Where every rank left it to the probe and they found
// different ones (IB on some hosts only), all use Socket; a rank's explicit choice
// (config->netName, COLL_NET) must match the others'.
static Status agreeNet(collComm* c, const std::vector<SharedConfig>& all) {
  std::string name = all[0].netName;
  bool anyChosen = false;
  int differs = -1;
  for (int r = 0; r < c->nranks; ++r) {
    anyChosen = anyChosen || all[r].netChosen;
    if (differs < 0 && strcasecmp(all[r].netName, name.c_str()) != 0) differs = r;
  }
  if (differs >= 0 && anyChosen)
    return invalidUsage("ranks disagree on the net backend (config->netName, COLL_NET, or what the host has): rank 0 "
                        "uses " +
                        name + ", rank " + std::to_string(differs) + " " + all[differs].netName);
  if (differs >= 0) {
    if (c->rank == 0)
      COLL_WARN(NET, "rank 0 found net backend %s, rank %d %s: every rank uses Socket (set COLL_NET to choose)",
                name.c_str(), differs, all[differs].netName);
    name = "Socket";
  }
  if (name.empty()) return okStatus();
  COLL_ASSIGN(c->net, netBackendNamed(name));
  COLL_INFO(NET, "rank %d: net backend %s%s", c->rank, c->net->name(), all[c->rank].netChosen ? "" : " (probed)");
  return okStatus();
}

// The communicator's operation timeout (seconds, 0: none): its config's, else COLL_TIMEOUT_S.
static double opTimeoutOf(const CommOptions& o) {
  return o.timeoutMs >= 0 ? o.timeoutMs / 1000.0
                          : static_cast<double>(std::max<int64_t>(0, param(IntParam::TIMEOUT_S)));
}

// COLL_DETERMINISTIC: reductions only on the ring (allreduce, reduce-scatter) and the
// chain (reduce), whose per-element order is fixed by the block (the ring position that
// ends its chain, algorithms/ring.cc) whatever the channels, loops, slices, transport or
// executor. The one-shots combine in the same order when the ring is in rank order
// (oneshot.h), so they stay where it is; the tree combines in another, and compression
// rounds partial sums.
static void makeDeterministic(collComm* c) {
  bool rankOrder = true;
  for (int p = 0; p < c->nranks; ++p) rankOrder = rankOrder && c->ring.order[static_cast<size_t>(p)] == p;
  for (CollKind k : {CollKind::kAllReduce, CollKind::kReduce, CollKind::kReduceScatter}) {
    const int base = static_cast<int>(k) * 4;
    c->tuner.algos = (c->tuner.algos | AllowMask{1} << (base + static_cast<int>(Algo::kRing))) &
                     ~(AllowMask{1} << (base + static_cast<int>(Algo::kTree)));
    c->tuner.protos |= AllowMask{1} << (base + static_cast<int>(Proto::kSimple));
    if (!rankOrder) c->tuner.protos &= ~(AllowMask{1} << (base + static_cast<int>(Proto::kOneShot)));
  }
  if (c->rank == 0)
    COLL_INFO(INIT, "deterministic reductions: ring and chain%s; no tree or compression%s",
              rankOrder ? " and one-shot (the ring is in rank order)" : " only",
              c->compress != kEncodingNone ? " (COLL_COMPRESS/config->compress ignored)" : "");
  c->compress = kEncodingNone;
}

// From how many bytes device allreduces take the direct route (algorithms.h
// buildDirectAllReduce): where every rank is a thread of this process on one GPU (under
// emulation, host buffers: one process suffices) and no rank's lanes yield (the route's
// address table lives in the kernel's shared memory, which a rerun does not keep).
static size_t directMinBytes(const collComm* c, bool yields) {
  const int64_t min = param(IntParam::DEVICE_DIRECT_MIN_BYTES);
  if (min < 0 || yields || !directFits(c->nranks)) return SIZE_MAX;
  const auto& peers = c->bootstrap->peers();
  const PeerInfo& me = peers[static_cast<size_t>(c->rank)];
  for (const PeerInfo& p : peers) {
    if (!sameProcess(me, p) || (!c->dev.emulate && !sameGpu(me, p))) return SIZE_MAX;
  }
  return static_cast<size_t>(std::max<int64_t>(1, min));
}

// What the agreed settings make of c: slices, per-op limits, the device set's shape, the
// one-shot mailboxes.
static Status applyConfig(collComm* c, const std::vector<SharedConfig>& all, bool overNet, bool oneHost) {
  const SharedConfig& agreed = all[static_cast<size_t>(c->rank)];
  // Slots are 64-byte multiples so every element type divides them.
  c->slotBytes = (static_cast<size_t>(agreed.buffSize) / kFifoSlots) & ~size_t{63};
  c->sliceBytes = c->slotBytes;
  c->dev.slotBytes = (static_cast<size_t>(agreed.deviceBuffSize) / kFifoSlots) & ~size_t{63};
  // Ring loops of 2 slices per block across the network, of kFifoSlots/2 within a host: over
  // TCP 2 beat 4 by 3-16 % at 1-32 MiB, over shared memory 4 beat 2 by 8-26 % at 256 KiB-4
  // MiB (docs/PERFORMANCE.md). Every rank sees the same hosts, so they agree.
  c->loopSlices = overNet ? 2 : kFifoSlots / 2;
  c->channelMinBytes = std::max<int64_t>(1, param(IntParam::CHUNK_MIN_BYTES));
  c->dev.channelMinBytes = std::max<int64_t>(1, param(IntParam::DEVICE_CHUNK_MIN_BYTES));
  c->stallWarnS = static_cast<double>(std::max<int64_t>(0, param(IntParam::STALL_WARN_S)));
  c->opTimeoutS = opTimeoutOf(c->options);
  c->spinNs = std::max<int64_t>(0, param(IntParam::SPIN_US)) * 1000;
  c->streamMinBytes = static_cast<size_t>(std::max<int64_t>(0, param(IntParam::STREAM_MIN_BYTES)));
  c->oneShot.netBytes = static_cast<size_t>(agreed.netOneShotBytes);
  c->compress = static_cast<uint8_t>(agreed.compress);  // collCompress_t values are Encodings
  if (agreed.deterministic) makeDeterministic(c);
  if (c->compress != kEncodingNone)
    COLL_INFO(INIT,
              "rank %d: compression on: fp32 allreduce, reduce-scatter (sum/avg), allgather and broadcast "
              "carry %s on the wire",
              c->rank, c->compress == kEncodingFp16 ? "fp16 with a power-of-two scale per 256 elements" : "bf16");
  c->dev.emulate = agreed.deviceEmulate != 0;
  // Every rank's kernel blocks must be resident together (they wait on each other): ranks
  // sharing a GPU divide its resident blocks, and every rank uses the smallest share.
  int32_t budget = kUnlimitedLanes;
  for (const SharedConfig& o : all) budget = std::min(budget, o.deviceLaneBudget);
  c->dev.laneBudget = budget;
  bool yields = false;
  for (const SharedConfig& o : all) yields |= o.deviceYields != 0;
  c->dev.stageBytes = yields ? static_cast<size_t>(agreed.deviceStageBytes) : 0;
  if (c->dev.stageBytes > 0) c->dev.oneShot = &c->oneShot;
  c->dev.directMinBytes = directMinBytes(c, yields);
  c->dev.exchangeBytes = static_cast<size_t>(agreed.deviceExchangeBytes);
  const DeviceShape shape = deviceShape(c->nranks, budget, agreed.deviceChannels);
  c->dev.channels = shape.channels;
  c->dev.peerLanes = shape.peerLanes;
  if (c->nranks > 1 && agreed.oneShotBytes > 0 && agreed.shmDisable == 0 && oneHost) {
    COLL_ASSIGN(c->oneShot.mailboxes, Mailboxes::create(c->bootstrap.get(), static_cast<size_t>(agreed.oneShotBytes),
                                                        kTagMailbox, agreed.direct));
    c->oneShot.directOn = c->oneShot.mailboxes && c->oneShot.mailboxes->directOk();
  }
  if (c->nranks > 1 && c->dev.stageBytes > 0) {
    COLL_ASSIGN(c->dev.copyAgent, CopyAgent::create(c->dev));
  }
  return okStatus();
}

// The ring's order and this rank's neighbours in it.
static void initRing(collComm* c) { c->ring = RingLayout(ringOrder(c->bootstrap->peers()), c->rank); }

// Connects the host set's ring channels, and for two ranks over a duplex-capable transport
// the LL connection (OneShotState::pair).
static Status connectRing(collComm* c, const SharedConfig& agreed, int nch) {
  auto& channels = c->hostConns.channels;
  ConnectJob job(c->bootstrap.get(), c->slotBytes, false, false, c->net);
  for (int ch = 0; ch < nch; ++ch) {
    job.addRecv(c->ring.prev, kTagRing | static_cast<uint64_t>(ch), &channels[ch].recv);
    job.addSend(c->ring.next, kTagRing | static_cast<uint64_t>(ch), &channels[ch].send);
  }
  const auto& peers = c->bootstrap->peers();
  if (c->nranks == 2 && agreed.netDuplex && agreed.netOneShotBytes > 0 &&
      transportTable()[chooseTransport(peers[c->rank], peers[c->ring.next])]->duplex) {
    job.addRecv(c->ring.prev, kTagOneShotPair, &c->oneShot.pair.recv);
    job.addSend(c->ring.next, kTagOneShotPair, &c->oneShot.pair.send);
  }
  COLL_CHECK(job.run());
  COLL_INFO(INIT, "rank %d/%d: ring %d -> %d -> %d over %s/%s, %d channel(s), %zu-byte slices", c->rank, c->nranks,
            c->ring.prev, c->rank, c->ring.next, channels[0].recv->kind(), channels[0].send->kind(), nch,
            c->sliceBytes);
  return okStatus();
}

static Status initConnections(collComm* c) {
  COLL_CHECK(initTopology(c));
  const bool shmDisable = param(IntParam::SHM_DISABLE) != 0, oneHost = allOnOneHost(c);
  const bool overNet = shmDisable || !oneHost;
  // collConfig_t's minCTAs bounds the channels where given.
  const CommOptions& o = c->options;
  const int64_t minCh = std::clamp<int64_t>(o.minChannels > 0 ? o.minChannels : param(IntParam::MIN_NCHANNELS), 1,
                                            kMaxChannels);
  COLL_ASSIGN(SharedConfig mine, localConfig(c, shmDisable, overNet, minCh));
  COLL_ASSIGN(std::vector<SharedConfig> all, agreeConfig(c, mine));
  initRing(c);  // from the peers alone; makeDeterministic reads it
  COLL_CHECK(applyConfig(c, all, overNet, oneHost));
  COLL_CHECK(agreeNet(c, all));
  const int nch = c->nranks > 1 ? mine.nChannels : 1;
  c->minChannels = static_cast<int>(std::min<int64_t>(minCh, nch));
  c->hostConns.channels.resize(nch);
  initTrees(c, nch, shmDisable);
  if (c->nranks == 1) return okStatus();
  return connectRing(c, mine, nch);
}

// Where this rank's GPU sits in its host's best GPU ring (graph.h gpuRingPosition), from
// the machine's topology: COLL_TOPO_FILE merged with the probe, or the probe (hwloc,
// NVML). Every rank of a host sees the same machine, so they agree; and since the ring
// order is computed from what all ranks sent, even ranks that do not agree build one ring.
// Topologies are kept per process (by COLL_TOPO_FILE): threads as ranks probe once.
// -1 (bus order) when the topology cannot be had or does not show this GPU.
[[maybe_unused]] static int hostGpuRingPos(int rank, const std::string& busId) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<Topology>> topos;  // by COLL_TOPO_FILE; null: failed
  std::lock_guard<std::mutex> lock(mu);
  const std::string file = param(StringParam::TOPO_FILE);
  auto it = topos.find(file);
  if (it == topos.end()) {
    std::string origin;
    Result<std::unique_ptr<Topology>> t = loadSystemTopology(&origin);
    if (!t.ok())
      COLL_INFO(GRAPH, "rank %d: no topology for the GPU ring (%s): GPUs in bus order", rank,
                t.status().message().c_str());
    it = topos.emplace(file, t.ok() ? t.take() : nullptr).first;
  }
  if (!it->second) return -1;
  const int pos = gpuRingPosition(*it->second, busId);
  COLL_INFO(GRAPH, "rank %d: GPU %s is %d in this host's GPU ring of %zu", rank, busId.c_str(), pos,
            it->second->gpus().size());
  return pos;
}

namespace {

// The banner, once per process, at COLL_DEBUG=VERSION or INFO (NCCL's rule).
void logBanner() {
  static std::once_flag versionOnce;
  std::call_once(versionOnce, [] {
    COLL_LOG_(LogLevel::kVersion, INIT, "Collectives version %d.%d.%d (NCCL API %d.%d.%d)", COLL_MAJOR, COLL_MINOR,
              COLL_PATCH, kNcclMajor, kNcclMinor, kNcclPatch);
  });
}

std::unique_ptr<collComm> commMake(int nranks, int rank, int cudaDev, const CommOptions& opts) {
  auto comm = std::make_unique<collComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->options = opts;
  comm->abort = std::make_shared<AbortState>();
  // The device part reads the core and the ring through references, fixed from now on.
  DeviceComm& d = comm->dev;
  d.owner = comm.get();
  d.core = comm.get();
  d.ring = &comm->ring;
  d.cudaDev = cudaDev;
  d.timing = param(IntParam::DEVICE_TIMING) != 0;
  return comm;
}

// What a profiler plugin is told of the communicator.
ProfilerIdentity profilerIdentity(const collComm* c) {
  return {c->commHash, c->options.name, c->tuner.hosts, c->nranks, c->rank};
}

// Joins the rendezvous and connects: everything init does after the struct exists.
Status commJoin(collComm* comm, const UniqueIdData& id) {
  LogContext logCtx(comm->rank, comm->options.name);
  PeerInfo self{};
  std::snprintf(self.hostId, sizeof(self.hostId), "%s", localHostId().c_str());
  std::snprintf(self.hostname, sizeof(self.hostname), "%s", localHostName().c_str());
  self.pid = getpid();
  self.cudaDev = comm->dev.cudaDev;
#if COLL_HAVE_CUDA
  if (comm->dev.cudaDev >= 0) {
    std::snprintf(self.busId, sizeof(self.busId), "%s", gpu::busIdOf(comm->dev.cudaDev).c_str());
    self.ringPos = hostGpuRingPos(comm->rank, self.busId);
  }
#endif
  Sha256 idHash;
  idHash.update(&id, sizeof(id));
  std::memcpy(&comm->commHash, idHash.digest().data(), sizeof(comm->commHash));
  // The operation timeout bounds the rendezvous too (COLL_BOOTSTRAP_TIMEOUT_S where less).
  COLL_ASSIGN(comm->bootstrap,
              Bootstrap::create(id, comm->rank, comm->nranks, self, comm->abort, opTimeoutOf(comm->options)));
  watchInit(comm);
  Status st = initConnections(comm);
  if (st.ok()) st = devicePrepare(comm->dev);
  if (st.ok() && comm->nranks > 1) comm->tunerPlugin = TunerPluginComm::open(comm->commHash, &comm->tuner);
  if (!st.ok()) {
    st.prefix("rank " + std::to_string(comm->rank) + " init: ");
    // Where this failure echoes another rank's (a refused connection), the root names that
    // rank; otherwise the others, which may wait for this rank's connections, must fail
    // now, naming it.
    Status cause = rootCause(*comm->abort, st);
    if (!comm->abort->raised() && !comm->abort->peerGone.load())
      comm->bootstrap->announceFailure(st.message().substr(0, st.message().find('\n')));
    comm->bootstrap->leave();
    return cause;
  }
  comm->profiler.attach(profilerIdentity(comm));
  if (!comm->options.name.empty())
    COLL_INFO(INIT, "rank %d/%d: communicator \"%s\" ready", comm->rank, comm->nranks, comm->options.name.c_str());
  return okStatus();
}

}  // namespace

Result<collComm*> commInit(const UniqueIdData& id, int nranks, int rank, int cudaDev, const CommOptions& opts) {
  logBanner();
  auto comm = commMake(nranks, rank, cudaDev, opts);
  COLL_CHECK(commJoin(comm.get(), id));
  collComm* c = comm.release();
  registerComm(c);
  return c;
}

collComm* commInitAsync(const UniqueIdData& id, int nranks, int rank, int cudaDev, const CommOptions& opts) {
  logBanner();
  collComm* c = commMake(nranks, rank, cudaDev, opts).release();
  c->initState.store(collInProgress);
  registerComm(c);
  c->initThread = std::thread([c, id] {
#if COLL_HAVE_CUDA
    if (c->dev.cudaDev >= 0) (void)gpu::setDevice(c->dev.cudaDev);
#endif
    Status st = commJoin(c, id);
    if (!st.ok()) c->abort->set(st.code(), st.message());
    c->initState.store(st.result(), std::memory_order_release);
  });
  return c;
}

void commFree(collComm* comm, bool clean) {
  comm->abort->closing.store(true);  // a shrink's rendezvous in another thread gives up
  retireComm(comm);
  if (comm->initThread.joinable()) {
    // A non-blocking init still running gives up (its waits watch the abort flag).
    if (comm->initState.load() == collInProgress)
      comm->abort->set(Code::kInvalidUsage, "communicator freed before its init completed");
    comm->initThread.join();
  }
  // Device work still queued or running ends first (told to give up when aborting).
  if (comm->dev.proxy) comm->dev.proxy->quiesce(!clean || comm->abort->raised());
  comm->profiler.detach();  // after the last operation's events
  if (comm->bootstrap && clean) comm->bootstrap->leave();
  delete comm;
}

Result<collComm*> commSplit(collComm* comm, int color, int key, const CommOptions& opts) {
  struct Entry {
    int32_t color, key;
  };
  std::vector<Entry> all(comm->nranks);
  all[comm->rank] = {color, key};
  uint64_t tag = kTagSplit | (comm->mgmtSeq++ << 8);
  // A communicator revoked while healthy may still be split (NCCL's rule): every rank is
  // alive, so the rendezvous runs despite the revoked state. One that failed may not.
  const bool revoked = comm->revoked.load();
  COLL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Entry), tag, revoked));
  if (color < 0) return static_cast<collComm*>(nullptr);
  std::vector<int> members;
  for (int r = 0; r < comm->nranks; ++r)
    if (all[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[a].key < all[b].key; });
  int newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
  int n = static_cast<int>(members.size());
  // The new communicator's key is derived by every member from this one's: the id the
  // leader sends (over connections that are authenticated, not encrypted) carries none.
  const AuthKey childKey = childAuthKey(comm->bootstrap->authKey(), tag, color);
  UniqueIdData id{};
  if (newRank == 0) {
    // A fresh root in the leader's process; COLL_COMM_ID is for the top-level comm only.
    SockAddr at = comm->bootstrap->peers()[comm->rank].bootAddr;
    COLL_ASSIGN(id, startRootAt(at, &childKey));
    id.key = {};
    for (int i = 1; i < n; ++i) COLL_CHECK(comm->bootstrap->send(members[i], tag | 1, &id, sizeof(id), revoked));
  } else {
    COLL_CHECK(comm->bootstrap->recv(members[0], tag | 1, &id, sizeof(id), revoked));
  }
  id.key = childKey;
  return commInit(id, n, newRank, comm->dev.cudaDev, opts);
}

namespace {

// The grown communicator's key: every rank of comm derives it, so the id that goes from
// the rank that made it to the others carries none; new ranks read it from the id.
AuthKey growKey(const collComm* comm) {
  return childAuthKey(comm->bootstrap->authKey(), kTagGrow, static_cast<int64_t>(comm->grows));
}

}  // namespace

Result<UniqueIdData> commGrowId(collComm* comm) {
  if (comm->growIdPending)
    return invalidUsage("rank " + std::to_string(comm->rank) +
                        " made a grow id that no collCommGrow has used yet: one grow at a time");
  const AuthKey key = growKey(comm);
  COLL_ASSIGN(UniqueIdData id, startRootAt(comm->bootstrap->peers()[comm->rank].bootAddr, &key));
  comm->growIdPending = true;
  return id;
}

Result<collComm*> commGrow(collComm* comm, int nranks, const UniqueIdData* id, const CommOptions& opts) {
  struct Entry {
    uint32_t holds;
    UniqueIdData id;
  };
  std::vector<Entry> all(static_cast<size_t>(comm->nranks), Entry{});
  Entry& mine = all[static_cast<size_t>(comm->rank)];
  if (id) mine = {1, *id};
  mine.id.key = {};
  const bool held = comm->growIdPending;
  comm->growIdPending = false;  // used (or failed) by this grow either way
  COLL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Entry), kTagGrow | (comm->mgmtSeq++ << 8)));
  std::vector<int> holders;
  for (int r = 0; r < comm->nranks; ++r)
    if (all[static_cast<size_t>(r)].holds) holders.push_back(r);
  if (holders.size() != 1)
    return invalidUsage(std::to_string(holders.size()) +
                        " ranks of the communicator passed a uniqueId: exactly one must (the rank whose "
                        "collCommGetUniqueId made it), the others NULL");
  if (holders[0] == comm->rank && !held)
    return invalidUsage("rank " + std::to_string(comm->rank) +
                        " passed a uniqueId its collCommGetUniqueId did not make (or one already used)");
  UniqueIdData grown = all[static_cast<size_t>(holders[0])].id;
  grown.key = growKey(comm);
  ++comm->grows;
  return commInit(grown, nranks, comm->rank, comm->dev.cudaDev, opts);
}

namespace {

// One rank's part of a symmetric window, for its peers to map.
struct WindowEntry {
  uint64_t remote, bytes, offset, allocBytes;
  int32_t pid, fd;  // fd -1: not in shareable memory
};

// Maps every peer's part of all (this rank's own needs none). Empty: all mapped; else why not.
std::string mapWindowParts(const collComm* comm, const std::vector<WindowEntry>& all, SharedWindow* w) {
  for (int r = 0; r < comm->nranks; ++r) {
    const WindowEntry& e = all[static_cast<size_t>(r)];
    WindowPart& part = w->parts[static_cast<size_t>(r)];
    part = {e.remote, e.bytes, nullptr};
    if (e.pid == getpid()) {  // this rank, or a thread of this process: plain addresses
      part.local = reinterpret_cast<const char*>(e.remote);
      continue;
    }
    if (e.fd < 0) return "rank " + std::to_string(r) + "'s part is not host memory from collMemAlloc";
    if (e.offset > e.allocBytes || e.bytes > e.allocBytes - e.offset)
      return "rank " + std::to_string(r) + "'s part lies outside its allocation";
    Result<std::shared_ptr<const PeerMapping>> m = PeerMapping::map(e.pid, e.fd, e.allocBytes);
    if (!m.ok()) return "mapping rank " + std::to_string(r) + "'s part: " + m.status().message();
    part.local = m.value()->base() + e.offset;
    w->maps.push_back(m.take());
  }
  return "";
}

// The second half of a symmetric window's agreement: every rank maps every peer's part,
// and the window is shared only where all of them could (the same answer on every rank).
Result<uint64_t> shareWindow(collComm* comm, const void* buff, size_t bytes) {
  OneShotState& os = comm->oneShot;
  const uint64_t id = ++os.windowsAgreed;
  if (!os.mailboxes || !os.mailboxes->peersReadable()) return uint64_t{0};  // the same on every rank
  const size_t n = static_cast<size_t>(comm->nranks);
  std::vector<WindowEntry> all(n);
  WindowEntry& mine = all[static_cast<size_t>(comm->rank)];
  mine = {reinterpret_cast<uintptr_t>(buff), bytes, 0, 0, static_cast<int32_t>(getpid()), -1};
  if (auto span = comm->dev.cudaDev < 0 ? sharedSpanOf(buff, bytes) : std::nullopt) {
    mine.offset = span->offset;
    mine.allocBytes = span->allocBytes;
    mine.fd = span->fd;
  }
  COLL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(WindowEntry), kTagWindow | (comm->mgmtSeq++ << 8)));
  auto w = std::make_shared<SharedWindow>();
  w->id = id;
  w->parts.resize(n);
  const std::string why = mapWindowParts(comm, all, w.get());
  std::vector<int32_t> oks(n);
  oks[static_cast<size_t>(comm->rank)] = why.empty() ? 1 : 0;
  COLL_CHECK(comm->bootstrap->allGather(oks.data(), sizeof(int32_t), kTagWindow | (comm->mgmtSeq++ << 8)));
  for (size_t r = 0; r < n; ++r) {
    if (oks[r]) continue;
    COLL_INFO(SHM,
              "rank %d: symmetric window %llu is not mapped by every rank (%s); operations read it as other memory",
              comm->rank, static_cast<unsigned long long>(id),
              why.empty() ? ("rank " + std::to_string(r) + " could not map a part").c_str() : why.c_str());
    return uint64_t{0};
  }
  os.windows.add(std::move(w));
  os.directOn = true;  // the mailboxes' peersReadable: buffers outside windows read with readPeer
  COLL_INFO(SHM, "rank %d: symmetric window %llu of %zu bytes mapped by every rank; large operations read it directly",
            comm->rank, static_cast<unsigned long long>(id), bytes);
  return id;
}

}  // namespace

Result<uint64_t> commAgreeWindow(collComm* comm, const void* buff, size_t bytes, const std::string& localError) {
  struct Entry {
    uint64_t bytes;
    uint64_t ok;
  };
  std::vector<Entry> all(static_cast<size_t>(comm->nranks));
  all[static_cast<size_t>(comm->rank)] = {bytes, localError.empty() ? 1u : 0u};
  COLL_CHECK(comm->bootstrap->allGather(all.data(), sizeof(Entry), kTagWindow | (comm->mgmtSeq++ << 8)));
  if (!localError.empty()) return invalidArgument(localError);
  for (int r = 0; r < comm->nranks; ++r) {
    const Entry& e = all[static_cast<size_t>(r)];
    if (!e.ok) return invalidUsage("symmetric window: rank " + std::to_string(r) + " refused its own arguments");
    if (e.bytes != bytes)
      return invalidUsage("symmetric window: rank " + std::to_string(r) + " registered " + std::to_string(e.bytes) +
                          " bytes, this rank " + std::to_string(bytes));
  }
  return shareWindow(comm, buff, bytes);
}

Result<collComm*> commShrink(collComm* comm, const std::vector<int>& exclude, const CommOptions& opts) {
  std::vector<int> members;
  for (int r = 0; r < comm->nranks; ++r)
    if (std::find(exclude.begin(), exclude.end(), r) == exclude.end()) members.push_back(r);
  const int n = static_cast<int>(members.size());
  const int newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
  // Only survivors take part, so nothing collective over comm can be used: the first
  // survivor starts a fresh root and tells the others its id, point to point, even if
  // comm has failed (the dead ranks are not asked).
  const uint64_t tag = kTagShrink | (comm->shrinks++ << 8);
  const AuthKey childKey = childAuthKey(comm->bootstrap->authKey(), tag, 0);  // as commSplit's
  UniqueIdData id{};
  if (newRank == 0) {
    COLL_ASSIGN(id, startRootAt(comm->bootstrap->peers()[comm->rank].bootAddr, &childKey));
    id.key = {};
    for (int i = 1; i < n; ++i) COLL_CHECK(comm->bootstrap->send(members[i], tag, &id, sizeof(id), true));
  } else {
    Status st = comm->bootstrap->recv(members[0], tag, &id, sizeof(id), true);
    if (!st.ok())
      return st.prefix("shrink: no word from rank " + std::to_string(members[0]) +
                       ", the first rank that stays (is it alive, and did it call collCommShrink with the same "
                       "exclude list?): ");
  }
  id.key = childKey;
  return commInit(id, n, newRank, comm->dev.cudaDev, opts);
}

}  // namespace coll

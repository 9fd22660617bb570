#include "profiler/profiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>

#include "base/log.h"
#include "base/param.h"
#include "base/plugin_lib.h"

namespace coll {

using namespace profabi;

// A loaded table: `table` points at the library's ncclProfiler_v<version>.
struct ProfilerPlugin {
  int version = 0;
  const void* table = nullptr;
  std::string name;  // the table's name
  std::string path;  // the library
};

namespace {

// The members every version's table has, in the same places (profiler_abi.h): a name
// and five functions whose signatures differ per version.
struct AnyTable {
  const char* name;
  void* functions[5];
};

// Finds the newest table in lib; null (and *why) when there is none or it is incomplete.
std::unique_ptr<ProfilerPlugin> findTable(const PluginLib& lib, std::string* why) {
  for (int v = 6; v >= 1; --v) {
    const std::string symbol = "ncclProfiler_v" + std::to_string(v);
    const auto* t = static_cast<const AnyTable*>(dlsym(lib.handle, symbol.c_str()));
    if (!t) continue;
    static const char* const kMembers[] = {"init", "startEvent", "stopEvent", "recordEventState", "finalize"};
    if (!t->name) {
      *why = symbol + " has no name";
      return nullptr;
    }
    for (int i = 0; i < 5; ++i)
      if (!t->functions[i]) {
        *why = symbol + " (" + t->name + ") has no " + kMembers[i] + " function";
        return nullptr;
      }
    auto p = std::make_unique<ProfilerPlugin>();
    p->version = v;
    p->table = t;
    p->name = t->name;
    p->path = lib.path;
    return p;
  }
  *why = "it exports none of ncclProfiler_v6 ... ncclProfiler_v1";
  return nullptr;
}

// The plugin `spec` names, loaded once per process (null: none usable, said once). A
// process may name another library for later communicators; none is ever closed.
const ProfilerPlugin* pluginFor(const std::string& spec) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<ProfilerPlugin>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(spec);
  if (it != loaded.end()) return it->second.get();
  std::unique_ptr<ProfilerPlugin> plugin;
  Result<PluginLib> lib = openPluginLib("profiler", spec);
  if (!lib.ok()) {
    COLL_INFO(INIT, "no profiler plugin: %s", lib.status().message().c_str());
  } else {
    std::string why;
    plugin = findTable(lib.value(), &why);
    if (plugin)
      COLL_INFO(INIT, "profiler plugin %s (v%d) from %s", plugin->name.c_str(), plugin->version, plugin->path.c_str());
    else COLL_WARN(INIT, "profiler plugin %s not used: %s", lib.value().path.c_str(), why.c_str());
  }
  return loaded.emplace(spec, std::move(plugin)).first->second.get();
}

// The highest event type bit each version knows.
uint64_t typesOf(int version) {
  switch (version) {
    case 1:
    case 2: return kEvGroup | kEvColl | kEvP2p | kEvProxyOp | kEvProxyStep | kEvProxyCtrl;
    case 3:
    case 4: return kEvGroup | kEvColl | kEvP2p | kEvProxyOp | kEvProxyStep | kEvProxyCtrl | kEvKernelCh | kEvNetPlugin;
    case 5: return (kEvKernelLaunch << 1) - 1;
    default: return (kEvCeBatch << 1) - 1;
  }
}

// Whether a version knows a state.
bool knowsState(int version, EventState s) {
  if (version <= 3) return s >= kStProxyStepSendGpuWait && s <= kStProxyCtrlAppendEnd;
  if (version == 4) return s >= kStProxyStepSendGpuWait && s <= kStKernelChStop;
  return true;
}

// The fields of proxy and kernel events, alike in every version that has them.
template <class Old>
void copyProxy(const DescrV6& d, Old& o) {
  if (d.type == kEvProxyOp) {
    o.proxyOp.pid = d.proxyOp.pid;
    o.proxyOp.channelId = d.proxyOp.channelId;
    o.proxyOp.peer = d.proxyOp.peer;
    o.proxyOp.nSteps = d.proxyOp.nSteps;
    o.proxyOp.chunkSize = d.proxyOp.chunkSize;
    o.proxyOp.isSend = d.proxyOp.isSend;
  } else if (d.type == kEvProxyStep) {
    o.proxyStep.step = d.proxyStep.step;
  }
}

// v1's numbers for NCCL's names.
uint8_t algoNumber(const char* a) { return std::strcmp(a, "TREE") == 0 ? 0 : 1; }
uint8_t protoNumber(const char* p) { return std::strcmp(p, "LL") == 0 ? 0 : std::strcmp(p, "LL128") == 0 ? 1 : 2; }
uint8_t funcNumber(const char* f) {
  for (int i = 0; i < kProfFuncs; ++i)
    if (std::strcmp(profFuncName(static_cast<ProfFunc>(i)), f) == 0) return static_cast<uint8_t>(i);
  return 0;
}
// ncclDataType_t's names, by value (our collDataType_t values are NCCL's).
constexpr const char* kTypeNames[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                      "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                      "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
uint8_t typeNumber(const char* t) {
  for (size_t i = 0; i < std::size(kTypeNames); ++i)
    if (std::strcmp(kTypeNames[i], t) == 0) return static_cast<uint8_t>(i);
  return 0;
}

// The v2 and v3 collective and p2p fields (v3 dropped trafficBytes).
template <class Old>
void copyTasksV2(const DescrV6& d, const ProfilerIdentity& id, Old& o) {
  if (d.type == kEvColl) {
    o.parentObj = d.coll.parentGroup;
    o.coll.name = id.name.c_str();
    o.coll.commHash = id.commHash;
    o.coll.seqNumber = d.coll.seqNumber;
    o.coll.func = d.coll.func;
    o.coll.sendBuff = d.coll.sendBuff;
    o.coll.recvBuff = d.coll.recvBuff;
    o.coll.count = d.coll.count;
    o.coll.root = d.coll.root;
    o.coll.datatype = d.coll.datatype;
    o.coll.nMaxChannels = d.coll.nChannels;
    o.coll.nWarps = d.coll.nWarps;
    o.coll.algo = d.coll.algo;
    o.coll.proto = d.coll.proto;
  } else if (d.type == kEvP2p) {
    o.parentObj = d.p2p.parentGroup;
    o.p2p.name = id.name.c_str();
    o.p2p.commHash = id.commHash;
    o.p2p.func = d.p2p.func;
    o.p2p.buff = d.p2p.buff;
    o.p2p.datatype = d.p2p.datatype;
    o.p2p.count = d.p2p.count;
    o.p2p.peer = d.p2p.peer;
  }
}

DescrV1 toV1(const DescrV6& d, const ProfilerIdentity& id) {
  DescrV1 o{};
  o.type = static_cast<uint8_t>(d.type);
  o.parentObj = d.parentObj;
  o.rank = d.rank;
  copyProxy(d, o);
  if (d.type == kEvColl) {
    o.parentObj = d.coll.parentGroup;
    o.coll.name = id.name.c_str();
    o.coll.commHash = id.commHash;
    o.coll.seqNumber = d.coll.seqNumber;
    o.coll.func = funcNumber(d.coll.func);
    o.coll.sendBuff = d.coll.sendBuff;
    o.coll.recvBuff = d.coll.recvBuff;
    o.coll.count = d.coll.count;
    o.coll.root = d.coll.root;
    o.coll.datatype = typeNumber(d.coll.datatype);
    o.coll.nMaxChannels = d.coll.nChannels;
    o.coll.nWarps = d.coll.nWarps;
    o.coll.algo = algoNumber(d.coll.algo);
    o.coll.proto = protoNumber(d.coll.proto);
  } else if (d.type == kEvP2p) {
    o.parentObj = d.p2p.parentGroup;
    o.p2p.name = id.name.c_str();
    o.p2p.commHash = id.commHash;
    o.p2p.func = funcNumber(d.p2p.func);
    o.p2p.buff = d.p2p.buff;
    o.p2p.datatype = typeNumber(d.p2p.datatype);
    o.p2p.count = d.p2p.count;
    o.p2p.peer = d.p2p.peer;
  }
  return o;
}

template <class Old>
Old toV2orV3(const DescrV6& d, const ProfilerIdentity& id) {
  Old o{};
  o.type = static_cast<uint8_t>(d.type);
  o.parentObj = d.parentObj;
  o.rank = d.rank;
  copyProxy(d, o);
  copyTasksV2(d, id, o);
  if constexpr (std::is_same_v<Old, DescrV3>) {
    if (d.type == kEvKernelCh) o.kernelCh.channelId = d.kernelCh.channelId;
    if (d.type == kEvNetPlugin) {
      o.netPlugin.id = d.netPlugin.id;
      o.netPlugin.data = d.netPlugin.data;
    }
  }
  return o;
}

DescrV4 toV4(const DescrV6& d) {
  DescrV4 o{};
  o.type = static_cast<uint8_t>(d.type);
  o.parentObj = d.parentObj;
  o.rank = d.rank;
  copyProxy(d, o);
  if (d.type == kEvColl) {
    o.parentObj = d.coll.parentGroup;
    o.coll.seqNumber = d.coll.seqNumber;
    o.coll.func = d.coll.func;
    o.coll.sendBuff = d.coll.sendBuff;
    o.coll.recvBuff = d.coll.recvBuff;
    o.coll.count = d.coll.count;
    o.coll.root = d.coll.root;
    o.coll.datatype = d.coll.datatype;
    o.coll.nChannels = d.coll.nChannels;
    o.coll.nWarps = d.coll.nWarps;
    o.coll.algo = d.coll.algo;
    o.coll.proto = d.coll.proto;
  } else if (d.type == kEvP2p) {
    o.parentObj = d.p2p.parentGroup;
    o.p2p.func = d.p2p.func;
    o.p2p.buff = d.p2p.buff;
    o.p2p.datatype = d.p2p.datatype;
    o.p2p.count = d.p2p.count;
    o.p2p.peer = d.p2p.peer;
    o.p2p.nChannels = d.p2p.nChannels;
  } else if (d.type == kEvKernelCh) {
    o.kernelCh.channelId = d.kernelCh.channelId;
    o.kernelCh.pTimer = d.kernelCh.pTimer;
  } else if (d.type == kEvNetPlugin) {
    o.netPlugin.id = d.netPlugin.id;
    o.netPlugin.data = d.netPlugin.data;
  }
  return o;
}

// v5's descriptor is v6's without the copy-engine members: the same bytes up to its size.
static_assert(offsetof(DescrV5, coll) == offsetof(DescrV6, coll) && sizeof(DescrV5) <= sizeof(DescrV6));
DescrV5 toV5(const DescrV6& d) {
  DescrV5 o;
  std::memcpy(static_cast<void*>(&o), &d, sizeof(o));
  return o;
}

template <class Table, class Descr>
void* startWith(const void* table, void* context, Descr descr) {
  void* event = nullptr;
  static_cast<const Table*>(table)->startEvent(context, &event, &descr);
  return event;
}

}  // namespace

const char* profFuncName(ProfFunc f) {
  switch (f) {
    case ProfFunc::kBroadcast: return "Broadcast";
    case ProfFunc::kReduce: return "Reduce";
    case ProfFunc::kAllGather: return "AllGather";
    case ProfFunc::kReduceScatter: return "ReduceScatter";
    case ProfFunc::kAllReduce: return "AllReduce";
    case ProfFunc::kSend: return "Send";
    case ProfFunc::kRecv: return "Recv";
  }
  return "Invalid";
}

const char* profTypeName(int dtype) {
  return dtype >= 0 && static_cast<size_t>(dtype) < std::size(kTypeNames) ? kTypeNames[dtype] : "Unknown";
}

uint64_t profTimerNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Profiler::attach(const ProfilerIdentity& id) {
  const char* spec = paramRaw(StringParam::PROFILER_PLUGIN);
  if (pluginDisabled(spec)) return;
  const ProfilerPlugin* p = pluginFor(spec ? spec : "");
  if (!p) return;
  id_ = id;
  int rc = kProfSuccess;
  const char* name = id_.name.c_str();
  switch (p->version) {
    case 1:
    case 2:
    case 3: rc = static_cast<const TableV1*>(p->table)->init(&context_, &mask_); break;
    case 4:
      rc = static_cast<const TableV4*>(p->table)->init(&context_, &mask_, name, id.commHash, id.nNodes, id.nranks,
                                                       id.rank, pluginLog);
      break;
    default:
      rc = static_cast<const TableV5*>(p->table)->init(&context_, id.commHash, &mask_, name, id.nNodes, id.nranks,
                                                       id.rank, pluginLog);
      break;
  }
  if (rc != kProfSuccess) {
    COLL_WARN(INIT, "rank %d: profiler plugin %s (%s) init failed with error %d; running without a profiler", id.rank,
              p->name.c_str(), p->path.c_str(), rc);
    context_ = nullptr;
    mask_ = 0;
    return;
  }
  COLL_INFO(INIT, "rank %d: profiler %s (v%d) active, event mask 0x%x", id.rank, p->name.c_str(), p->version,
            std::atomic_ref<int>(mask_).load(std::memory_order_relaxed));
  plugin_ = p;
}

void Profiler::detach() {
  const ProfilerPlugin* p = plugin_;
  if (!p) return;
  plugin_ = nullptr;  // nothing starts from here on
  // finalize has one signature in every version.
  static_cast<const TableV4*>(p->table)->finalize(context_);
  context_ = nullptr;
}

void* Profiler::start(DescrV6& d) {
  const ProfilerPlugin* p = plugin_;
  if (!p || (d.type & typesOf(p->version)) == 0) return nullptr;
  d.rank = id_.rank;
  switch (p->version) {
    case 1: return startWith<TableV1>(p->table, context_, toV1(d, id_));
    case 2: return startWith<TableV2>(p->table, context_, toV2orV3<DescrV2>(d, id_));
    case 3: return startWith<TableV3>(p->table, context_, toV2orV3<DescrV3>(d, id_));
    case 4: return startWith<TableV4>(p->table, context_, toV4(d));
    case 5: return startWith<TableV5>(p->table, context_, toV5(d));
    default: return startWith<TableV6>(p->table, context_, d);
  }
}

void Profiler::stop(void* event) {
  const ProfilerPlugin* p = plugin_;
  if (!p || !event) return;
  static_cast<const TableV4*>(p->table)->stopEvent(event);  // one signature in every version
}

void Profiler::record(void* event, EventState state, const StateArgsV4& args) {
  const ProfilerPlugin* p = plugin_;
  if (!p || !event || !knowsState(p->version, state)) return;
  if (p->version <= 3) {
    StateArgsV1 old{};
    if (state >= kStProxyCtrlIdle) old.proxyCtrl.appendedProxyOps = args.proxyCtrl.appendedProxyOps;
    static_cast<const TableV1*>(p->table)->recordEventState(event, state, &old);
    return;
  }
  StateArgsV4 copy = args;
  static_cast<const TableV4*>(p->table)->recordEventState(event, state, &copy);
}

}  // namespace coll

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
std::unique_ptr<ProfilerPlugin> findTable(const PluginHandle& lib, std::string* why) {
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
  Result<PluginHandle> lib = openPluginLib("profiler", spec);
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

// The event types each version knows.
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

// A name as the field takes it: v1's number, or the string from v2 on.
template <class Field>
void setName(Field& field, const char* name, uint8_t (*number)(const char*)) {
  if constexpr (std::is_same_v<Field, uint8_t>) field = number(name);
  else field = name;
}

// Up to v3 a collective or p2p carries the communicator's name and hash.
template <class Fields>
void copyComm(const ProfilerIdentity& id, Fields& f) {
  if constexpr (requires { f.commHash; }) {
    f.name = id.name.c_str();
    f.commHash = id.commHash;
  }
}

// Up to v4 a collective or p2p hangs under its Group event.
template <class Old>
void copyColl(const DescrV6& d, const ProfilerIdentity& id, Old& o) {
  auto& c = o.coll;
  o.parentObj = d.coll.parentGroup;
  copyComm(id, c);
  c.seqNumber = d.coll.seqNumber;
  setName(c.func, d.coll.func, funcNumber);
  c.sendBuff = d.coll.sendBuff;
  c.recvBuff = d.coll.recvBuff;
  c.count = d.coll.count;
  c.root = d.coll.root;
  setName(c.datatype, d.coll.datatype, typeNumber);
  if constexpr (requires { c.nMaxChannels; }) c.nMaxChannels = d.coll.nChannels;
  else c.nChannels = d.coll.nChannels;
  c.nWarps = d.coll.nWarps;
  setName(c.algo, d.coll.algo, algoNumber);
  setName(c.proto, d.coll.proto, protoNumber);
}

template <class Old>
void copyP2p(const DescrV6& d, const ProfilerIdentity& id, Old& o) {
  auto& p = o.p2p;
  o.parentObj = d.p2p.parentGroup;
  copyComm(id, p);
  setName(p.func, d.p2p.func, funcNumber);
  p.buff = d.p2p.buff;
  setName(p.datatype, d.p2p.datatype, typeNumber);
  p.count = d.p2p.count;
  p.peer = d.p2p.peer;
  if constexpr (requires { p.nChannels; }) p.nChannels = d.p2p.nChannels;
}

// Our event in the layout of v1 to v4 (start() has dropped the types Old lacks).
template <class Old>
Old convert(const DescrV6& d, const ProfilerIdentity& id) {
  Old o{};
  o.type = static_cast<uint8_t>(d.type);
  o.parentObj = d.parentObj;
  o.rank = d.rank;
  if (d.type == kEvColl) copyColl(d, id, o);
  if (d.type == kEvP2p) copyP2p(d, id, o);
  if (d.type == kEvProxyOp) o.proxyOp = d.proxyOp;
  if (d.type == kEvProxyStep) o.proxyStep = d.proxyStep;
  if constexpr (requires { o.kernelCh; }) {
    if (d.type == kEvKernelCh) o.kernelCh.channelId = d.kernelCh.channelId;
    if constexpr (requires { o.kernelCh.pTimer; })
      if (d.type == kEvKernelCh) o.kernelCh.pTimer = d.kernelCh.pTimer;
  }
  if constexpr (requires { o.netPlugin; })
    if (d.type == kEvNetPlugin) o.netPlugin = d.netPlugin;
  return o;
}

// v5's descriptor is v6's without the copy-engine members: the same bytes up to its size.
static_assert(sizeof(DescrV5) <= sizeof(DescrV6) && alignof(DescrV5) == alignof(DescrV6));
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
    case ProfFunc::kPeerSend: return "Send";
    case ProfFunc::kPeerRecv: return "Recv";
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
    case 1: return startWith<TableV1>(p->table, context_, convert<DescrV1>(d, id_));
    case 2: return startWith<TableV2>(p->table, context_, convert<DescrV2>(d, id_));
    case 3: return startWith<TableV3>(p->table, context_, convert<DescrV3>(d, id_));
    case 4: return startWith<TableV4>(p->table, context_, convert<DescrV4>(d, id_));
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

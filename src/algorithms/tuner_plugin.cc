#include "algorithms/tuner_plugin.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstring>
#include <map>
#include <mutex>

#include "algorithms/tuner_plugin_abi.h"
#include "base/log.h"
#include "base/param.h"
#include "base/plugin_lib.h"

namespace coll {

using namespace tunerabi;

struct TunerLib {
  int version;
  const void* table;
  std::string path;
  const char* name;
  template <typename T>
  const T& as() const {
    return *static_cast<const T*>(table);
  }
};

namespace {

struct Symbol {
  int version;
  const char* name;
};
constexpr Symbol kSymbols[] = {{7, "ncclTunerPlugin_v7"}, {6, "ncclTunerPlugin_v6"}, {5, "ncclTunerPlugin_v5"},
                               {4, "ncclTunerPlugin_v4"}, {3, "ncclTunerPlugin_v3"}, {2, "ncclTunerPlugin_v2"}};

void tunerLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pluginLogV(kSubTUNING, level, flags, file, line, fmt, ap);
  va_end(ap);
}

// The member a table leaves null that we need (getChunkSize is optional), or null.
template <typename T>
const char* missingMember(const T& t) {
  if (!t.name) return "name";
  if (!t.init) return "init";
  if (!t.getCollInfo) return "getCollInfo";
  if constexpr (requires { t.destroy; }) return t.destroy ? nullptr : "destroy";
  else return t.finalize ? nullptr : "finalize";
}

const char* missingMember(const TunerLib& l) {
  switch (l.version) {
    case 2: return missingMember(l.as<TunerV2>());
    case 3: return missingMember(l.as<TunerV3>());
    case 4: return missingMember(l.as<TunerV4>());
    case 5: return missingMember(l.as<TunerV5>());
    case 6: return missingMember(l.as<TunerV6>());
    default: return missingMember(l.as<TunerV7>());
  }
}

// The newest table the library exports, or why it has none we can use.
Result<TunerLib*> tableOf(const PluginHandle& lib) {
  for (const Symbol& s : kSymbols) {
    const void* t = dlsym(lib.handle, s.name);
    if (!t) continue;
    auto* l = new TunerLib{s.version, t, lib.path, nullptr};
    if (const char* member = missingMember(*l)) {
      delete l;
      return invalidUsage("tuner plugin " + lib.path + ": " + s.name + " leaves " + member + " null");
    }
    l->name = l->as<TunerV2>().name;  // the first member in every version
    return l;
  }
  return invalidUsage("tuner plugin " + lib.path +
                      " exports none of ncclTunerPlugin_v7 to ncclTunerPlugin_v2 (the versions supported)");
}

// The library the parameters name: NCCL_TUNER_PLUGIN, or with none named, libnccl-tuner.so
// and then the net plugin's library (a net plugin may carry a tuner). Null with a message
// (*why) and whether it deserves a warning (a plugin named but unusable).
Result<TunerLib*> findTuner(const std::string& spec, bool* named) {
  *named = !spec.empty();
  Result<PluginHandle> lib = openPluginLib("tuner", spec);
  if (!lib.ok() && spec.empty()) {
    const char* net = paramRaw(StringParam::NET_PLUGIN);
    if (pluginDisabled(net)) return lib.takeStatus();
    Result<PluginHandle> netLib = openPluginLib("net", net ? net : "");
    if (!netLib.ok()) return lib.takeStatus();
    Result<TunerLib*> t = tableOf(netLib.value());
    if (!t.ok()) return Status(Code::kInvalidUsage, "no tuner plugin: " + lib.status().message());
    return t;
  }
  if (!lib.ok()) return lib.takeStatus();
  return tableOf(lib.value());
}

// The loaded tuner for the current NCCL_TUNER_PLUGIN (and, where that is unset,
// NCCL_NET_PLUGIN): one per value, never unloaded (a process may name another between
// communicators), or null.
const TunerLib* loadedTuner() {
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, const TunerLib*>();
  const char* raw = paramRaw(StringParam::TUNER_PLUGIN);
  if (pluginDisabled(raw)) return nullptr;
  const std::string spec = raw ? raw : "";
  const char* net = paramRaw(StringParam::NET_PLUGIN);
  const std::string key = spec + (spec.empty() && net ? std::string("|net:") + net : "");
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded->find(key); it != loaded->end()) return it->second;
  bool named = false;
  Result<TunerLib*> r = findTuner(spec, &named);
  const TunerLib* lib = r.ok() ? r.value() : nullptr;
  if (lib) COLL_INFO(TUNING, "tuner plugin %s loaded (%s): ABI v%d", lib->name, lib->path.c_str(), lib->version);
  else if (named)
    COLL_WARN(TUNING, "NCCL_TUNER_PLUGIN=\"%s\": %s; tuning without a plugin", spec.c_str(),
              r.status().message().c_str());
  else COLL_INFO(TUNING, "no tuner plugin: %s", r.status().message().c_str());
  (*loaded)[key] = lib;
  return lib;
}

// Our constants in NCCL's table (see tuner_plugin.h), and back.
template <int N>
void putConstants(const TunerInput& in, Constants<N>* k) {
  std::memset(k, 0, sizeof(*k));
  for (int a : {kAlgoTree, kAlgoRing}) {
    k->hwLatencies[kLinkNvlink][a][kProtoSimple] = in.hopUs;
    k->hwLatencies[kLinkPci][a][kProtoSimple] = in.hopUs;
    k->hwLatencies[kLinkNet][a][kProtoSimple] = in.netHopUs;
  }
  k->baseLatencies[kAlgoRing][kProtoLL] = in.oneShotUs;
}

template <int N>
void takeConstants(const Constants<N>& k, TunerInput* in) {
  auto take = [](double v, double* to) {
    if (v > 0) *to = v;
  };
  take(k.hwLatencies[kLinkPci][kAlgoRing][kProtoSimple], &in->hopUs);
  take(k.hwLatencies[kLinkNet][kAlgoRing][kProtoSimple], &in->netHopUs);
  take(k.baseLatencies[kAlgoRing][kProtoLL], &in->oneShotUs);
}

template <typename T, int N>
int initWithConstants(const T& t, void** ctx, uint64_t commId, TunerInput* in) {
  Constants<N> k;
  putConstants(*in, &k);
  NvlDomains nvl{in->hosts, in->minRanksPerHost, in->maxRanksPerHost};
  int r = t.init(ctx, commId, static_cast<size_t>(in->nranks), static_cast<size_t>(in->hosts), tunerLog, &nvl, &k);
  if (r == 0) takeConstants(k, in);
  return r;
}

int initContext(const TunerLib& l, void** ctx, uint64_t commId, TunerInput* in) {
  const auto n = static_cast<size_t>(in->nranks), h = static_cast<size_t>(in->hosts);
  switch (l.version) {
    case 2: return l.as<TunerV2>().init(n, h, tunerLog, ctx);
    case 3: return l.as<TunerV3>().init(n, h, tunerLog, ctx);
    case 4: return l.as<TunerV4>().init(n, h, tunerLog, ctx);
    case 5: return initWithConstants<TunerV5, 4>(l.as<TunerV5>(), ctx, commId, in);
    case 6: return initWithConstants<TunerV6, 4>(l.as<TunerV6>(), ctx, commId, in);
    default: return initWithConstants<TunerV7, 5>(l.as<TunerV7>(), ctx, commId, in);
  }
}

int funcOf(CollKind k) {
  switch (k) {
    case CollKind::kAllReduce: return kFuncAllReduce;
    case CollKind::kBroadcast: return kFuncBroadcast;
    case CollKind::kReduce: return kFuncReduce;
    case CollKind::kAllGather: return kFuncAllGather;
    case CollKind::kReduceScatter: return kFuncReduceScatter;
    case CollKind::kPeerSend: return kFuncSend;
    default: return kFuncRecv;
  }
}

int algoIndex(Algo a) { return a == Algo::kTree ? kAlgoTree : kAlgoRing; }
int protoIndex(Proto p) { return p == Proto::kOneShot ? kProtoLL : kProtoSimple; }

}  // namespace

std::unique_ptr<TunerPluginComm> TunerPluginComm::open(uint64_t commId, TunerInput* in) {
  const TunerLib* lib = loadedTuner();
  if (!lib) return nullptr;
  void* ctx = nullptr;
  if (int r = initContext(*lib, &ctx, commId, in); r != 0) {
    COLL_WARN(TUNING, "tuner plugin %s (%s): init returned error %d; this communicator tunes without it", lib->name,
              lib->path.c_str(), r);
    return nullptr;
  }
  return std::unique_ptr<TunerPluginComm>(new TunerPluginComm(lib, ctx));
}

TunerPluginComm::~TunerPluginComm() {
  const TunerLib& l = *lib_;
  switch (l.version) {
    case 2: l.as<TunerV2>().destroy(context_); break;
    case 3: l.as<TunerV3>().destroy(context_); break;
    case 4: l.as<TunerV4>().destroy(context_); break;
    case 5: l.as<TunerV5>().finalize(context_); break;
    case 6: l.as<TunerV6>().finalize(context_); break;
    default: l.as<TunerV7>().finalize(context_); break;
  }
}

const char* TunerPluginComm::name() const { return lib_->name; }
int TunerPluginComm::version() const { return lib_->version; }

int TunerPluginComm::collInfo(float (*table)[3], CollKind kind, size_t bytes, int numPipeOps, int* channels) {
  const TunerLib& l = *lib_;
  auto** t = reinterpret_cast<float**>(table);  // NCCL passes its 2-D table so
  const int f = funcOf(kind);
  switch (l.version) {
    case 2: {
      int algo = -1, proto = -1;
      int r = l.as<TunerV2>().getCollInfo(context_, f, bytes, 0, 0, numPipeOps, &algo, &proto, channels);
      // Version 2 names its choice: it becomes the cheapest entry (where it may run).
      if (r == 0 && algo >= 0 && algo < kTableAlgos && proto >= 0 && proto < kTableProtos &&
          table[algo][proto] != kIgnore)
        table[algo][proto] = 0.0f;
      return r;
    }
    case 3: return l.as<TunerV3>().getCollInfo(context_, f, bytes, numPipeOps, t, kTableAlgos, kTableProtos, channels);
    case 4:
      return l.as<TunerV4>().getCollInfo(context_, f, bytes, numPipeOps, t, kTableAlgos, kTableProtos, 0, channels);
    case 5:
      return l.as<TunerV5>().getCollInfo(context_, f, bytes, numPipeOps, t, kTableAlgos, kTableProtos, 0, channels);
    case 6:
      return l.as<TunerV6>().getCollInfo(context_, f, bytes, numPipeOps, t, kTableAlgos, kTableProtos, 0, channels);
    default:
      return l.as<TunerV7>().getCollInfo(context_, f, bytes, numPipeOps, t, kTableAlgos, kTableProtos, 0, channels);
  }
}

Result<TunerPluginComm::Decision> TunerPluginComm::decide(const TunerInput& in, CollKind kind, size_t bytes,
                                                          int oneShotApplies, int numPipeOps, int maxChannels,
                                                          size_t sliceBytes) {
  Decision d;
  COLL_ASSIGN(d.choice, tunerChoose(in, kind, bytes, oneShotApplies));  // ours, and the error where none is allowed
  const std::vector<Choice> candidates = tunerCandidates(in, kind, bytes, oneShotApplies);
  float table[kTableAlgos][kTableProtos];
  for (auto& row : table)
    for (float& v : row) v = kIgnore;
  for (const Choice& c : candidates) table[algoIndex(c.algo)][protoIndex(c.proto)] = static_cast<float>(c.us);
  float before[kTableAlgos][kTableProtos];
  std::memcpy(before, table, sizeof(table));
  int channels = 0;
  if (int r = collInfo(table, kind, bytes, numPipeOps, &channels); r != 0) {
    if (!warned_)
      COLL_WARN(TUNING, "tuner plugin %s: getCollInfo returned error %d for %s of %zu bytes; using our own choice",
                name(), r, collKindName(kind), bytes);
    warned_ = true;
    return d;
  }
  if (std::memcmp(before, table, sizeof(table)) != 0) {
    // The cheapest entry among those we can run (a cost the plugin put on another entry,
    // or on one the filters rule out, is not ours to take).
    const Choice* best = nullptr;
    for (const Choice& c : candidates) {
      const float v = table[algoIndex(c.algo)][protoIndex(c.proto)];
      if (v >= 0 && (!best || v < table[algoIndex(best->algo)][protoIndex(best->proto)])) best = &c;
    }
    if (best) d.choice = *best;
  }
  d.channels = std::clamp(channels, 0, maxChannels);
  const TunerLib& l = *lib_;
  const GetChunkSize chunkFn = l.version == 6   ? l.as<TunerV6>().getChunkSize
                               : l.version >= 7 ? l.as<TunerV7>().getChunkSize
                                                : nullptr;
  size_t chunk = sliceBytes;
  if (chunkFn &&
      chunkFn(context_, funcOf(kind), bytes, algoIndex(d.choice.algo), protoIndex(d.choice.proto),
              d.channels > 0 ? d.channels : maxChannels, &chunk) == 0 &&
      chunk != sliceBytes)
    d.chunkBytes = chunk;
  return d;
}

}  // namespace coll

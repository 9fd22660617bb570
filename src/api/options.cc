#include "api/options.h"

#include <strings.h>

#include <cstddef>
#include <mutex>
#include <set>
#include <string>

#include "algorithms/tuner.h"
#include "base/log.h"
#include "transport/connector_set.h"
#include "transport/net/net.h"

namespace coll::api {

namespace {

// The oldest config layout accepted: NCCL 2.14's, the first with ncclConfig_t (its
// fields are a prefix of today's; later versions only appended).
constexpr unsigned kOldestConfigVersion = 21400;
constexpr size_t kSmallestConfig = offsetof(collConfig_t, minCTAs);

// Whether the field at `offset` is inside a config of `size` bytes.
bool has(const collConfig_t* c, size_t offset, size_t width) { return offset + width <= c->size; }

void noteUnused(const char* field, int value) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mu);
  if (!said.insert(field).second) return;
  COLL_INFO(INIT, "config %s=%d accepted; this library has no use for it (logged once)", field, value);
}

Status checkHeader(const collConfig_t* c) {
  if (c->size < kSmallestConfig || c->size > sizeof(collConfig_t))
    return invalidArgument("config->size " + std::to_string(c->size) + " is not the size of a config (" +
                           std::to_string(kSmallestConfig) + ".." + std::to_string(sizeof(collConfig_t)) +
                           " bytes): start from COLL_CONFIG_INITIALIZER / NCCL_CONFIG_INITIALIZER");
  if (c->magic != COLL_CONFIG_MAGIC) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", c->magic);
    return invalidArgument(std::string("config->magic ") + hex +
                           " is wrong (uninitialized config?): start from COLL_CONFIG_INITIALIZER / "
                           "NCCL_CONFIG_INITIALIZER");
  }
  if (c->version < kOldestConfigVersion || c->version > COLL_CONFIG_VERSION)
    return invalidArgument("config->version " + std::to_string(c->version) + " is not a config version (" +
                           std::to_string(kOldestConfigVersion) + ".." + std::to_string(COLL_CONFIG_VERSION) + ")");
  return okStatus();
}

}  // namespace

Result<CommOptions> optionsFromConfig(const collConfig_t* c, const CommOptions* inherit) {
  CommOptions o = inherit ? *inherit : CommOptions{};
  if (!c) return o;
  COLL_CHECK(checkHeader(c));
  const int undef = COLL_CONFIG_UNDEF_INT;
#define COLL_CFG_INT(field) (has(c, offsetof(collConfig_t, field), sizeof(int)) ? c->field : undef)
#define COLL_CFG_PTR(field) (has(c, offsetof(collConfig_t, field), sizeof(void*)) ? c->field : nullptr)
  const int blocking = COLL_CFG_INT(blocking);
  if (blocking != undef && blocking != 0 && blocking != 1)
    return invalidArgument("config->blocking " + std::to_string(blocking) + " is not 0 or 1");
  if (blocking != undef) o.blocking = blocking == 1;
  // NCCL's treatment: values above the channel limit are capped, and a minimum above the
  // maximum raised the maximum to it; both said at INFO. Below 1 is an error.
  int minCTAs = COLL_CFG_INT(minCTAs), maxCTAs = COLL_CFG_INT(maxCTAs);
  for (auto [name, v] : {std::pair<const char*, int*>{"minCTAs", &minCTAs}, {"maxCTAs", &maxCTAs}}) {
    if (*v == undef) continue;
    if (*v < 1) return invalidArgument(std::string("config->") + name + " " + std::to_string(*v) + " is below 1");
    if (*v > kMaxChannels) {
      COLL_INFO(INIT, "config %s=%d capped at %d channels", name, *v, kMaxChannels);
      *v = kMaxChannels;
    }
  }
  if (minCTAs != undef && maxCTAs != undef && minCTAs > maxCTAs) {
    COLL_INFO(INIT, "config minCTAs=%d is above maxCTAs=%d: maxCTAs raised to it", minCTAs, maxCTAs);
    maxCTAs = minCTAs;
  }
  if (minCTAs != undef) o.minChannels = minCTAs;
  if (maxCTAs != undef) o.maxChannels = maxCTAs;
  if (const char* net = COLL_CFG_PTR(netName)) {
    COLL_CHECK(checkNetName(net).prefix("config->netName: "));
    o.netName = net;
  }
  if (const char* name = COLL_CFG_PTR(commName)) o.name = name;
  const int compress = COLL_CFG_INT(compress);
  if (compress != undef && (compress < collCompressNone || compress > collCompressBfloat16))
    return invalidArgument("config->compress " + std::to_string(compress) +
                           " is not collCompressNone, collCompressFloat16 or collCompressBfloat16");
  if (compress != undef) o.compress = compress;
  const int deterministic = COLL_CFG_INT(deterministic);
  if (deterministic != undef && deterministic != 0 && deterministic != 1)
    return invalidArgument("config->deterministic " + std::to_string(deterministic) + " is not 0 or 1");
  if (deterministic != undef) o.deterministic = deterministic;
  const int timeoutMs = COLL_CFG_INT(timeoutMs);
  if (timeoutMs != undef && timeoutMs < 0)
    return invalidArgument("config->timeoutMs " + std::to_string(timeoutMs) + " is negative (0: no limit)");
  if (timeoutMs != undef) o.timeoutMs = timeoutMs;
  // Children never share a parent's connections here, which NCCL allows for any config.
  const struct {
    const char* name;
    int value;
  } unused[] = {{"cgaClusterSize", COLL_CFG_INT(cgaClusterSize)},
                {"splitShare", COLL_CFG_INT(splitShare)},
                {"trafficClass", COLL_CFG_INT(trafficClass)},
                {"collnetEnable", COLL_CFG_INT(collnetEnable)},
                {"CTAPolicy", COLL_CFG_INT(CTAPolicy)},
                {"shrinkShare", COLL_CFG_INT(shrinkShare)},
                {"nvlsCTAs", COLL_CFG_INT(nvlsCTAs)},
                {"nChannelsPerNetPeer", COLL_CFG_INT(nChannelsPerNetPeer)},
                {"nvlinkCentricSched", COLL_CFG_INT(nvlinkCentricSched)}};
#undef COLL_CFG_INT
#undef COLL_CFG_PTR
  for (const auto& f : unused)
    if (f.value != undef) noteUnused(f.name, f.value);
  return o;
}

namespace {

constexpr unsigned kFirstCollConfigVersion = 23200;  // NCCL 2.32's, the first

Status checkCollConfigHeader(const collCollConfig_t* c) {
  if (c->size < offsetof(collCollConfig_t, minCTAs))
    return invalidArgument("config->size " + std::to_string(c->size) +
                           " is too small for a per-call config: start from COLL_COLLCONFIG_INITIALIZER / "
                           "NCCL_COLLCONFIG_INITIALIZER");
  if (c->magic != COLL_CONFIG_MAGIC || c->version < kFirstCollConfigVersion)
    return invalidArgument("config (magic " + std::to_string(c->magic) + ", version " + std::to_string(c->version) +
                           ") was not made from COLL_COLLCONFIG_INITIALIZER / NCCL_COLLCONFIG_INITIALIZER");
  return okStatus();
}

// minCTAs/maxCTAs within 1..the channels comm has for od's kind of buffers.
Status applyChannelBounds(int minCTAs, int maxCTAs, collComm* comm, OpDesc* od) {
  const int undef = COLL_CONFIG_UNDEF_INT;
  const ConnectorSet* conns = od->device ? comm->dev.conns.get() : &comm->hostConns;
  const int have = conns ? static_cast<int>(conns->channels.size()) : kMaxChannels;
  for (auto [name, v] : {std::pair<const char*, int>{"minCTAs", minCTAs}, {"maxCTAs", maxCTAs}})
    if (v != undef && (v < 1 || v > have))
      return invalidArgument(std::string("config->") + name + " " + std::to_string(v) + " is outside 1.." +
                             std::to_string(have) + " (the communicator's channels)");
  if (minCTAs != undef && maxCTAs != undef && minCTAs > maxCTAs)
    return invalidArgument("config->minCTAs " + std::to_string(minCTAs) + " is above config->maxCTAs " +
                           std::to_string(maxCTAs));
  if (minCTAs != undef) od->minChannels = minCTAs;
  if (maxCTAs != undef) od->maxChannels = maxCTAs;
  return okStatus();
}

}  // namespace

Status applyCollConfig(const collCollConfig_t* c, collComm* comm, OpDesc* od) {
  if (!c) return okStatus();
  COLL_CHECK(checkCollConfigHeader(c));
  auto has = [c](size_t offset, size_t width) { return offset + width <= c->size; };
  const int undef = COLL_CONFIG_UNDEF_INT;
#define COLL_CC(field, none) (has(offsetof(collCollConfig_t, field), sizeof(c->field)) ? c->field : (none))
  COLL_CHECK(applyChannelBounds(COLL_CC(minCTAs, undef), COLL_CC(maxCTAs, undef), comm, od));
  const int force = COLL_CC(forceAlgSelection, 1);
  if (force != 0 && force != 1)
    return invalidArgument("config->forceAlgSelection " + std::to_string(force) + " is not 0 or 1");
  od->forceAlgos = force == 1;
  if (const char* sel = COLL_CC(algSelection, nullptr); sel && *sel) {
    Result<uint64_t> mask = parseAlgoFilter(sel);
    if (!mask.ok())
      return invalidArgument(std::string("config->algSelection \"") + sel + "\": " + mask.status().message());
    od->algos = mask.value();
  }
  const int policy = COLL_CC(CTAPolicy, undef);
  constexpr int kPolicies = COLL_CTA_POLICY_EFFICIENCY | COLL_CTA_POLICY_ZERO;
  if (policy != undef && (policy & ~kPolicies) != 0)
    return invalidArgument("config->CTAPolicy " + std::to_string(policy) +
                           " is not a mask of COLL_CTA_POLICY_EFFICIENCY (1) and COLL_CTA_POLICY_ZERO (2)");
  if (COLL_CC(launchCompletionEvent, nullptr))
    return invalidUsage("config->launchCompletionEvent is not supported by this library: pass NULL");
  od->profilerTag = COLL_CC(userProfilerTag, uint64_t{0});
#undef COLL_CC
  return okStatus();
}

}  // namespace coll::api

// The NCCL drop-in: libnccl.so.2's entry points (NCCL 2.32), each a call of the coll API
// with the same meaning (collectives.h documents them; docs/NCCL.md lists the differences
// from NVIDIA's library). Nothing is implemented here that the coll API lacks: the
// handles, enums and structs have NCCL's values and layouts in both APIs (checked below),
// so this layer renames, reads an ncclConfig_t of any NCCL version into the coll API's
// config, and fills in NCCL's defaults where the two APIs differ (ncclBcast,
// ncclCommInitAll without a devlist). The calls this library cannot honour (one-sided
// signals, the device API's kernels: nccl_device.cc) fail with ncclInvalidUsage and a
// last error saying why. Every ncclX has a pncclX alias, as NCCL exports for profilers.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <strings.h>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/nccl/nccl.h"
#include "nccl/words.h"

namespace {

// collConfig_t begins with NCCL 2.28's ncclConfig_t (later NCCL versions append fields
// where collConfig_t has this library's own): ConfigIn copies that common part.
constexpr size_t kCommonConfig = offsetof(collConfig_t, compress);
static_assert(offsetof(ncclConfig_t, graphUsageMode) == kCommonConfig &&
              offsetof(ncclConfig_t, nvlinkCentricSched) == offsetof(collConfig_t, nvlinkCentricSched));
static_assert(offsetof(ncclConfig_t, netName) == offsetof(collConfig_t, netName) &&
              offsetof(ncclConfig_t, commName) == offsetof(collConfig_t, commName));
static_assert(sizeof(ncclCollConfig_t) == sizeof(collCollConfig_t) &&
              offsetof(ncclCollConfig_t, algSelection) == offsetof(collCollConfig_t, algSelection) &&
              offsetof(ncclCollConfig_t, userProfilerTag) == offsetof(collCollConfig_t, userProfilerTag) &&
              offsetof(ncclCollConfig_t, launchCompletionEvent) == offsetof(collCollConfig_t, launchCompletionEvent));
static_assert(sizeof(ncclSimInfo_t) == sizeof(collSimInfo_t) &&
              offsetof(ncclSimInfo_t, estimatedTime) == offsetof(collSimInfo_t, estimatedTime));
static_assert(sizeof(ncclUniqueId) == sizeof(collUniqueId));
static_assert(static_cast<int>(ncclNumTypes) == static_cast<int>(collNumTypes) &&
              static_cast<int>(ncclFloat8e5m2) == static_cast<int>(collFloat8e5m2));
static_assert(static_cast<int>(ncclNumOps) == static_cast<int>(collNumOps) &&
              static_cast<int>(ncclAvg) == static_cast<int>(collAvg));
static_assert(static_cast<int>(ncclInProgress) == static_cast<int>(collInProgress) &&
              static_cast<int>(ncclTimeout) == static_cast<int>(collTimeout) &&
              static_cast<int>(ncclScalarHostImmediate) == static_cast<int>(collScalarHostImmediate));
static_assert(static_cast<int>(ncclStatGpuMemTotal) == static_cast<int>(collStatGpuMemTotal) &&
              NCCL_SUSPEND_MEM == COLL_SUSPEND_MEM && NCCL_WIN_CFT_COUNTED == COLL_WIN_CFT_COUNTED);

ncclResult_t res(collResult_t r) { return static_cast<ncclResult_t>(r); }
collComm_t C(ncclComm_t c) { return reinterpret_cast<collComm_t>(c); }
collComm_t* C(ncclComm_t* c) { return reinterpret_cast<collComm_t*>(c); }
collDataType_t T(ncclDataType_t t) { return static_cast<collDataType_t>(t); }
collRedOp_t O(ncclRedOp_t o) { return static_cast<collRedOp_t>(o); }
const collCollConfig_t* CC(const ncclCollConfig_t* c) { return reinterpret_cast<const collCollConfig_t*>(c); }
collStream_t S(cudaStream_t s) { return reinterpret_cast<collStream_t>(s); }
collUniqueId Id(const ncclUniqueId& id) {
  collUniqueId out;
  std::memcpy(&out, &id, sizeof(out));
  return out;
}

// An ncclConfig_t of any NCCL version as the coll API's config: the part both layouts
// share is copied (a smaller, older config: what it has), the version capped at the one
// collConfig_t names, the coll API then checks size, magic and version. The fields NCCL
// added after 2.28 (graphUsageMode .. nvlsHostMode) have no use here (docs/NCCL.md).
// An ncclConfig_t of any NCCL version from 2.14 to this header's as the coll API's
// config (*use; NULL for none): the part both layouts share is copied (a smaller, older
// config: what it has), the version capped at the one collConfig_t names; the coll API
// then checks the fields. The fields NCCL added after 2.28 (graphUsageMode .. nvlsHostMode)
// have no use here (docs/NCCL.md). A size or version no NCCL header made is refused.
ncclResult_t readConfig(const char* fn, ncclComm_t comm, const ncclConfig_t* in, collConfig_t* out,
                        collConfig_t** use) {
  *use = nullptr;
  if (!in) return ncclSuccess;
  constexpr size_t kSmallest = offsetof(ncclConfig_t, minCTAs);
  char text[256] = "";
  if (in->size < kSmallest || in->size > sizeof(ncclConfig_t))
    std::snprintf(text, sizeof(text),
                  "%s: config->size %zu is not the size of an ncclConfig_t (%zu..%zu bytes): start from "
                  "NCCL_CONFIG_INITIALIZER",
                  fn, in->size, kSmallest, sizeof(ncclConfig_t));
  else if (in->version < NCCL_VERSION(2, 14, 0) || in->version > NCCL_VERSION_CODE)
    std::snprintf(text, sizeof(text),
                  "%s: config->version %u is not an NCCL version from 2.14 to %d: start from NCCL_CONFIG_INITIALIZER",
                  fn, in->version, NCCL_VERSION_CODE);
  if (text[0]) return res(collRecordError(C(comm), collInvalidArgument, text));
  *out = collConfig_t{};
  std::memcpy(out, in, std::min(in->size, kCommonConfig));
  out->size = std::min(in->size, kCommonConfig);
  out->version = std::min<unsigned>(in->version, COLL_CONFIG_VERSION);
  *use = out;
  return ncclSuccess;
}

// The config of call fn as the coll API's (`cfg`, `use`), or returns its error.
#define NCCL_READ_CONFIG(fn, comm, config) \
  collConfig_t cfg;                        \
  collConfig_t* use;                       \
  if (ncclResult_t bad = readConfig(fn, comm, config, &cfg, &use); bad != ncclSuccess) return bad

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

ncclResult_t ncclMemAlloc(void** ptr, size_t size) { return res(collMemAlloc(ptr, size)); }
ncclResult_t ncclMemFree(void* ptr) { return res(collMemFree(ptr)); }

// NCCL's ABI version: frameworks compare it to decide which calls exist.
ncclResult_t ncclGetVersion(int* version) {
  if (!version) return res(collGetVersion(nullptr));  // records the error text
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return res(collGetUniqueId(reinterpret_cast<collUniqueId*>(uniqueId)));
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  if (comm) *comm = nullptr;
  NCCL_READ_CONFIG("ncclCommInitRankConfig", nullptr, config);
  return res(collCommInitRankConfig(C(comm), nranks, Id(commId), rank, use));
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return res(collCommInitRank(C(comm), nranks, Id(commId), rank));
}

// NCCL binds rank i to device i when no devlist is given; where no CUDA device is usable
// (this library's host-memory ranks) the coll API's NULL devlist gives host ranks.
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  if (devlist || ndev < 1 || !comm) return res(collCommInitAll(C(comm), ndev, devlist));
  std::vector<int> devs(static_cast<size_t>(ndev));
  for (int i = 0; i < ndev; ++i) devs[static_cast<size_t>(i)] = i;
  int cudaDevices = 0;
  collResult_t r = collCudaDeviceCount(&cudaDevices);
  if (r != collSuccess) return res(r);
  return res(collCommInitAll(C(comm), ndev, cudaDevices > 0 ? devs.data() : nullptr));
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  if (newcomm) *newcomm = nullptr;
  NCCL_READ_CONFIG("ncclCommInitRankScalable", nullptr, config);
  return res(collCommInitRankScalable(C(newcomm), nranks, myrank, nId, reinterpret_cast<collUniqueId*>(commIds), use));
}

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  return res(collCommGetUniqueId(C(comm), reinterpret_cast<collUniqueId*>(uniqueId)));
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config) {
  if (newcomm) *newcomm = nullptr;
  NCCL_READ_CONFIG("ncclCommGrow", comm, config);
  return res(collCommGrow(C(comm), nRanks, reinterpret_cast<const collUniqueId*>(uniqueId), rank, C(newcomm), use));
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return res(collCommFinalize(C(comm))); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return res(collCommDestroy(C(comm))); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return res(collCommAbort(C(comm))); }
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) { return res(collCommRevoke(C(comm), revokeFlags)); }

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (newcomm) *newcomm = nullptr;
  NCCL_READ_CONFIG("ncclCommSplit", comm, config);
  return res(collCommSplit(C(comm), color, key, C(newcomm), use));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  if (newcomm) *newcomm = nullptr;
  NCCL_READ_CONFIG("ncclCommShrink", comm, config);
  return res(collCommShrink(C(comm), excludeRanksList, excludeRanksCount, C(newcomm), use, shrinkFlags));
}

// Our words for NCCL's codes, naming NCCL's calls.
const char* ncclGetErrorString(ncclResult_t result) {
  switch (static_cast<int>(result)) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "a CUDA call failed (ncclGetLastError says which)";
    case ncclSystemError: return "a system call or resource failed (ncclGetLastError says which)";
    case ncclInternalError: return "internal error of the library (please report it with ncclGetLastError's text)";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError names it and its value)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError says what was wrong)";
    case ncclRemoteError: return "a peer failed, left or disagreed (ncclGetLastError names it)";
    case ncclInProgress: return "operation in progress";
    case ncclTimeout: return "operation timed out (ncclGetLastError names what it waited for)";
    default: return "unknown ncclResult_t";
  }
}

// The text in NCCL's words, on one line, the rank first (the source locations it passed
// through only with NCCL_DEBUG=INFO or TRACE).
const char* ncclGetLastError(ncclComm_t comm) {
  const char* text = collGetLastError(C(comm));
  try {
    const std::string original = text;  // text may be the thread's, which the next call rewrites
    int rank = -1;
    if (comm) {
      // Asking a handle that is no communicator would record its own error: the thread's
      // text is put back.
      const std::string thread = collGetLastError(nullptr);
      if (collCommUserRank(C(comm), &rank) != collSuccess) {
        rank = -1;
        collRecordError(nullptr, collSuccess, thread.c_str());
      }
    }
    const char* level = nullptr;
    collParamGetParameter("DEBUG", &level, nullptr);
    const bool locations = level && (strcasecmp(level, "INFO") == 0 || strcasecmp(level, "TRACE") == 0);
    thread_local std::string words;
    words = coll::nccl::ncclWords(original, rank, locations);
    return words.c_str();
  } catch (...) {
    return text;
  }
}
void ncclResetDebugInit(void) { collResetDebugInit(); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  collResult_t async = collSuccess;
  collResult_t r = collCommGetAsyncError(C(comm), asyncError ? &async : nullptr);
  if (r == collSuccess) *asyncError = res(async);
  return res(r);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { return res(collCommCount(C(comm), count)); }
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) { return res(collCommCuDevice(C(comm), device)); }
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) { return res(collCommUserRank(C(comm), rank)); }

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return res(collCommRegister(C(comm), buff, size, handle));
}
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return res(collCommDeregister(C(comm), handle));
}
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  return res(collCommWindowRegister(C(comm), buff, size, reinterpret_cast<collWindow_t*>(win), winFlags));
}
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return res(collCommWindowDeregister(C(comm), reinterpret_cast<collWindow_t>(win)));
}
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return res(collWinGetUserPtr(C(comm), reinterpret_cast<collWindow_t>(win), outUserPtr));
}

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) { return res(collCommSuspend(C(comm), flags)); }
ncclResult_t ncclCommResume(ncclComm_t comm) { return res(collCommResume(C(comm))); }
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return res(collCommMemStats(C(comm), static_cast<collCommMemStat_t>(stat), value));
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  return res(collRedOpCreatePreMulSum(reinterpret_cast<collRedOp_t*>(op), scalar, T(datatype),
                                      static_cast<collScalarResidence_t>(residence), C(comm)));
}
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) { return res(collRedOpDestroy(O(op), C(comm))); }

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return res(collReduce(sendbuff, recvbuff, count, T(datatype), O(op), root, C(comm), S(stream)));
}
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  return res(collBroadcast(buff, buff, count, T(datatype), root, C(comm), S(stream)));
}
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return res(collBroadcast(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream)));
}
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return res(collAllReduce(sendbuff, recvbuff, count, T(datatype), O(op), C(comm), S(stream)));
}
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return res(collReduceScatter(sendbuff, recvbuff, recvcount, T(datatype), O(op), C(comm), S(stream)));
}
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return res(collAllGather(sendbuff, recvbuff, sendcount, T(datatype), C(comm), S(stream)));
}
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                          cudaStream_t stream) {
  return res(collAlltoAll(sendbuff, recvbuff, count, T(datatype), C(comm), S(stream)));
}
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return res(collGather(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream)));
}
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return res(collScatter(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream)));
}
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return res(collAllReduceConfig(sendbuff, recvbuff, count, T(datatype), O(op), C(comm), S(stream), CC(config)));
}
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return res(collBroadcastConfig(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream), CC(config)));
}
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                              const ncclCollConfig_t* config) {
  return res(collReduceConfig(sendbuff, recvbuff, count, T(datatype), O(op), root, C(comm), S(stream), CC(config)));
}
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return res(collAllGatherConfig(sendbuff, recvbuff, sendcount, T(datatype), C(comm), S(stream), CC(config)));
}
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                     const ncclCollConfig_t* config) {
  return res(collReduceScatterConfig(sendbuff, recvbuff, recvcount, T(datatype), O(op), C(comm), S(stream),
                                     CC(config)));
}
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return res(collAlltoAllConfig(sendbuff, recvbuff, count, T(datatype), C(comm), S(stream), CC(config)));
}
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                              ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return res(collGatherConfig(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream), CC(config)));
}
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config) {
  return res(collScatterConfig(sendbuff, recvbuff, count, T(datatype), root, C(comm), S(stream), CC(config)));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return res(collSend(sendbuff, count, T(datatype), peer, C(comm), S(stream)));
}
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return res(collRecv(recvbuff, count, T(datatype), peer, C(comm), S(stream)));
}

ncclResult_t ncclGroupStart(void) { return res(collGroupStart()); }
ncclResult_t ncclGroupEnd(void) { return res(collGroupEnd()); }
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  return res(collGroupSimulateEnd(reinterpret_cast<collSimInfo_t*>(simInfo)));
}

ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream) {
  return res(collPutSignal(localbuff, count, T(datatype), peer, reinterpret_cast<collWindow_t>(peerWin), peerWinOffset,
                           sigIdx, ctx, flags, C(comm), S(stream)));
}
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  return res(collSignal(peer, sigIdx, ctx, flags, C(comm), S(stream)));
}
static_assert(sizeof(ncclWaitSignalDesc_t) == sizeof(collWaitSignalDesc_t) &&
              offsetof(ncclWaitSignalDesc_t, ctx) == offsetof(collWaitSignalDesc_t, ctx));
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream) {
  return res(collWaitSignal(nDesc, reinterpret_cast<collWaitSignalDesc_t*>(signalDescs), C(comm), S(stream)));
}

// The connections are authenticated (NCCL_AUTH_KEY), never encrypted.
ncclResult_t ncclSetEncryption(const ncclEncryptionConfig_t* config) {
  if (!config) return res(collRecordError(nullptr, collInvalidArgument, "ncclSetEncryption: config is NULL"));
  if (config->size < offsetof(ncclEncryptionConfig_t, psk) || config->magic != NCCL_API_MAGIC)
    return res(collRecordError(nullptr, collInvalidArgument,
                               "ncclSetEncryption: config was not made from NCCL_ENCRYPTION_CONFIG_INITIALIZER"));
  if (config->mode == NCCL_ENCRYPTION_MODE_NONE) return ncclSuccess;
  const bool psk = config->mode == NCCL_ENCRYPTION_MODE_PSK;
  char text[256];
  std::snprintf(text, sizeof(text), "ncclSetEncryption: config->mode %d%s", config->mode,
                psk ? ": this library does not encrypt its traffic (its connections authenticate with "
                      "NCCL_AUTH_KEY); only NCCL_ENCRYPTION_MODE_NONE is accepted"
                    : " is not an ncclEncryptionMode_t");
  return res(collRecordError(nullptr, psk ? collInvalidUsage : collInvalidArgument, text));
}

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  return res(collParamBind(reinterpret_cast<collParamHandle_t*>(out), key));
}
#define NCCL_PARAM_GET(suffix, type)                                               \
  ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, type* out) {              \
    return res(collParamGet##suffix(reinterpret_cast<collParamHandle_t>(h), out)); \
  }
NCCL_PARAM_GET(I8, int8_t)
NCCL_PARAM_GET(I16, int16_t)
NCCL_PARAM_GET(I32, int32_t)
NCCL_PARAM_GET(I64, int64_t)
NCCL_PARAM_GET(U8, uint8_t)
NCCL_PARAM_GET(U16, uint16_t)
NCCL_PARAM_GET(U32, uint32_t)
NCCL_PARAM_GET(U64, uint64_t)
NCCL_PARAM_GET(Str, const char*)
#undef NCCL_PARAM_GET
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return res(collParamGet(reinterpret_cast<collParamHandle_t>(h), out, maxLen, len));
}
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  return res(collParamGetParameter(key, value, valueLen));
}
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  return res(collParamGetAllParameterKeys("NCCL_", table, tableLen));
}
void ncclParamDumpAll(void) { collParamDumpAll(); }

// The profiling names: the same functions under a second symbol.
#define PNCCL(ret, name, params) ret p##name params __attribute__((alias(#name)));
PNCCL(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size))
PNCCL(ncclResult_t, ncclMemFree, (void* ptr))
PNCCL(ncclResult_t, ncclGetVersion, (int* version))
PNCCL(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId))
PNCCL(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))
PNCCL(ncclResult_t, ncclCommInitRank, (ncclComm_t*, int, ncclUniqueId, int))
PNCCL(ncclResult_t, ncclCommInitAll, (ncclComm_t*, int, const int*))
PNCCL(ncclResult_t, ncclCommInitRankScalable, (ncclComm_t*, int, int, int, ncclUniqueId*, ncclConfig_t*))
PNCCL(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t, ncclUniqueId*))
PNCCL(ncclResult_t, ncclCommGrow, (ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*))
PNCCL(ncclResult_t, ncclCommFinalize, (ncclComm_t))
PNCCL(ncclResult_t, ncclCommDestroy, (ncclComm_t))
PNCCL(ncclResult_t, ncclCommAbort, (ncclComm_t))
PNCCL(ncclResult_t, ncclCommRevoke, (ncclComm_t, int))
PNCCL(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*))
PNCCL(ncclResult_t, ncclCommShrink, (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int))
PNCCL(const char*, ncclGetErrorString, (ncclResult_t))
PNCCL(const char*, ncclGetLastError, (ncclComm_t))
PNCCL(void, ncclResetDebugInit, (void))
PNCCL(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*))
PNCCL(ncclResult_t, ncclCommCount, (const ncclComm_t, int*))
PNCCL(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*))
PNCCL(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*))
PNCCL(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, size_t, void**))
PNCCL(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*))
PNCCL(ncclResult_t, ncclCommWindowRegister, (ncclComm_t, void*, size_t, ncclWindow_t*, int))
PNCCL(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t, ncclWindow_t))
PNCCL(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t, ncclWindow_t, void**))
PNCCL(ncclResult_t, ncclCommSuspend, (ncclComm_t, int))
PNCCL(ncclResult_t, ncclCommResume, (ncclComm_t))
PNCCL(ncclResult_t, ncclCommMemStats, (ncclComm_t, ncclCommMemStat_t, uint64_t*))
PNCCL(ncclResult_t, ncclRedOpCreatePreMulSum, (ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t))
PNCCL(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t, ncclComm_t))
PNCCL(ncclResult_t, ncclReduce,
      (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclBcast, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclBroadcast, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclAllReduce, (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclReduceScatter,
      (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclAllGather, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclAlltoAll, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclGather, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclScatter, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclAllReduceConfig,
      (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclBroadcastConfig,
      (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclReduceConfig,
      (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclAllGatherConfig,
      (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclReduceScatterConfig,
      (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclAlltoAllConfig,
      (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclGatherConfig,
      (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclScatterConfig,
      (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t, const ncclCollConfig_t*))
PNCCL(ncclResult_t, ncclSend, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclRecv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclGroupStart, (void))
PNCCL(ncclResult_t, ncclGroupEnd, (void))
PNCCL(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*))
PNCCL(ncclResult_t, ncclPutSignal,
      (const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int, unsigned int, ncclComm_t,
       cudaStream_t))
PNCCL(ncclResult_t, ncclSignal, (int, int, int, unsigned int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclWaitSignal, (int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t*))
PNCCL(ncclResult_t, ncclParamBind, (ncclParamHandle_t*, const char*))
PNCCL(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t, int8_t*))
PNCCL(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t, int16_t*))
PNCCL(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t, int32_t*))
PNCCL(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t, int64_t*))
PNCCL(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t, uint8_t*))
PNCCL(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t, uint16_t*))
PNCCL(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t, uint32_t*))
PNCCL(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t, uint64_t*))
PNCCL(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t, const char**))
PNCCL(ncclResult_t, ncclParamGet, (ncclParamHandle_t, void*, int, int*))
PNCCL(ncclResult_t, ncclParamGetParameter, (const char*, const char**, int*))
PNCCL(ncclResult_t, ncclParamGetAllParameterKeys, (const char***, int*))
PNCCL(void, ncclParamDumpAll, (void))
#undef PNCCL

}  // extern "C"
#pragma GCC visibility pop

// The NCCL drop-in: libnccl.so.2's entry points, each a call of the coll API with the
// same meaning (collectives.h documents them; docs/NCCL.md lists the differences from
// NVIDIA's library). Nothing is implemented here that the coll API lacks: the handles,
// enums and structs have NCCL's values and layouts in both APIs (checked below), so this
// layer only renames, maps collTimeout (which NCCL 2.28 lacks) and fills in NCCL's
// defaults where the two APIs differ (ncclBcast, ncclCommInitAll without a devlist).
// Every ncclX has a pncclX alias, as NCCL exports for profilers.
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/nccl/nccl.h"

namespace {

// collConfig_t is ncclConfig_t plus fields of this library's after it (config->size says
// which a caller has).
static_assert(offsetof(collConfig_t, compress) == sizeof(ncclConfig_t) &&
              offsetof(ncclConfig_t, nvlinkCentricSched) == offsetof(collConfig_t, nvlinkCentricSched));
static_assert(offsetof(ncclConfig_t, netName) == offsetof(collConfig_t, netName) &&
              offsetof(ncclConfig_t, commName) == offsetof(collConfig_t, commName));
static_assert(sizeof(ncclSimInfo_t) == sizeof(collSimInfo_t) &&
              offsetof(ncclSimInfo_t, estimatedTime) == offsetof(collSimInfo_t, estimatedTime));
static_assert(sizeof(ncclUniqueId) == sizeof(collUniqueId));
static_assert(static_cast<int>(ncclNumTypes) == static_cast<int>(collNumTypes) &&
              static_cast<int>(ncclFloat8e5m2) == static_cast<int>(collFloat8e5m2));
static_assert(static_cast<int>(ncclNumOps) == static_cast<int>(collNumOps) &&
              static_cast<int>(ncclAvg) == static_cast<int>(collAvg));
static_assert(static_cast<int>(ncclInProgress) == static_cast<int>(collInProgress) &&
              static_cast<int>(ncclScalarHostImmediate) == static_cast<int>(collScalarHostImmediate));

// Result codes are equal except collTimeout: NCCL reports a peer that never answered as a
// remote error.
ncclResult_t res(collResult_t r) { return r == collTimeout ? ncclRemoteError : static_cast<ncclResult_t>(r); }
collComm_t C(ncclComm_t c) { return reinterpret_cast<collComm_t>(c); }
collComm_t* C(ncclComm_t* c) { return reinterpret_cast<collComm_t*>(c); }
collDataType_t T(ncclDataType_t t) { return static_cast<collDataType_t>(t); }
collRedOp_t O(ncclRedOp_t o) { return static_cast<collRedOp_t>(o); }
collConfig_t* Cfg(ncclConfig_t* c) { return reinterpret_cast<collConfig_t*>(c); }
collStream_t S(cudaStream_t s) { return reinterpret_cast<collStream_t>(s); }
collUniqueId Id(const ncclUniqueId& id) {
  collUniqueId out;
  std::memcpy(&out, &id, sizeof(out));
  return out;
}

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
  return res(collCommInitRankConfig(C(comm), nranks, Id(commId), rank, Cfg(config)));
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
  return res(collCommInitRankScalable(C(newcomm), nranks, myrank, nId, reinterpret_cast<collUniqueId*>(commIds),
                                      Cfg(config)));
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return res(collCommFinalize(C(comm))); }
ncclResult_t ncclCommDestroy(ncclComm_t comm) { return res(collCommDestroy(C(comm))); }
ncclResult_t ncclCommAbort(ncclComm_t comm) { return res(collCommAbort(C(comm))); }
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) { return res(collCommRevoke(C(comm), revokeFlags)); }

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return res(collCommSplit(C(comm), color, key, C(newcomm), Cfg(config)));
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                            ncclConfig_t* config, int shrinkFlags) {
  return res(collCommShrink(C(comm), excludeRanksList, excludeRanksCount, C(newcomm), Cfg(config), shrinkFlags));
}

const char* ncclGetErrorString(ncclResult_t result) { return collGetErrorString(static_cast<collResult_t>(result)); }
// The text names the coll function that failed; an NCCL caller called the nccl one.
const char* ncclGetLastError(ncclComm_t comm) {
  const char* text = collGetLastError(C(comm));
  if (std::strncmp(text, "coll", 4) != 0) return text;
  try {
    thread_local std::string renamed;
    renamed = text;
    renamed.replace(0, 4, "nccl");
    return renamed.c_str();
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
PNCCL(ncclResult_t, ncclSend, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclRecv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
PNCCL(ncclResult_t, ncclGroupStart, (void))
PNCCL(ncclResult_t, ncclGroupEnd, (void))
PNCCL(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t*))
#undef PNCCL

}  // extern "C"
#pragma GCC visibility pop

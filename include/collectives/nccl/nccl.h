/*
 * nccl.h — the NCCL 2.32 C API as Collectives' drop-in (libnccl.so.2) implements it.
 *
 * Written for Collectives: the names, numeric values and struct layouts are NCCL
 * 2.32.3's, so a program compiled against this header or against NVIDIA's runs with
 * either library. Unlike NVIDIA's, this header needs no CUDA header (cudaStream_t is
 * declared opaquely when the CUDA runtime's types are not already in scope), so programs
 * for machines without GPUs build against it.
 *
 * Every function is a thin layer over the coll API of <collectives/collectives.h>, whose
 * comments say in detail what each call does; docs/NCCL.md lists, function by function,
 * where this library differs from NVIDIA's. In short: host-memory buffers are accepted
 * wherever NCCL takes device buffers (the call then completes before returning, or at the
 * outermost ncclGroupEnd), and device buffers behave as in NCCL (enqueued on the stream).
 *
 * Every function returns an ncclResult_t; on failure ncclGetLastError() names the
 * argument and its value, or the rank, operation and peer. A call this library cannot
 * honour (see docs/NCCL.md) returns ncclInvalidUsage and ncclGetLastError() says why.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 32
#define NCCL_PATCH 3
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 23203
/* Versions up to 2.8 were coded X*1000 + Y*100 + Z; later ones X*10000 + Y*100 + Z. */
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA runtime's stream and event types, unless cuda_runtime.h (driver_types.h)
 * already gave them. */
#ifndef __DRIVER_TYPES_H__
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
#endif

/* A communicator handle and a memory window handle: opaque. */
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/* What ncclGetUniqueId() makes and every rank passes to init: the rendezvous root's
 * address and a secret. Copy it to the other ranks as plain bytes. */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,     /* a system call or resource failed */
  ncclInternalError = 3,   /* a bug in the library */
  ncclInvalidArgument = 4, /* ncclGetLastError() names the argument */
  ncclInvalidUsage = 5,    /* a call in the wrong state */
  ncclRemoteError = 6,     /* a peer failed, left, timed out or disagreed */
  ncclInProgress = 7,      /* non-blocking communicators: not finished yet */
  ncclTimeout = 8,         /* an operation did not finish within the communicator's timeout */
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
/* The magic of every versioned struct's initializer. */
#define NCCL_API_MAGIC 0xcafebeef

/* ncclCommWindowRegister() flags (accepted; windows are plain registrations here), and
 * the alignment windows need. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_GIN_ONLY 0x04
#define NCCL_WIN_CFT_COUNTED 0x08
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values (accepted; see ncclConfig_t). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink() flags: DEFAULT shrinks a healthy (or revoked) parent; ABORT first
 * stops the parent's operations in flight, as after a rank died. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke() flags: none yet, pass 0. */
#define NCCL_REVOKE_DEFAULT 0x00

/* ncclConfig_t.hostCftMode and .nvlsHostMode values (NVLink fabric features: accepted). */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;
typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* Communicator options. Start from NCCL_CONFIG_INITIALIZER (size, magic and version
 * must be its values, or init refuses the config) and set fields; those left undefined
 * take defaults. Honoured here: blocking (0: init returns ncclInProgress and completes
 * in the background; poll ncclCommGetAsyncError), minCTAs/maxCTAs (bounds on channels),
 * netName (the net backend), commName (printed in the communicator's log lines),
 * splitShare/shrinkShare (accepted; children never share the parent's connections).
 * The rest are accepted and logged once at INFO. A config made with an older NCCL's
 * initializer (a smaller size) is read up to its size. */
typedef struct ncclConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                           \
  {                                                                                                       \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT /* blocking */,        \
        NCCL_CONFIG_UNDEF_INT /* cgaClusterSize */, NCCL_CONFIG_UNDEF_INT /* minCTAs */,                  \
        NCCL_CONFIG_UNDEF_INT /* maxCTAs */, NCCL_CONFIG_UNDEF_PTR /* netName */,                         \
        NCCL_CONFIG_UNDEF_INT /* splitShare */, NCCL_CONFIG_UNDEF_INT /* trafficClass */,                 \
        NCCL_CONFIG_UNDEF_PTR /* commName */, NCCL_CONFIG_UNDEF_INT /* collnetEnable */,                  \
        NCCL_CONFIG_UNDEF_INT /* CTAPolicy */, NCCL_CONFIG_UNDEF_INT /* shrinkShare */,                   \
        NCCL_CONFIG_UNDEF_INT /* nvlsCTAs */, NCCL_CONFIG_UNDEF_INT /* nChannelsPerNetPeer */,            \
        NCCL_CONFIG_UNDEF_INT /* nvlinkCentricSched */, NCCL_CONFIG_UNDEF_INT /* graphUsageMode */,       \
        NCCL_CONFIG_UNDEF_INT /* numRmaCtx */, NCCL_CONFIG_UNDEF_INT /* maxP2pPeers */,                   \
        NCCL_CONFIG_UNDEF_INT /* graphStreamOrdering */, NCCL_CONFIG_UNDEF_INT /* launchOrderImplicit */, \
        NCCL_CONFIG_UNDEF_INT /* numRmaSig */, NCCL_CONFIG_UNDEF_INT /* rmaEagerInit */,                  \
        NCCL_CONFIG_UNDEF_INT /* hostCftMode */, NCCL_CONFIG_UNDEF_INT /* nvlsHostMode */                 \
  }

/* A vendor option for a per-collective config: a list through next, keyed by (vendorId,
 * optionId). This library reads none of them (NVIDIA's ignores them too). */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* Options of one collective call (the nccl*Config functions), the same on every rank.
 * Start from NCCL_COLLCONFIG_INITIALIZER. Honoured: algSelection (this call's algorithm
 * filter in NCCL_ALGO's syntax, e.g. "ring" or "^tree", on top of NCCL_ALGO; with
 * forceAlgSelection 0 a filter nothing satisfies falls back to the automatic choice),
 * minCTAs/maxCTAs (the channels this call uses, within the communicator's), CTAPolicy
 * (checked) and userProfilerTag (kept with the operation). launchCompletionEvent must be
 * NULL (not supported). Alltoall, gather and scatter are sends and receives: their
 * config is checked. */
typedef struct ncclCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection;
  int CTAPolicy;
  uint64_t userProfilerTag;
  cudaEvent_t launchCompletionEvent;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                                                 \
  {                                                                                                                 \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_PTR /* ext */,                   \
        NCCL_CONFIG_UNDEF_INT /* minCTAs */, NCCL_CONFIG_UNDEF_INT /* maxCTAs */,                                   \
        NCCL_CONFIG_UNDEF_INT /* nvlsCTAs */, NCCL_CONFIG_UNDEF_INT /* cgaClusterSize */,                           \
        NCCL_CONFIG_UNDEF_PTR /* algSelection */, 1 /* forceAlgSelection */, NCCL_CONFIG_UNDEF_INT /* CTAPolicy */, \
        0 /* userProfilerTag */, NCCL_CONFIG_UNDEF_PTR /* launchCompletionEvent */                                  \
  }

/* What ncclGroupSimulateEnd() reports; start from NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds, from the tuner's cost model */
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* Reduction operations. Values from ncclNumOps up are made at run time
 * (ncclRedOpCreatePreMulSum) and belong to one communicator. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  /* The largest value an op may take without making the enum wider than NCCL's. */
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/* Where a PreMulSum scalar lives and when it is read. */
typedef enum {
  ncclScalarDevice = 0,       /* read by each operation when it runs (host or device memory) */
  ncclScalarHostImmediate = 1 /* host memory, read before ncclRedOpCreatePreMulSum returns */
} ncclScalarResidence_t;

/* Each function has a pncclX twin with the same behaviour (NCCL's profiling names). */
#define NCCL_DROPIN_DECLARE(ret, name, args) \
  ret name args;                             \
  ret p##name args

/* Memory for buffers: device memory when the thread has started CUDA on its current
 * device, page-aligned host memory otherwise. Free with ncclMemFree. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclMemFree, (void* ptr));

/* The NCCL version this library implements (23203), which frameworks test for
 * features. Collectives' own version: collGetVersion(), and the NCCL_DEBUG=VERSION line. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclGetVersion, (int* version));

/* Makes the id for a new communicator and starts its rendezvous root in this process
 * (NCCL_COMM_ID=host:port instead: every process gets the same id, rank 0 hosts it). */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId));

/* Joins rank `rank` of nranks; blocks until every rank has joined (config->blocking 0:
 * returns ncclInProgress, see ncclConfig_t). Bound to the current CUDA device once the
 * process has used it, else a host-memory rank. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommInitRankConfig,
                    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank));
/* ndev ranks in this process: devlist[i] for rank i; devlist NULL: devices 0..ndev-1
 * where CUDA is usable, host-memory ranks where it is not. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommInitAll, (ncclComm_t * comm, int ndev, const int* devlist));
/* Init with nId ids (the same on every rank); the first one's root serves the rendezvous. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommInitRankScalable,
                    (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                     ncclConfig_t* config));

/* A fresh id for growing comm (ncclCommGrow), made by one of its ranks; one at a time. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId));
/* A communicator of nRanks from comm's ranks (keeping their ranks; rank -1, uniqueId NULL
 * except on the rank that made it) and the new ones (comm NULL, the id, their rank). */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommGrow,
                    (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                     ncclConfig_t* config));

/* Waits for the communicator's operations to finish; ncclCommDestroy then frees it. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
/* Stops every operation (another thread's blocked call returns within about a second)
 * and frees the communicator. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
/* Every operation in flight and every later one fails; destroy, abort and shrink work. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
/* New communicators by color, ranked by (key, rank); NCCL_SPLIT_NOCOLOR gives NULL.
 * config NULL: the parent's options. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommSplit,
                    (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config));
/* The parent's ranks less the excluded ones, in order; called by the ranks that stay,
 * also when excluded ranks died. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommShrink,
                    (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                     ncclConfig_t* config, int shrinkFlags));

NCCL_DROPIN_DECLARE(const char*, ncclGetErrorString, (ncclResult_t result));
/* The text of comm's last error (the calling thread's last, for NULL). Never NULL. */
NCCL_DROPIN_DECLARE(const char*, ncclGetLastError, (ncclComm_t comm));
/* Re-reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE. */
NCCL_DROPIN_DECLARE(void, ncclResetDebugInit, (void));
/* The error that stopped comm, ncclInProgress while a non-blocking init runs, else
 * ncclSuccess. Any thread, any time. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count));
/* The rank's CUDA device, or -1 for a host-memory rank. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank));

/* Registered buffers and windows: see collCommRegister in collectives.h. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommWindowRegister,
                    (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
/* The buffer a window was registered with. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr));

/* Suspending a communicator releases its GPU memory until ncclCommResume; operations in
 * between are refused. Host-memory ranks hold none (they suspend at once, and report 0
 * bytes); device ranks: ncclInvalidUsage (not supported yet). */
#define NCCL_SUSPEND_MEM 0x01
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommResume, (ncclComm_t comm));
/* What ncclCommMemStats reports, in bytes (Suspended: 0 or 1). */
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;
NCCL_DROPIN_DECLARE(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value));

/* An op for comm and datatype: inputs multiplied by *scalar, then summed. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclRedOpCreatePreMulSum,
                    (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
                     ncclComm_t comm));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

/* Collectives. In place: reduce/broadcast/allreduce with sendbuff == recvbuff; allgather
 * with sendbuff == recvbuff + rank*sendcount; reduce-scatter with recvbuff == sendbuff +
 * rank*recvcount; gather with sendbuff == recvbuff + root*count; scatter with recvbuff ==
 * sendbuff + root*count (offsets in elements). */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclReduce,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     int root, ncclComm_t comm, cudaStream_t stream));
/* In-place broadcast (NCCL's older name). */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclBcast,
                    (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                     cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclBroadcast,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclAllReduce,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclReduceScatter,
                    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclAllGather,
                    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                     cudaStream_t stream));
/* Block j of sendbuff goes to rank j; rank i's block lands at recvbuff + i*count. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclAlltoAll,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                     cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclGather,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclScatter,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream));
/* The collectives with a per-call config (ncclCollConfig_t; NULL: as without). */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclAllReduceConfig,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclBroadcastConfig,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclReduceConfig,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                     int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclAllGatherConfig,
                    (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                     cudaStream_t stream, const ncclCollConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclReduceScatterConfig,
                    (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
                     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclAlltoAllConfig,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
                     cudaStream_t stream, const ncclCollConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclGatherConfig,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclScatterConfig,
                    (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config));

/* Point to point: the peer posts the matching call with the same count and type.
 * Inside a group, sends and receives never deadlock whatever their order. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclSend,
                    (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                     cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclRecv,
                    (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                     cudaStream_t stream));

/* One-sided puts into a peer's window with a signal, signals alone, and waits for them:
 * not supported by this library, each returns ncclInvalidUsage saying so. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclPutSignal,
                    (const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                     size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                     cudaStream_t stream));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclSignal,
                    (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;
NCCL_DROPIN_DECLARE(ncclResult_t, ncclWaitSignal,
                    (int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream));

/* Groups: calls between start and the outermost end are queued and run together at the
 * end (host buffers: complete when it returns; device buffers: enqueued). Simulate-end
 * closes the group without running it and reports the predicted time. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclGroupStart, (void));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclGroupEnd, (void));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo));

/* Encryption of the traffic between ranks: NONE is accepted; this library does not
 * encrypt (PSK: ncclInvalidUsage; its connections authenticate with NCCL_AUTH_KEY). */
typedef enum { NCCL_ENCRYPTION_MODE_NONE = 0, NCCL_ENCRYPTION_MODE_PSK = 1 } ncclEncryptionMode_t;
typedef struct ncclEncryptionConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int mode;
  const char* psk;
} ncclEncryptionConfig_t;
#define NCCL_ENCRYPTION_CONFIG_INITIALIZER                                                        \
  {                                                                                               \
    sizeof(ncclEncryptionConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_ENCRYPTION_MODE_NONE, \
        NCCL_CONFIG_UNDEF_PTR                                                                     \
  }
NCCL_DROPIN_DECLARE(ncclResult_t, ncclSetEncryption, (const ncclEncryptionConfig_t* config));

/* Parameters by NCCL name ("NCCL_BUFFSIZE" or "BUFFSIZE"): the library's one table of
 * tunables (collinfo lists it), as set in the environment or by default. A handle is
 * bound once and read typed (a value outside the type's range: ncclInvalidArgument) or
 * as text; ncclParamGet copies the text with its terminating NUL. Strings returned stay
 * valid until the same call on the same thread. */
typedef struct ncclParamHandle* ncclParamHandle_t;
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamBind, (ncclParamHandle_t * out, const char* key));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t* out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char** out));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void* out, int maxLen, int* len));
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetParameter, (const char* key, const char** value, int* valueLen));
/* Every parameter's name, NCCL_ prefixed. */
NCCL_DROPIN_DECLARE(ncclResult_t, ncclParamGetAllParameterKeys, (const char*** table, int* tableLen));
/* Logs every parameter and its value (NCCL_DEBUG=INFO shows them). */
NCCL_DROPIN_DECLARE(void, ncclParamDumpAll, (void));

#undef NCCL_DROPIN_DECLARE

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NCCL_H_ */

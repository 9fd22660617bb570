/*
 * collectives.h — the C ABI of libcollectives.
 *
 * Collectives is a collective-communication library in the class of NCCL. This header
 * mirrors NCCL's API with the prefix `coll`: same function shapes, same numeric values
 * for result codes, data types and reduction operations, so code written for NCCL ports
 * by renaming. It compiles as C99 and as C++ and needs no CUDA header: the stream type is
 * declared opaquely, and a cudaStream_t converts to it without a cast.
 *
 * Buffers may live in host memory or in CUDA device memory; one call takes buffers of one
 * kind, and every rank of a communicator issues each operation on the same kind.
 * Host buffers: a call returns when the operation is complete on this rank, except
 * between collGroupStart() and collGroupEnd(), where queued operations complete at
 * collGroupEnd(); the stream argument is ignored (pass NULL).
 * Device buffers (NCCL's semantics): the operation is enqueued on `stream` and the call
 * returns; synchronise the stream for the result and check collCommGetAsyncError() for
 * errors found while it ran. The rank must be bound to a device (collCommInitRank binds
 * the calling thread's current device once the process has used CUDA there, e.g. after
 * cudaSetDevice; collCommInitAll binds devlist[i]). Several ranks
 * may share a GPU; ranks of one process on one GPU need a stream each (not the legacy
 * default stream 0), unless one thread drives them all inside one group. Device kernels
 * wait for each other: a communicator's kernels are sized to be resident together on
 * their GPUs, but kernels of different communicators running on one GPU at the same time
 * may not fit; as with NCCL, order such communicators' operations (same order on every
 * rank) rather than overlapping them. For the same reason, threads of ranks sharing a
 * GPU should not call cudaMalloc/cudaFree (which may wait for the GPU's kernels) while
 * collectives run: allocate buffers before.
 *
 * Threading (NCCL's contract): one thread at a time per communicator; different
 * communicators may be driven by different threads at once; collCommAbort() and
 * collCommGetAsyncError() may be called from any thread at any time. Every rank of a
 * communicator must issue the same collectives in the same order.
 *
 * Every function returns a collResult_t. On failure, collGetLastError(comm) returns a
 * human-readable explanation naming the argument and value, or the peer and operation.
 * No exception, signal or abort() ever crosses this interface.
 */
#ifndef COLLECTIVES_COLLECTIVES_H_
#define COLLECTIVES_COLLECTIVES_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_MAJOR 0
#define COLL_MINOR 1
#define COLL_PATCH 0
/* Version arithmetic: X*10000 + Y*100 + Z. */
#define COLL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define COLL_VERSION_CODE COLL_VERSION(COLL_MAJOR, COLL_MINOR, COLL_PATCH)

/* Opaque communicator handle. */
typedef struct collComm* collComm_t;

/* Passing this color to collCommSplit() makes the calling rank take no part in any new
 * communicator; *newcomm is set to NULL. */
#define COLL_SPLIT_NOCOLOR -1

/* A registered memory window (collCommWindowRegister). Opaque. */
typedef struct collWindow* collWindow_t;
#define COLL_WIN_DEFAULT 0x00
#define COLL_WIN_COLL_SYMMETRIC 0x01
/* NCCL's window hints for its NVLink and GPU-initiated paths: accepted, no effect here. */
#define COLL_WIN_STRICT_ORDERING 0x02
#define COLL_WIN_GIN_ONLY 0x04
#define COLL_WIN_CFT_COUNTED 0x08
#define COLL_WIN_REQUIRED_ALIGNMENT 4096

/* collCommShrink() flags. */
#define COLL_SHRINK_DEFAULT 0x00 /* the parent is healthy or revoked: shrink it as it is */
#define COLL_SHRINK_ABORT 0x01   /* first stop the parent's operations in flight, then shrink */
/* collCommRevoke() flags: none defined, pass 0. */
#define COLL_REVOKE_DEFAULT 0x00

/* Size of the opaque unique id that ranks share to form a communicator. */
#define COLL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[COLL_UNIQUE_ID_BYTES];
} collUniqueId;

/* A CUDA stream. Declared opaquely so this header needs no CUDA header. */
typedef struct CUstream_st* collStream_t;

/* Result codes; the values equal NCCL's. */
typedef enum {
  collSuccess = 0,
  collUnhandledCudaError = 1,
  collSystemError = 2,     /* a system call or resource failed (socket, shm, memory) */
  collInternalError = 3,   /* a bug in this library */
  collInvalidArgument = 4, /* a bad argument: the last-error text names it */
  collInvalidUsage = 5,    /* a call made in the wrong state (e.g. unbalanced groups) */
  collRemoteError = 6,     /* a peer failed, disconnected or disagreed */
  collInProgress = 7,
  collTimeout = 8,
  collNumResults = 9
} collResult_t;

/* Data types; the values equal NCCL's. */
typedef enum {
  collInt8 = 0,
  collChar = 0,
  collUint8 = 1,
  collInt32 = 2,
  collInt = 2,
  collUint32 = 3,
  collInt64 = 4,
  collUint64 = 5,
  collFloat16 = 6,
  collHalf = 6,
  collFloat32 = 7,
  collFloat = 7,
  collFloat64 = 8,
  collDouble = 8,
  collBfloat16 = 9,
  collFloat8e4m3 = 10,
  collFloat8e5m2 = 11,
  collNumTypes = 12
} collDataType_t;

/* Reduction operations; the values equal NCCL's.
 * fp16, bf16 and fp8 are reduced in fp32 and rounded to nearest even at each step;
 * integers wrap. Avg on integers is the wrapped sum divided by nranks, truncating toward
 * zero; on floating types it is the sum scaled by 1/nranks. */
typedef enum {
  collSum = 0,
  collProd = 1,
  collMax = 2,
  collMin = 3,
  collAvg = 4,
  /* The first value of the operations made at run time (collRedOpCreatePreMulSum): every
   * value from here to collMaxRedOp may name one, on the communicator that made it. */
  collNumOps = 5,
  collMaxRedOp = 0x7fffffff
} collRedOp_t;

/* Where the scalar of collRedOpCreatePreMulSum() lives and when it is read. */
typedef enum {
  /* Read by every operation that uses the op, when it runs: host memory of this process
   * or device memory (a device operation reads it on the GPU, in stream order). */
  collScalarDevice = 0,
  /* Host memory, read once, before collRedOpCreatePreMulSum() returns. */
  collScalarHostImmediate = 1
} collScalarResidence_t;

/* Communicator options, field for field NCCL's ncclConfig_t of NCCL 2.28 (same layout),
 * for collCommInitRankConfig(), collCommInitRankScalable(), collCommSplit() and
 * collCommShrink(). Start from COLL_CONFIG_INITIALIZER and set what you need: every
 * field left at COLL_CONFIG_UNDEF_INT / NULL takes its default. size, magic and version
 * identify the struct; a config whose size, magic or version is not one this library
 * made is refused (collInvalidArgument), so an uninitialised struct never passes as
 * options. What each field does here:
 *   blocking    1 (default): init returns when the communicator is ready. 0: init
 *               returns collInProgress at once and completes in the background; poll
 *               collCommGetAsyncError() until it stops returning collInProgress. Other
 *               calls on the communicator before then are collInvalidUsage.
 *   minCTAs, maxCTAs
 *               bounds on the channels (rings) of the communicator: they override
 *               COLL_MIN_NCHANNELS / COLL_MAX_NCHANNELS. Above 32 they are capped, and a
 *               minimum above the maximum raises the maximum (INFO says so). Every rank
 *               must pass the same values.
 *   netName     the net backend for connections between hosts: "Socket", "IB", or the
 *               loaded net plugin's name; overrides COLL_NET. An unknown or unusable
 *               name fails init naming it, and every rank must name the same.
 *   commName    a name printed in every log line about this communicator.
 *   splitShare, shrinkShare
 *               accepted; a child communicator never shares its parent's resources
 *               here (its connections are its own), which NCCL also allows.
 *   compress    collCompressNone, collCompressFloat16 or collCompressBfloat16: the
 *               communicator's fp32 collectives carry that wire type (see
 *               collAllReduceCompressed); overrides COLL_COMPRESS. Every rank must pass
 *               the same. This field is this library's: NCCL's ncclConfig_t ends before
 *               it, so through the NCCL API only COLL_COMPRESS sets it.
 *   deterministic
 *               1: every reduction (allreduce, reduce, reduce-scatter) gives bitwise
 *               the same result for the same inputs on the same ranks, whatever the
 *               message size, channels, protocol, transport or executor: each element
 *               is combined along the ring in one fixed order, so the tree, the
 *               one-shot protocol and compression are not used. 0: the tuner's choice.
 *               Overrides COLL_DETERMINISTIC; every rank must pass the same. This
 *               library's field, like compress.
 *   timeoutMs   milliseconds an operation may run before it fails with collTimeout
 *               (see collCommSetTimeout, which can change it later); 0: no limit.
 *               Overrides COLL_TIMEOUT_S. It also bounds the init's rendezvous
 *               where it is shorter than COLL_BOOTSTRAP_TIMEOUT_S: the missing ranks
 *               are named once the least timeout of the ranks that came has passed.
 *               This library's field, like compress.
 *   cgaClusterSize, trafficClass, collnetEnable, CTAPolicy, nvlsCTAs,
 *   nChannelsPerNetPeer, nvlinkCentricSched
 *               accepted and logged once at INFO (subsystem INIT): nothing here has
 *               a use for them yet. */
/* Values of collConfig_t.compress. */
typedef enum { collCompressNone = 0, collCompressFloat16 = 1, collCompressBfloat16 = 2 } collCompress_t;

#define COLL_CONFIG_UNDEF_INT INT_MIN
#define COLL_CONFIG_UNDEF_PTR NULL
#define COLL_CONFIG_MAGIC 0xcafebeef
/* The config layout's version: that of NCCL 2.28.9, whose ncclConfig_t this mirrors. */
#define COLL_CONFIG_VERSION 22809
typedef struct collConfig_v22800 {
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
  /* Not in NCCL's ncclConfig_t (whose smaller size leaves it unset): */
  int compress;
  int deterministic;
  int timeoutMs;
} collConfig_t;

#define COLL_CONFIG_INITIALIZER                                                                         \
  {                                                                                                     \
    sizeof(collConfig_t), COLL_CONFIG_MAGIC, COLL_CONFIG_VERSION, COLL_CONFIG_UNDEF_INT /* blocking */, \
        COLL_CONFIG_UNDEF_INT /* cgaClusterSize */, COLL_CONFIG_UNDEF_INT /* minCTAs */,                \
        COLL_CONFIG_UNDEF_INT /* maxCTAs */, COLL_CONFIG_UNDEF_PTR /* netName */,                       \
        COLL_CONFIG_UNDEF_INT /* splitShare */, COLL_CONFIG_UNDEF_INT /* trafficClass */,               \
        COLL_CONFIG_UNDEF_PTR /* commName */, COLL_CONFIG_UNDEF_INT /* collnetEnable */,                \
        COLL_CONFIG_UNDEF_INT /* CTAPolicy */, COLL_CONFIG_UNDEF_INT /* shrinkShare */,                 \
        COLL_CONFIG_UNDEF_INT /* nvlsCTAs */, COLL_CONFIG_UNDEF_INT /* nChannelsPerNetPeer */,          \
        COLL_CONFIG_UNDEF_INT /* nvlinkCentricSched */, COLL_CONFIG_UNDEF_INT /* compress */,           \
        COLL_CONFIG_UNDEF_INT /* deterministic */, COLL_CONFIG_UNDEF_INT /* timeoutMs */                \
  }

/* What collGroupSimulateEnd() reports: NCCL's ncclSimInfo_t, same layout. */
#define COLL_SIM_INFO_MAGIC 0x74685283
#define COLL_SIM_INFO_VERSION 22809
typedef struct collSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds the group is predicted to take */
} collSimInfo_t;
#define COLL_SIM_INFO_INITIALIZER \
  { sizeof(collSimInfo_t), COLL_SIM_INFO_MAGIC, COLL_SIM_INFO_VERSION, -1.0f }

/* Options of one collective call (the coll*Config functions), NCCL's ncclCollConfig_t
 * of NCCL 2.32 (same layout; later versions append). Start from
 * COLL_COLLCONFIG_INITIALIZER; every rank passes the same values. What each does here:
 *   ext          vendor options (collConfigExt_t list): none are read.
 *   minCTAs, maxCTAs
 *                bounds on the channels (rings) this call uses, within the
 *                communicator's: maxCTAs above the communicator's channels is
 *                collInvalidArgument, minCTAs above maxCTAs too.
 *   algSelection the algorithms this call may use, in COLL_ALGO's syntax ("ring",
 *                "tree", "^tree"; collective prefixes allowed), applied on top of
 *                COLL_ALGO. NULL or "": the tuner's choice.
 *   forceAlgSelection
 *                1 (default): a selection nothing can satisfy fails the call
 *                (collInvalidArgument); 0: the tuner's choice instead.
 *   CTAPolicy    a COLL_CTA_POLICY_* mask: checked, then accepted (no effect here).
 *   nvlsCTAs, cgaClusterSize
 *                accepted (no effect here).
 *   userProfilerTag
 *                kept with the call's operations for profilers.
 *   launchCompletionEvent
 *                must be NULL: collInvalidUsage otherwise (not supported). */
typedef struct collConfigExt {
  struct collConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} collConfigExt_t;
#define COLL_COLLCONFIG_VERSION 23203
#define COLL_CTA_POLICY_DEFAULT 0x00
#define COLL_CTA_POLICY_EFFICIENCY 0x01
#define COLL_CTA_POLICY_ZERO 0x02
typedef struct collCollConfig_v23200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  collConfigExt_t* ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection;
  int CTAPolicy;
  uint64_t userProfilerTag;
  void* launchCompletionEvent; /* a cudaEvent_t */
} collCollConfig_t;
#define COLL_COLLCONFIG_INITIALIZER                                                                                 \
  {                                                                                                                 \
    sizeof(collCollConfig_t), COLL_CONFIG_MAGIC, COLL_COLLCONFIG_VERSION, COLL_CONFIG_UNDEF_PTR /* ext */,          \
        COLL_CONFIG_UNDEF_INT /* minCTAs */, COLL_CONFIG_UNDEF_INT /* maxCTAs */,                                   \
        COLL_CONFIG_UNDEF_INT /* nvlsCTAs */, COLL_CONFIG_UNDEF_INT /* cgaClusterSize */,                           \
        COLL_CONFIG_UNDEF_PTR /* algSelection */, 1 /* forceAlgSelection */, COLL_CONFIG_UNDEF_INT /* CTAPolicy */, \
        0 /* userProfilerTag */, COLL_CONFIG_UNDEF_PTR /* launchCompletionEvent */                                  \
  }

/* Stores COLL_VERSION_CODE of the loaded library in *version. */
collResult_t collGetVersion(int* version);

/* Creates a unique id for a new communicator. Starts the rendezvous root in the calling
 * process (a listener thread) and returns an id holding the root's address and a random
 * 64-bit secret; pass the id to every rank (e.g. over MPI) and call collCommInitRank().
 * If COLL_COMM_ID (or NCCL_COMM_ID) is set to host:port, every process returns the same
 * id for that address and rank 0 hosts the root inside collCommInitRank(). */
collResult_t collGetUniqueId(collUniqueId* uniqueId);

/* Creates this process's rank `rank` (0 <= rank < nranks) of a communicator of nranks
 * ranks, bound to the calling thread's current CUDA device where one is usable and this
 * process has started CUDA on it (cudaSetDevice, an allocation; as NCCL expects
 * cudaSetDevice first). Otherwise it is a host-memory rank, which creates no CUDA context
 * and takes no GPU or pinned memory. Blocks until all ranks have joined; inside a group
 * it returns at once and the rank joins at the outermost collGroupEnd() (so one thread
 * may init several ranks), which reports any failure. A rank that never arrives is reported, by
 * rank number, after COLL_BOOTSTRAP_TIMEOUT_S seconds; a wrong secret, a duplicate rank
 * or a different nranks is refused. */
collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank);

/* collCommInitRank() with options (config may be NULL: the defaults). With
 * config->blocking == 0 it returns collInProgress once *comm is set, and the rank joins
 * in the background; collCommGetAsyncError(*comm) says collInProgress until then, and
 * collSuccess or the error after. collCommAbort()/collCommDestroy() may be called at any
 * time. */
collResult_t collCommInitRankConfig(collComm_t* comm, int nranks, collUniqueId commId, int rank, collConfig_t* config);

/* collCommInitRankConfig() given nId ids (1 <= nId <= nranks), the same ids in the same
 * order on every rank, as NCCL's scalable init takes them. This library's rendezvous
 * takes O(nranks) messages on its root whatever the count, so it uses commIds[0] and
 * checks that every id was made by collGetUniqueId. */
collResult_t collCommInitRankScalable(collComm_t* newcomm, int nranks, int myrank, int nId, collUniqueId* commIds,
                                      collConfig_t* config);

/* Creates ndev ranks of one communicator inside this process, comms[i] being rank i,
 * bound to CUDA device devlist[i] (entries may repeat: several ranks per GPU).
 * devlist == NULL makes host-memory ranks. The comms may be driven by one thread inside
 * collGroupStart()/collGroupEnd(), or by one thread each. */
collResult_t collCommInitAll(collComm_t* comms, int ndev, const int* devlist);

/* Waits for outstanding operations of comm to finish. collCommDestroy() remains needed. */
collResult_t collCommFinalize(collComm_t comm);

/* Frees the communicator and everything it holds. The handle is invalid afterwards.
 * NULL does nothing (collSuccess), as in NCCL. */
collResult_t collCommDestroy(collComm_t comm);

/* Stops every operation of comm (a call blocked in another thread returns within about
 * one second with an error) and frees the communicator. Peers see this rank leave.
 * NULL does nothing (collSuccess). */
collResult_t collCommAbort(collComm_t comm);

/* Splits comm into new communicators, one per distinct non-negative color, ranked by
 * (key, old rank). Collective over comm. config NULL: the new communicator takes comm's
 * options; with config->blocking == 0 the split still completes before returning (and
 * returns collSuccess). color COLL_SPLIT_NOCOLOR gives *newcomm = NULL. Inside a group
 * the split completes, and *newcomm is written, at the outermost collGroupEnd(), so one
 * thread may split several ranks (collCommShrink() likewise). */
collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config);

/* Makes a communicator of comm's ranks less those in excludeRanksList (ranks of comm,
 * no repeats), keeping their order: called by every rank that stays, not by the
 * excluded ones. Works when excluded ranks have died, and after collCommRevoke(): the
 * survivors rendezvous afresh without them, and a rank whose peers do not all come
 * is told which within COLL_BOOTSTRAP_TIMEOUT_S. shrinkFlags COLL_SHRINK_ABORT first
 * stops comm's operations in flight (comm then stays revoked); COLL_SHRINK_DEFAULT
 * expects none. config NULL: comm's options. comm stays to be destroyed. */
collResult_t collCommShrink(collComm_t comm, int* excludeRanksList, int excludeRanksCount, collComm_t* newcomm,
                            collConfig_t* config, int shrinkFlags);

/* Stops comm: operations in flight on any thread end with collInvalidUsage ("revoked"),
 * as does every later operation; collCommSplit() (every rank revokes, then splits),
 * collCommShrink(), collCommDestroy() and collCommAbort() still work on it. revokeFlags
 * must be COLL_REVOKE_DEFAULT. */
collResult_t collCommRevoke(collComm_t comm, int revokeFlags);

/* Limits how long each operation of comm may run: one still not complete `seconds` after
 * it started (for a device buffer: after the proxy took it) fails with collTimeout, its
 * error naming the operation, its sequence number and the rank it waits for, and comm
 * is aborted (later operations fail too; collCommGetAsyncError() says collTimeout), as
 * NCCL's watchdog in PyTorch does. 0 (the default, or config->timeoutMs, or COLL_TIMEOUT_S)
 * means no limit.
 * Takes effect for operations that start after the call; callable from any thread. A
 * negative or non-finite value is collInvalidArgument. Every rank should set the same. */
collResult_t collCommSetTimeout(collComm_t comm, double seconds);

/* Stores in *asyncError the error that stopped comm (a dead peer, an abort), or
 * collSuccess. Callable from any thread. */
collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError);

/* Number of ranks of comm. */
collResult_t collCommCount(const collComm_t comm, int* count);

/* CUDA device of this rank, or -1 for a host-memory rank. */
collResult_t collCommCuDevice(const collComm_t comm, int* device);

/* Rank of the caller in comm. */
collResult_t collCommUserRank(const collComm_t comm, int* rank);

/* Name of a result code, e.g. "invalid argument". Never NULL. */
const char* collGetErrorString(collResult_t result);

/* Text of the last error on comm, or of the calling thread's last call made without a
 * usable communicator when comm is NULL. Never NULL; "" when there was none. */
const char* collGetLastError(collComm_t comm);

/* Stores in *count how many CUDA devices this process can use: 0 without CUDA support
 * in this build, without a driver or without a device. */
collResult_t collCudaDeviceCount(int* count);

/* Re-reads COLL_DEBUG / COLL_DEBUG_SUBSYS / COLL_DEBUG_FILE (and their NCCL_ names):
 * log lines after the call follow the environment as it is now. */
void collResetDebugInit(void);

/* Allocates size bytes for buffers of collectives: device memory (cudaMalloc) when the
 * calling thread has started CUDA on its current device, as a rank bound to it would be;
 * page-aligned, zero-filled host memory otherwise. size 0 gives NULL. Free with
 * collMemFree(). Host memory is an anonymous memory file mapped shared (heap memory where
 * the kernel has none), so the other processes of this host may map it: symmetric windows
 * on it are read directly by their peers (collCommWindowRegister). Being shared, it stays
 * shared with children forked after the allocation. */
collResult_t collMemAlloc(void** ptr, size_t size);
/* Frees what collMemAlloc() returned; any other pointer is collInvalidArgument. */
collResult_t collMemFree(void* ptr);

/* Registers [buff, buff+size) with comm and returns a handle for collCommDeregister().
 * Operations whose buffer lies inside a registered range take the zero-copy paths the
 * transports offer for memory that stays valid and unchanged while operations use it:
 * today, point-to-point sends over the network leave from the caller's buffer instead of
 * a FIFO copy (docs/NCCL.md). Registrations may overlap; each handle is freed once, and
 * a handle is never reused, so a stale one is refused. */
collResult_t collCommRegister(const collComm_t comm, void* buff, size_t size, void** handle);
/* Drops a registration of comm. A handle comm never made, or already dropped, is
 * collInvalidArgument. */
collResult_t collCommDeregister(const collComm_t comm, void* handle);

/* Registers a window: collCommRegister() plus NCCL's rules for windows. buff must be
 * COLL_WIN_REQUIRED_ALIGNMENT-aligned; winFlags COLL_WIN_DEFAULT, or with
 * COLL_WIN_COLL_SYMMETRIC (every rank registers a window of the same size, collective
 * over comm: the sizes are checked).
 * Where every rank is a host-memory process of one host and may read its peers' memory
 * (the kernel's ptrace rules), a symmetric window whose every part is host memory from
 * collMemAlloc is mapped by every rank: from then on, operations above COLL_ONESHOT_BYTES
 * read their peers' buffers directly, with plain loads inside such windows and with
 * process_vm_readv outside them (one copy per byte instead of the FIFOs' two). An INFO
 * line (subsystem SHM) says whether a window was mapped, and why not. */
collResult_t collCommWindowRegister(collComm_t comm, void* buff, size_t size, collWindow_t* win, int winFlags);
collResult_t collCommWindowDeregister(collComm_t comm, collWindow_t win);
/* The buffer win was registered with (its start). */
collResult_t collWinGetUserPtr(collComm_t comm, collWindow_t win, void** outUserPtr);

/* One-sided operations on windows (host-memory ranks; device ranks get collInvalidUsage).
 * Windows are known across ranks by registration order: every rank registers its windows
 * in the same order (NCCL's rule), and a rank names a peer's window by its own window of
 * the same order. collPutSignal writes count elements of datatype from localbuff (any
 * memory) to byte offset peerWinOffset of peer's window, then sends peer one signal;
 * collSignal sends the signal alone. Both return once localbuff may be reused, never
 * waiting for the peer. collWaitSignal waits until, for each descriptor, `peer` has sent
 * opCnt signals more than this rank waited for before, and takes them; the data of the
 * puts they end is then in this rank's windows (it is written there during the wait:
 * read a window only after a wait). Only context 0 and signal index 0 exist, flags must
 * be 0 (as in NCCL 2.32). Data travels over the bootstrap's TCP connections; a put that
 * does not fit the target's window fails the target's wait, naming the putting rank. A
 * wait has no time limit but the communicator's operation timeout (collCommSetTimeout).
 * Inside a group these run at once. */
typedef struct {
  int opCnt;  /* signals to wait for (> 0) */
  int peer;   /* the rank they come from */
  int sigIdx; /* 0 */
  int ctx;    /* 0 */
} collWaitSignalDesc_t;
collResult_t collPutSignal(const void* localbuff, size_t count, collDataType_t datatype, int peer, collWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, collComm_t comm,
                           collStream_t stream);
collResult_t collSignal(int peer, int sigIdx, int ctx, unsigned int flags, collComm_t comm, collStream_t stream);
collResult_t collWaitSignal(int nDesc, collWaitSignalDesc_t* signalDescs, collComm_t comm, collStream_t stream);

/* Makes a reduction op for comm: each rank multiplies its input by *scalar (of
 * datatype, the operation's type), then the results are summed. residence says when
 * the scalar is read (collScalarResidence_t). Use the op only with comm and datatype;
 * free it with collRedOpDestroy() once the last call using it has returned. */
collResult_t collRedOpCreatePreMulSum(collRedOp_t* op, void* scalar, collDataType_t datatype,
                                      collScalarResidence_t residence, collComm_t comm);
/* Frees an op made by collRedOpCreatePreMulSum() on comm. Built-in ops, ops of other
 * communicators and ops already freed are collInvalidArgument. */
collResult_t collRedOpDestroy(collRedOp_t op, collComm_t comm);

/* recvbuff[i] = op over ranks of sendbuff[i], i < count, on every rank.
 * In place when sendbuff == recvbuff. */
collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                           collComm_t comm, collStream_t stream);

/* Copies count elements of root's sendbuff into every rank's recvbuff. sendbuff is read
 * on root only. In place when sendbuff == recvbuff. */
collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                           collComm_t comm, collStream_t stream);

/* Reduces count elements of every rank's sendbuff into root's recvbuff. recvbuff is used
 * on root only. In place when sendbuff == recvbuff. */
collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                        int root, collComm_t comm, collStream_t stream);

/* Gathers sendcount elements from every rank: rank r's data lands at
 * recvbuff + r*sendcount on every rank. In place when sendbuff == recvbuff + rank*sendcount
 * (offsets in elements). */
collResult_t collAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                           collComm_t comm, collStream_t stream);

/* Reduces nranks*recvcount elements over ranks; rank r receives block r in recvbuff.
 * In place when recvbuff == sendbuff + rank*recvcount (offsets in elements). */
collResult_t collReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                               collRedOp_t op, collComm_t comm, collStream_t stream);

/* Compressed collectives: fp32 buffers, 16-bit values on the wire.
 *
 * The caller's buffers are collFloat32 (datatype must say so); between ranks every
 * value travels as wiretype: collFloat16, with one power-of-two scale per block of 256
 * elements (chosen from the block's largest finite magnitude, so no finite value
 * overflows and small values keep fp16's 11 significant bits relative to their block),
 * or collBfloat16, rounded to nearest even (8 significant bits, fp32's range). Each rank
 * decodes what it receives, combines it with its own input in fp32 and encodes the
 * result again; a finished value is decoded from the same wire bits on every rank, its
 * owner included, so all ranks end with identical results. NaN and infinities propagate
 * as in fp32. ops: collSum, collAvg, collMax, collMin (collProd and PreMulSum ops are
 * collInvalidArgument). Other argument rules are those of the uncompressed call.
 *
 * Error bound, per element i against the exact (real-number) reduction, with n ranks
 * and S_i = sum over ranks of |input_i|:
 *   collFloat16:  |error_i| <= n * 2^-11 * S_b * (1 + n * 2^-10) + n * 2^-149,
 *                 S_b the largest S_j of the 256-element block holding i;
 *   collBfloat16: |error_i| <= n * 2^-8 * S_i * (1 + n * 2^-7) + n * 2^-133;
 * for collAvg divide by n. Each value is rounded at most n times on its way (once per
 * hop where it is re-encoded); broadcast and allgather round once. Operations that take
 * a one-shot path carry fp32 and are exact, as are single-rank communicators: the
 * mailboxes up to COLL_ONESHOT_BYTES, the single pass up to COLL_NET_ONESHOT_BYTES (small
 * operations, where the bytes saved would not pay for the conversions), and COLL_DIRECT
 * between threads of one process (ranks read each other's buffers: no wire to shrink).
 * Groups, host and device buffers, ring and tree: as the uncompressed calls.
 *
 * A communicator can compress by default instead (collConfig_t.compress or
 * COLL_COMPRESS=fp16|bf16): then every fp32 collAllReduce, collReduceScatter (sum or
 * avg), collAllGather and collBroadcast called on it behaves as its compressed form. */
collResult_t collAllReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                     collDataType_t wiretype, collRedOp_t op, collComm_t comm, collStream_t stream);
collResult_t collReduceScatterCompressed(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         collDataType_t datatype, collDataType_t wiretype, collRedOp_t op,
                                         collComm_t comm, collStream_t stream);
collResult_t collAllGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                                     collDataType_t wiretype, collComm_t comm, collStream_t stream);
collResult_t collBroadcastCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                     collDataType_t wiretype, int root, collComm_t comm, collStream_t stream);
collResult_t collReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                  collDataType_t wiretype, collRedOp_t op, int root, collComm_t comm,
                                  collStream_t stream);

/* Every rank sends count elements to every rank: the block for rank j is
 * sendbuff + j*count, and the block from rank i lands at recvbuff + i*count. In place
 * (sendbuff == recvbuff) works on host buffers: the input is copied aside when the call
 * is made (inside a group: at the call, not at collGroupEnd). */
collResult_t collAlltoAll(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collComm_t comm,
                          collStream_t stream);

/* Every rank sends count elements to root, which stores rank i's at recvbuff + i*count.
 * recvbuff is used on root only. In place when sendbuff == recvbuff + root*count. */
collResult_t collGather(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                        collComm_t comm, collStream_t stream);

/* Root sends sendbuff + i*count (count elements) to rank i, which stores it in
 * recvbuff. sendbuff is used on root only. In place when recvbuff == sendbuff +
 * root*count. */
collResult_t collScatter(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                         collComm_t comm, collStream_t stream);

/* The collectives above with a per-call config (collCollConfig_t; NULL: as without). */
collResult_t collAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                 collRedOp_t op, collComm_t comm, collStream_t stream, const collCollConfig_t* config);
collResult_t collBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                                 collComm_t comm, collStream_t stream, const collCollConfig_t* config);
collResult_t collReduceConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                              collRedOp_t op, int root, collComm_t comm, collStream_t stream,
                              const collCollConfig_t* config);
collResult_t collAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                                 collComm_t comm, collStream_t stream, const collCollConfig_t* config);
collResult_t collReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                                     collRedOp_t op, collComm_t comm, collStream_t stream,
                                     const collCollConfig_t* config);
/* Alltoall, gather and scatter are sends and receives: their config is checked, and
 * only userProfilerTag applies. */
collResult_t collAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                collComm_t comm, collStream_t stream, const collCollConfig_t* config);
collResult_t collGatherConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                              collComm_t comm, collStream_t stream, const collCollConfig_t* config);
collResult_t collScatterConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                               collComm_t comm, collStream_t stream, const collCollConfig_t* config);

/* Sends count elements to peer, which must post a matching collRecv(). Outside a group
 * the call returns when the peer has received the data; inside a group, sends and
 * receives never deadlock whatever their order. */
collResult_t collSend(const void* sendbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream);

/* Receives count elements from peer into recvbuff. See collSend(). */
collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream);

/* Opens a group: collectives and send/recv called until the matching collGroupEnd() are
 * queued, and run together at collGroupEnd(). Groups nest; only the outermost end runs. */
collResult_t collGroupStart(void);

/* Closes a group; the outermost one runs everything queued since collGroupStart() and
 * returns when it is complete. Inits, splits and shrinks called inside the group complete
 * here (their communicators are written then). If any call inside the group failed,
 * nothing queued runs and this returns that call's error (NCCL's rule). Without an open
 * group: collInvalidUsage. */
collResult_t collGroupEnd(void);

/* Closes a group like collGroupEnd() but runs nothing: everything queued since the
 * outermost collGroupStart() is dropped, and simInfo->estimatedTime gets the time in
 * microseconds the tuner's cost model predicts for it (the same model that picks
 * algorithms). simInfo must come from COLL_SIM_INFO_INITIALIZER. */
collResult_t collGroupSimulateEnd(collSimInfo_t* simInfo);

/* Suspending a communicator releases the GPU memory it holds until collCommResume; in
 * between, its operations are refused (collInvalidUsage). flags: COLL_SUSPEND_MEM. A
 * host-memory rank holds no GPU memory: it suspends and resumes at once. A device rank's
 * memory cannot be released yet (collInvalidUsage says so). collCommMemStats reports the
 * GPU memory the communicator holds, in bytes (Suspended: 1 while suspended, else 0);
 * device ranks: collInvalidUsage (not tracked yet). */
#define COLL_SUSPEND_MEM 0x01
typedef enum {
  collStatGpuMemSuspend = 0,   /* held and releasable by a suspend */
  collStatGpuMemSuspended = 1, /* 1 while suspended */
  collStatGpuMemPersist = 2,   /* held and not releasable */
  collStatGpuMemTotal = 3      /* everything held */
} collCommMemStat_t;
collResult_t collCommSuspend(collComm_t comm, int flags);
collResult_t collCommResume(collComm_t comm);
collResult_t collCommMemStats(collComm_t comm, collCommMemStat_t stat, uint64_t* value);

/* For API layers built on this one (the NCCL drop-in): records text as comm's last error
 * (NULL comm: the calling thread's), as a failed call of this library does, and returns
 * code. */
collResult_t collRecordError(collComm_t comm, collResult_t code, const char* text);

/* Growing a communicator: one of its ranks makes an id with collCommGetUniqueId (one at
 * a time: a second before the grow that consumes the first is collInvalidUsage) and
 * hands it to the processes of the new ranks. Then every rank calls collCommGrow: the
 * communicator's ranks with comm, rank -1 and uniqueId NULL except the one that made
 * it; each new rank with comm NULL, the id and its rank (nranks of comm and up). The
 * result is a new communicator of nRanks in which old ranks keep their numbers; comm
 * stays usable. config NULL: comm's options (new ranks: the defaults). */
collResult_t collCommGetUniqueId(collComm_t comm, collUniqueId* uniqueId);
collResult_t collCommGrow(collComm_t comm, int nRanks, const collUniqueId* uniqueId, int rank, collComm_t* newcomm,
                          collConfig_t* config);

/* The library's parameters (COLL_<NAME> / NCCL_<NAME>, as `collinfo` lists them) by
 * name: "BUFFSIZE", "COLL_BUFFSIZE" or "NCCL_BUFFSIZE". A handle is bound once and read
 * typed (integer parameters; a value the type cannot hold is collInvalidArgument, a
 * string parameter is collInvalidUsage) or as text (any parameter). collParamGet copies
 * the text with its NUL into out (maxLen bytes; *len the bytes needed); the strings
 * returned stay valid until the same function is called again on the same thread. */
typedef struct collParamHandle* collParamHandle_t;
collResult_t collParamBind(collParamHandle_t* out, const char* key);
collResult_t collParamGetI8(collParamHandle_t h, int8_t* out);
collResult_t collParamGetI16(collParamHandle_t h, int16_t* out);
collResult_t collParamGetI32(collParamHandle_t h, int32_t* out);
collResult_t collParamGetI64(collParamHandle_t h, int64_t* out);
collResult_t collParamGetU8(collParamHandle_t h, uint8_t* out);
collResult_t collParamGetU16(collParamHandle_t h, uint16_t* out);
collResult_t collParamGetU32(collParamHandle_t h, uint32_t* out);
collResult_t collParamGetU64(collParamHandle_t h, uint64_t* out);
collResult_t collParamGetStr(collParamHandle_t h, const char** out);
collResult_t collParamGet(collParamHandle_t h, void* out, int maxLen, int* len);
/* The value of the parameter named key, as text (*valueLen: its length). */
collResult_t collParamGetParameter(const char* key, const char** value, int* valueLen);
/* Every parameter's name with prefix (the NCCL_ names, prefix "NCCL_", or "COLL_"). */
collResult_t collParamGetAllParameterKeys(const char* prefix, const char*** table, int* tableLen);
/* Logs every parameter with its value and where it came from, at INFO (subsystem ENV). */
void collParamDumpAll(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLECTIVES_COLLECTIVES_H_ */

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

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_MAJOR 0
#define COLL_MINOR 1
#define COLL_PATCH 0
/* Version arithmetic: X*10000 + Y*100 + Z. */
#define COLL_VERSION(X, Y, Z) ((X) * 10000 + (Y) * 100 + (Z))
#define COLL_VERSION_CODE COLL_VERSION(COLL_MAJOR, COLL_MINOR, COLL_PATCH)

/* Opaque communicator handle. */
typedef struct collComm* collComm_t;

/* Passing this color to collCommSplit() makes the calling rank take no part in any new
 * communicator; *newcomm is set to NULL. */
#define COLL_SPLIT_NOCOLOR -1

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
  collSystemError = 2,      /* a system call or resource failed (socket, shm, memory) */
  collInternalError = 3,    /* a bug in this library */
  collInvalidArgument = 4,  /* a bad argument: the last-error text names it */
  collInvalidUsage = 5,     /* a call made in the wrong state (e.g. unbalanced groups) */
  collRemoteError = 6,      /* a peer failed, disconnected or disagreed */
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
  collNumOps = 5
} collRedOp_t;

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
 * and takes no GPU or pinned memory. Blocks until all ranks have joined. A rank that never arrives is reported, by
 * rank number, after COLL_BOOTSTRAP_TIMEOUT_S seconds; a wrong secret, a duplicate rank
 * or a different nranks is refused. */
collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank);

/* Creates ndev ranks of one communicator inside this process, comms[i] being rank i,
 * bound to CUDA device devlist[i] (entries may repeat: several ranks per GPU).
 * devlist == NULL makes host-memory ranks. The comms may be driven by one thread inside
 * collGroupStart()/collGroupEnd(), or by one thread each. */
collResult_t collCommInitAll(collComm_t* comms, int ndev, const int* devlist);

/* Waits for outstanding operations of comm to finish. collCommDestroy() remains needed. */
collResult_t collCommFinalize(collComm_t comm);

/* Frees the communicator and everything it holds. The handle is invalid afterwards. */
collResult_t collCommDestroy(collComm_t comm);

/* Stops every operation of comm (a call blocked in another thread returns within about
 * one second with an error) and frees the communicator. Peers see this rank leave. */
collResult_t collCommAbort(collComm_t comm);

/* Splits comm into new communicators, one per distinct non-negative color, ranked by
 * (key, old rank). Collective over comm. config may be NULL. color COLL_SPLIT_NOCOLOR
 * gives *newcomm = NULL. */
collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm,
                           void* config);

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

/* recvbuff[i] = op over ranks of sendbuff[i], i < count, on every rank.
 * In place when sendbuff == recvbuff. */
collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           collDataType_t datatype, collRedOp_t op, collComm_t comm,
                           collStream_t stream);

/* Copies count elements of root's sendbuff into every rank's recvbuff. sendbuff is read
 * on root only. In place when sendbuff == recvbuff. */
collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           collDataType_t datatype, int root, collComm_t comm,
                           collStream_t stream);

/* Reduces count elements of every rank's sendbuff into root's recvbuff. recvbuff is used
 * on root only. In place when sendbuff == recvbuff. */
collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count,
                        collDataType_t datatype, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream);

/* Gathers sendcount elements from every rank: rank r's data lands at
 * recvbuff + r*sendcount on every rank. In place when sendbuff == recvbuff + rank*sendcount
 * (offsets in elements). */
collResult_t collAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           collDataType_t datatype, collComm_t comm, collStream_t stream);

/* Reduces nranks*recvcount elements over ranks; rank r receives block r in recvbuff.
 * In place when recvbuff == sendbuff + rank*recvcount (offsets in elements). */
collResult_t collReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               collDataType_t datatype, collRedOp_t op, collComm_t comm,
                               collStream_t stream);

/* Sends count elements to peer, which must post a matching collRecv(). Outside a group
 * the call returns when the peer has received the data; inside a group, sends and
 * receives never deadlock whatever their order. */
collResult_t collSend(const void* sendbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, collStream_t stream);

/* Receives count elements from peer into recvbuff. See collSend(). */
collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, collStream_t stream);

/* Opens a group: collectives and send/recv called until the matching collGroupEnd() are
 * queued, and run together at collGroupEnd(). Groups nest; only the outermost end runs. */
collResult_t collGroupStart(void);

/* Closes a group; the outermost one runs everything queued since collGroupStart() and
 * returns when it is complete. Without an open group: collInvalidUsage. */
collResult_t collGroupEnd(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLLECTIVES_COLLECTIVES_H_ */

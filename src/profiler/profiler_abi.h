// The binary interface of NCCL's profiler plugins, as our own declarations.
//
// A profiler plugin is a shared library exporting one data symbol per interface version
// it implements, `ncclProfiler_v<N>`: a table of C function pointers and a name. The
// library calls init once per communicator (the plugin returns a context and the mask of
// event types it wants), then startEvent / recordEventState / stopEvent for the events it
// asked for, then finalize. We read versions 1 to 6; NCCL's headers
// (src/include/plugin/nccl_profiler.h, plugin/profiler/profiler_v*.h) are the authority
// for every layout below. Only the layout is shared with them: field order and types
// must match exactly, names are ours.
//
// Versions differ in: the type field's width (8 bits up to v4, 64 from v5), the
// collective's function, datatype, algorithm and protocol (numbers in v1, strings from
// v2), the communicator's name and hash (in each descriptor up to v3, init's arguments
// from v4), the kernel channel and net plugin events (from v3), the API events and the
// collective's parent (its API event in v5, the group before) and the copy-engine events
// (v6; this library emits none).
// This header is also compiled into the test plugin (tests/plugins), so it holds plain
// declarations only.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace coll::profabi {

// ncclResult_t's success; any other value from init disables the plugin for the
// communicator.
constexpr int kProfSuccess = 0;

// Event types: the bits of the activation mask and the descriptors' `type`.
enum EventType : uint64_t {
  kEvGroup = 1 << 0,          // a launch of one communicator's operations
  kEvColl = 1 << 1,           // one collective of that launch
  kEvP2p = 1 << 2,            // one send or receive of that launch
  kEvProxyOp = 1 << 3,        // one channel's transfers of an operation toward one peer
  kEvProxyStep = 1 << 4,      // one slot of those transfers
  kEvProxyCtrl = 1 << 5,      // the progress thread's idle/active periods
  kEvKernelCh = 1 << 6,       // one channel's execution of an operation
  kEvNetPlugin = 1 << 7,      // defined by a net plugin
  kEvGroupApi = 1 << 8,       // v5: collGroupStart..End as called, or one call's implicit group
  kEvCollApi = 1 << 9,        // v5: one collective API call
  kEvP2pApi = 1 << 10,        // v5: one send/recv API call
  kEvKernelLaunch = 1 << 11,  // v5: one kernel launch
  kEvCeColl = 1 << 12,        // v6: copy-engine collectives
  kEvCeSync = 1 << 13,
  kEvCeBatch = 1 << 14,
};

// States given to recordEventState (one enum for every version; each version accepts
// the ones it knew).
enum EventState : int {
  kStProxyOpSendPosted = 0,  // ProxyOp states 0-7: up to v3
  kStProxyOpSendRemFifoWait = 1,
  kStProxyOpSendTransmitted = 2,
  kStProxyOpSendDone = 3,
  kStProxyOpRecvPosted = 4,
  kStProxyOpRecvReceived = 5,
  kStProxyOpRecvTransmitted = 6,
  kStProxyOpRecvDone = 7,
  kStProxyStepSendGpuWait = 8,  // waiting for the data to send
  kStProxyStepSendWait = 9,     // the data handed to the transport
  kStProxyStepRecvWait = 10,    // waiting for the data to arrive
  kStProxyStepRecvFlushWait = 11,
  kStProxyStepRecvGpuWait = 12,  // arrived, being consumed
  kStProxyCtrlIdle = 13,
  kStProxyCtrlActive = 14,
  kStProxyCtrlSleep = 15,
  kStProxyCtrlWakeup = 16,
  kStProxyCtrlAppend = 17,
  kStProxyCtrlAppendEnd = 18,
  kStProxyOpInProgress = 19,      // v4
  kStProxyStepSendPeerWait = 20,  // v4: waiting for room at the receiver
  kStNetPluginUpdate = 21,        // v4
  kStKernelChStop = 22,           // v4
  kStGroupStartApiStop = 23,      // v5: collGroupStart returned
  kStGroupEndApiStart = 24,       // v5: collGroupEnd called
};

// The logger init receives from v4 on (plugin_lib.h pluginLog).
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Parts several versions share, as named types (a member of one lays out exactly as the
// anonymous struct NCCL declares in its place).
struct ProxyOpFields {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;     // slots it moves
  int chunkSize;  // bytes per slot
  int isSend;
};
struct ProxyStepFields {
  int step;
};
struct KernelChFieldsV3 {
  uint8_t channelId;
};
struct KernelChFields {  // v4 on
  uint8_t channelId;
  uint64_t pTimer;  // the GPU's start timestamp
};
struct NetPluginFields {
  int64_t id;
  void* data;
};
// The communicator's name and hash, which v1 to v3 carry in every collective and p2p.
struct CommIdFields {
  const char* name;
  uint64_t commHash;
};
// v2 and v3's point-to-point operation.
struct P2pFieldsV2 : CommIdFields {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
};

// ---- v1 ----
struct DescrV1 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      uint8_t func;  // ncclFunc_t: Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4, Send 6, Recv 7
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      uint8_t datatype;  // ncclDataType_t (our collDataType_t values)
      uint32_t op;
      size_t trafficBytes;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      uint8_t algo;   // NCCL_ALGO_*: TREE 0, RING 1
      uint8_t proto;  // NCCL_PROTO_*: LL 0, LL128 1, SIMPLE 2
      int isCollnet;
      int isNvls;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      uint8_t func;
      void* buff;
      uint8_t datatype;
      size_t count;
      int peer;
    } p2p;
    ProxyOpFields proxyOp;
    ProxyStepFields proxyStep;
  };
};

// State arguments of v1 to v3.
union StateArgsV1 {
  struct {
    size_t transSize;
    int steps;
  } proxyOp;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
};

// ---- v2 and v3: v3 drops the collective's trafficBytes, adds kernel and net events ----
// A collective's fields from v2 on, up to its datatype. NCCL declares every version's
// collective flat; the bases here lay out the same (none has tail padding), which the
// sizes below confirm.
struct CollCoreFields {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
};
struct CollFieldsV2 : CommIdFields, CollCoreFields {
  size_t trafficBytes;
  uint8_t nMaxChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};
struct CollFieldsV3 : CommIdFields, CollCoreFields {
  uint8_t nMaxChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};

struct DescrV2 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollFieldsV2 coll;
    P2pFieldsV2 p2p;
    ProxyOpFields proxyOp;
    ProxyStepFields proxyStep;
  };
};

struct DescrV3 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollFieldsV3 coll;
    P2pFieldsV2 p2p;
    ProxyOpFields proxyOp;
    ProxyStepFields proxyStep;
    KernelChFieldsV3 kernelCh;
    NetPluginFields netPlugin;
  };
};

// ---- v4 ----
// The collective of v4, to which v5 adds parentGroup.
struct CollFieldsV4 : CollCoreFields {
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;
  const char* proto;
};
static_assert(sizeof(CollFieldsV2) == 104 && sizeof(CollFieldsV3) == 96 && sizeof(CollFieldsV4) == 80);
struct P2pFieldsV4 {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
};

struct DescrV4 {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollFieldsV4 coll;
    P2pFieldsV4 p2p;
    ProxyOpFields proxyOp;
    ProxyStepFields proxyStep;
    KernelChFields kernelCh;
    NetPluginFields netPlugin;
  };
};

// State arguments from v4 on.
union StateArgsV4 {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
};

// ---- v5 and v6: v6 appends the copy-engine events to v5's union ----
struct GroupApiFields {
  bool graphCaptured;
  int groupDepth;  // 1: a call's implicit group; 2 and more: inside the caller's group
};
struct CollApiFields {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
};
struct P2pApiFields {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
};
struct KernelLaunchFields {
  void* stream;
};
struct CollFieldsV5 : CollFieldsV4 {
  void* parentGroup;  // its Group event (parentObj: its CollApi event)
};
struct P2pFieldsV5 : P2pFieldsV4 {
  void* parentGroup;
};
// NCCL declares them flat: parentGroup right after the v4 fields (no tail padding to reuse).
static_assert(sizeof(CollFieldsV5) == sizeof(CollFieldsV4) + sizeof(void*));
static_assert(sizeof(P2pFieldsV5) == sizeof(P2pFieldsV4) + sizeof(void*));

// v6's copy-engine collective (this library emits none).
struct CeCollFields : CollCoreFields {
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
};

// The union members v5 and v6 share, in their order.
#define COLL_PROFABI_V5_EVENTS     \
  GroupApiFields groupApi;         \
  CollApiFields collApi;           \
  P2pApiFields p2pApi;             \
  KernelLaunchFields kernelLaunch; \
  CollFieldsV5 coll;               \
  P2pFieldsV5 p2p;                 \
  ProxyOpFields proxyOp;           \
  ProxyStepFields proxyStep;       \
  KernelChFields kernelCh;         \
  NetPluginFields netPlugin;

struct DescrV5 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    COLL_PROFABI_V5_EVENTS
  };
};

struct DescrV6 {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    COLL_PROFABI_V5_EVENTS
    CeCollFields ceColl;
    struct {
      bool isComplete;
      int nRanks;
    } ceCollSync;
    struct {
      int numOps;
      size_t totalBytes;
      bool useIntraSync;
    } ceCollBatch;
  };
};
#undef COLL_PROFABI_V5_EVENTS

// ---- the tables ----
// v1 to v3: init knows nothing of the communicator (its name and hash ride in the
// collective and p2p descriptors).
template <class Descr>
struct TableV1Shape {
  const char* name;
  int (*init)(void** context, int* activationMask);
  int (*startEvent)(void* context, void** event, Descr* descr);
  int (*stopEvent)(void* event);
  int (*recordEventState)(void* event, int state, StateArgsV1* args);
  int (*finalize)(void* context);
};
using TableV1 = TableV1Shape<DescrV1>;
using TableV2 = TableV1Shape<DescrV2>;
using TableV3 = TableV1Shape<DescrV3>;

struct TableV4 {
  const char* name;
  int (*init)(void** context, int* activationMask, const char* commName, uint64_t commHash, int nNodes, int nranks,
              int rank, Logger logger);
  int (*startEvent)(void* context, void** event, DescrV4* descr);
  int (*stopEvent)(void* event);
  int (*recordEventState)(void* event, int state, StateArgsV4* args);
  int (*finalize)(void* context);
};

// v5 and v6: init takes the hash first.
template <class Descr>
struct TableV5Shape {
  const char* name;
  int (*init)(void** context, uint64_t commId, int* activationMask, const char* commName, int nNodes, int nranks,
              int rank, Logger logger);
  int (*startEvent)(void* context, void** event, Descr* descr);
  int (*stopEvent)(void* event);
  int (*recordEventState)(void* event, int state, StateArgsV4* args);
  int (*finalize)(void* context);
};
using TableV5 = TableV5Shape<DescrV5>;
using TableV6 = TableV5Shape<DescrV6>;

}  // namespace coll::profabi

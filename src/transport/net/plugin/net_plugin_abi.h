// The binary interface of NCCL's external net plugins, as our own declarations.
//
// A plugin is a shared library exporting one data symbol per interface version it
// implements, `ncclNetPlugin_v<N>`: a table of C function pointers (and a name). NCCL
// tries the newest version it knows first, and plugins in the field (aws-ofi-nccl,
// nccl-rdma-sharp-plugins, NCCL's own ext-net example) export several versions at once.
// We read versions 8 to 12; NCCL's headers (src/include/plugin/net/net_v*.h,
// nccl_common.h, nccl_device/net_device.h, plugin/nccl_net.h) are the authority for
// every layout below. Only the layout is shared with them: field order and types must
// match exactly, names are ours.
//
// Facts the loader relies on (all versions here):
// - every call returns an ncclResult_t-compatible int (PluginResult), 0 on success;
// - connect/accept never block: success with a null comm means "call again";
// - isend/irecv may give a null request: not posted, try again later;
// - buffers passed to isend/irecv need a handle from regMr on the same comm;
// - a handle from listen is at most kPluginHandleBytes bytes, copied verbatim to the peer.
// This header is also compiled into the test plugin (tests/net_plugin), so it holds
// plain declarations only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll::netabi {

// ncclResult_t's values.
enum PluginResult : int {
  kPluginSuccess = 0,
  kPluginUnhandledCudaError = 1,
  kPluginSystemError = 2,
  kPluginInternalError = 3,
  kPluginInvalidArgument = 4,
  kPluginInvalidUsage = 5,
  kPluginRemoteError = 6,
  kPluginInProgress = 7,
};

// Bytes a plugin may write into the handle listen() gives it (NCCL_NET_HANDLE_MAXSIZE).
constexpr size_t kPluginHandleBytes = 128;

// Memory kinds of regMr's `type` and of properties' ptrSupport (a bit mask).
constexpr int kPtrHost = 0x1;
constexpr int kPtrCuda = 0x2;
constexpr int kPtrDmaBuf = 0x4;

// The logger passed to init: levels as ncclDebugLogLevel (1 version, 2 warn, 3 info,
// 4 abort, 5 trace); flags a mask of ncclDebugLogSubSys bits.
enum PluginLogLevel : int {
  kPluginLogNone = 0,
  kPluginLogVersion = 1,
  kPluginLogWarn = 2,
  kPluginLogInfo = 3,
  kPluginLogAbort = 4,
  kPluginLogTrace = 5,
};
using PluginLogger = void (*)(PluginLogLevel level, unsigned long flags, const char* file, int line, const char* fmt,
                              ...);
// The profiler callback passed to init from version 10 on (we give one that does nothing).
using PluginProfiler = PluginResult (*)(void** event, int type, void* parent, int64_t pluginId, void* extra);

// Device-offload handle of connect/accept (we never ask for offload: *devComm stays null).
struct PluginDeviceHandle {
  int deviceType;  // ncclNetDeviceType: 0 host
  int deviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

// A virtual NIC made of up to 4 physical devices (versions 9 to 11).
struct PluginVirtualDevice {
  int count;
  int devices[4];
};
// Version 12's: up to 8 (so every properties field after it moves).
struct PluginVirtualDeviceV12 {
  int count;
  int devices[8];
};

// Communicator options of connect (version 10) and init (versions 11 and 12).
struct PluginCommConfig {
  int trafficClass;  // -1: undefined
};

// getProperties, version 8.
struct PluginPropsV8 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;  // kPtrHost | kPtrCuda | kPtrDmaBuf
  int regIsGlobal;
  int speedMbps;
  int port;
  float latencyUs;
  int maxComms;
  int maxRecvs;
  int deviceType;
  int deviceVersion;
};

// getProperties, versions 9 and 10: version 8's fields, forceFlush after regIsGlobal,
// then the virtual device and the largest transfers (version 12 has a larger device).
template <typename VirtualDevice>
struct PluginPropsVDevice {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speedMbps;
  int port;
  float latencyUs;
  int maxComms;
  int maxRecvs;
  int deviceType;
  int deviceVersion;
  VirtualDevice virtualDevice;
  size_t maxP2pBytes;  // the largest isend/irecv; NCCL refuses 0 and more than 2^40
  size_t maxCollBytes;
};
using PluginPropsV9 = PluginPropsVDevice<PluginVirtualDevice>;
using PluginPropsV10 = PluginPropsV9;

// getProperties, version 11: version 10's and the largest multi-request.
struct PluginPropsV11 {
  PluginPropsV10 base;
  int maxMultiRequestSize;
};

// getProperties, version 12: the 8-device virtual NIC, then the NIC's rail and plane
// (-1: not known), which NCCL's topology search uses to pair NICs across nodes.
struct PluginPropsV12 {
  PluginPropsVDevice<PluginVirtualDeviceV12> base;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};
constexpr int16_t kPluginIdUndefined = -1;
// The largest maxP2pBytes NCCL accepts (NCCL_MAX_NET_SIZE_BYTES).
constexpr size_t kPluginMaxNetBytes = size_t{1} << 40;

// The layouts of LP64 Linux, where a mistake in field order or type shows first.
static_assert(sizeof(PluginPropsV11) == 112 && offsetof(PluginPropsV11, base.maxP2pBytes) == 88);
static_assert(sizeof(PluginPropsV12) == 128 && offsetof(PluginPropsV12, base.maxP2pBytes) == 104);

// The function tables. Members in the exported order; comm arguments are the plugin's
// opaque objects. irecv/iflush take arrays (n receives grouped); we post n = 1.
struct PluginNetV8 {
  const char* name;
  PluginResult (*init)(PluginLogger logger);
  PluginResult (*devices)(int* count);
  PluginResult (*getProperties)(int dev, PluginPropsV8* props);
  PluginResult (*listen)(int dev, void* handle, void** listenComm);
  PluginResult (*connect)(int dev, void* handle, void** sendComm, PluginDeviceHandle** sendDevComm);
  PluginResult (*accept)(void* listenComm, void** recvComm, PluginDeviceHandle** recvDevComm);
  PluginResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  PluginResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  PluginResult (*deregMr)(void* comm, void* mhandle);
  PluginResult (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  PluginResult (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  PluginResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  PluginResult (*test)(void* request, int* done, int* sizes);
  PluginResult (*closeSend)(void* sendComm);
  PluginResult (*closeRecv)(void* recvComm);
  PluginResult (*closeListen)(void* listenComm);
  PluginResult (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  PluginResult (*irecvConsumed)(void* recvComm, int n, void* request);
};

// Version 9: sizes of isend/irecv become size_t; makeVDevice appended.
struct PluginNetV9 {
  const char* name;
  PluginResult (*init)(PluginLogger logger);
  PluginResult (*devices)(int* count);
  PluginResult (*getProperties)(int dev, PluginPropsV9* props);
  PluginResult (*listen)(int dev, void* handle, void** listenComm);
  PluginResult (*connect)(int dev, void* handle, void** sendComm, PluginDeviceHandle** sendDevComm);
  PluginResult (*accept)(void* listenComm, void** recvComm, PluginDeviceHandle** recvDevComm);
  PluginResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  PluginResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  PluginResult (*deregMr)(void* comm, void* mhandle);
  PluginResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  PluginResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  PluginResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  PluginResult (*test)(void* request, int* done, int* sizes);
  PluginResult (*closeSend)(void* sendComm);
  PluginResult (*closeRecv)(void* recvComm);
  PluginResult (*closeListen)(void* listenComm);
  PluginResult (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  PluginResult (*irecvConsumed)(void* recvComm, int n, void* request);
  PluginResult (*makeVDevice)(int* dev, PluginVirtualDevice* props);
};

// Version 10: init takes a profiler callback, connect a comm config, isend/irecv a
// profiler handle per request (we pass null).
struct PluginNetV10 {
  const char* name;
  PluginResult (*init)(PluginLogger logger, PluginProfiler profiler);
  PluginResult (*devices)(int* count);
  PluginResult (*getProperties)(int dev, PluginPropsV10* props);
  PluginResult (*listen)(int dev, void* handle, void** listenComm);
  PluginResult (*connect)(int dev, PluginCommConfig* config, void* handle, void** sendComm,
                          PluginDeviceHandle** sendDevComm);
  PluginResult (*accept)(void* listenComm, void** recvComm, PluginDeviceHandle** recvDevComm);
  PluginResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  PluginResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  PluginResult (*deregMr)(void* comm, void* mhandle);
  PluginResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  PluginResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  PluginResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  PluginResult (*test)(void* request, int* done, int* sizes);
  PluginResult (*closeSend)(void* sendComm);
  PluginResult (*closeRecv)(void* recvComm);
  PluginResult (*closeListen)(void* listenComm);
  PluginResult (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  PluginResult (*irecvConsumed)(void* recvComm, int n, void* request);
  PluginResult (*makeVDevice)(int* dev, PluginVirtualDevice* props);
};

// Versions 11 and 12: a context from init (per communicator in NCCL; one per process
// here) that listen and connect take, the config moves from connect to init, and finalize
// and setNetAttr are appended. setNetAttr's argument (ncclNetAttr_v11_t, identical in
// version 12) is never built here. Version 12 changes only the properties and the
// virtual NIC (PluginPropsV12, PluginVirtualDeviceV12); the calls are version 11's.
template <typename Props, typename VirtualDevice>
struct PluginNetWithContext {
  const char* name;
  PluginResult (*init)(void** context, uint64_t commId, PluginCommConfig* config, PluginLogger logger,
                       PluginProfiler profiler);
  PluginResult (*devices)(int* count);
  PluginResult (*getProperties)(int dev, Props* props);
  PluginResult (*listen)(void* context, int dev, void* handle, void** listenComm);
  PluginResult (*connect)(void* context, int dev, void* handle, void** sendComm, PluginDeviceHandle** sendDevComm);
  PluginResult (*accept)(void* listenComm, void** recvComm, PluginDeviceHandle** recvDevComm);
  PluginResult (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  PluginResult (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  PluginResult (*deregMr)(void* comm, void* mhandle);
  PluginResult (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  PluginResult (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  PluginResult (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  PluginResult (*test)(void* request, int* done, int* sizes);
  PluginResult (*closeSend)(void* sendComm);
  PluginResult (*closeRecv)(void* recvComm);
  PluginResult (*closeListen)(void* listenComm);
  PluginResult (*getDeviceMr)(void* comm, void* mhandle, void** deviceMhandle);
  PluginResult (*irecvConsumed)(void* recvComm, int n, void* request);
  PluginResult (*makeVDevice)(int* dev, VirtualDevice* props);
  PluginResult (*finalize)(void* context);
  PluginResult (*setNetAttr)(void* context, void* attr);
};
using PluginNetV11 = PluginNetWithContext<PluginPropsV11, PluginVirtualDevice>;
using PluginNetV12 = PluginNetWithContext<PluginPropsV12, PluginVirtualDeviceV12>;

// The exported symbols, newest first (the order the loader tries them).
inline constexpr const char* kPluginSymbolV12 = "ncclNetPlugin_v12";
inline constexpr const char* kPluginSymbolV11 = "ncclNetPlugin_v11";
inline constexpr const char* kPluginSymbolV10 = "ncclNetPlugin_v10";
inline constexpr const char* kPluginSymbolV9 = "ncclNetPlugin_v9";
inline constexpr const char* kPluginSymbolV8 = "ncclNetPlugin_v8";

}  // namespace coll::netabi

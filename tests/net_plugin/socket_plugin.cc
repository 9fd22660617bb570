// A net plugin for tests: NCCL's external net plugin ABI (our declarations in
// src/transport/net/plugin/net_plugin_abi.h) over TCP on loopback, never blocking.
//
// It behaves as strictly as a real RDMA plugin where the library could get it wrong:
// - connect() always answers "not yet" (a null comm) on its first two calls and accept()
//   on its first two calls per listener, so the caller's retry path runs every time;
// - isend/irecv give a null request while kMaxInflight requests of the comm are not yet
//   freed by test(), as plugins out of request slots do;
// - every buffer must lie in a region registered (regMr) on the same comm, and its
//   mhandle must be the one passed; otherwise the call fails with ncclInvalidArgument.
// A message is an 8-byte length, then its bytes. Closing a send comm logs, at INFO
// through the logger it was given, how many messages and bytes it carried (the
// end-to-end test reads that line to know the plugin carried the traffic).
//
// With TESTSOCK_GPU=1 it also takes "GPU memory" (the library's device emulation hands
// it host memory, with a memfd standing in for the dma-buf): regMr of kPtrCuda and
// regMrDmaBuf (the fd must be open and cover offset + size), and iflush of a receive into
// such memory gives a request that completes at its first test; closing a receive comm
// logs how many flushes it ran.
//
// TESTSOCK_MAX_P2P=<bytes> sets the maxP2pBytes its devices report (versions 9 on;
// default 1 GiB), for the loader's checks of it.
//
// Built in several variants (tests/CMakeLists.txt) by defining which tables it exports:
// TESTSOCK_V12, TESTSOCK_V11, TESTSOCK_V10, TESTSOCK_V9, TESTSOCK_V8, TESTSOCK_V6 and
// TESTSOCK_V13 (symbols of versions the loader does not read), or none at all.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <vector>

#include "transport/net/plugin/net_plugin_abi.h"

namespace {

using namespace coll::netabi;

constexpr uint32_t kMagic = 0x7e5750c4;
constexpr size_t kMaxInflight = 4;
constexpr unsigned long kNetFlag = 0x10;

PluginLogger gLog = nullptr;
#define TS_LOG(level, ...)                                            \
  do {                                                                \
    if (gLog) gLog(level, kNetFlag, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

// What listen() writes: the peer's port, then room for connect()'s state between calls
// (as NCCL's IB plugin keeps its connection stage in the handle).
struct Handle {
  uint32_t magic;
  uint16_t port;
  uint16_t pad;
  int32_t pendingFd;  // connect's socket + 1 while connecting; 0 before the first call
  int32_t calls;      // connect calls so far
};
static_assert(sizeof(Handle) <= 112, "handle larger than the library ships");

struct Listen {
  int fd;
  int acceptCalls;
};

struct Comm;
struct Region {
  Comm* comm;
  char* base;
  size_t size;
  bool gpu = false;
};

bool gpuOn() {
  const char* v = std::getenv("TESTSOCK_GPU");
  return v && std::strcmp(v, "1") == 0;
}

struct Request {
  Comm* comm;
  char* data;
  size_t size;      // send: bytes; receive: capacity, then bytes
  uint64_t header;  // the length on the wire
  size_t moved;     // bytes of header + data moved so far
  bool done;
};

struct Comm {
  int fd;
  bool send;
  std::deque<Request*> queue;  // unfinished, in posting order
  std::set<Request*> live;     // every request not yet freed by test()
  std::vector<Region*> regions;
  unsigned long long messages = 0, bytes = 0, flushes = 0;
  PluginResult failed = kPluginSuccess;
};

bool covers(Comm* c, void* mhandle, const void* data, size_t size) {
  auto* r = static_cast<Region*>(mhandle);
  if (std::find(c->regions.begin(), c->regions.end(), r) == c->regions.end()) return false;
  const char* p = static_cast<const char*>(data);
  return p >= r->base && p + size <= r->base + r->size;
}

PluginResult fail(Comm* c, PluginResult rc, const char* what) {
  TS_LOG(kPluginLogWarn, "TestSock: %s: %s", what, strerror(errno));
  c->failed = rc;
  return rc;
}

// Moves the queued requests' headers and data, oldest first, as far as the socket
// allows. A receive knows its length once its header arrived.
PluginResult pump(Comm* c) {
  constexpr size_t kHeader = sizeof(uint64_t);
  while (c->failed == kPluginSuccess && !c->queue.empty()) {
    Request* r = c->queue.front();
    const size_t total = kHeader + (c->send || r->moved >= kHeader ? r->header : 0);
    if (r->moved < total) {
      char* at = r->moved < kHeader ? reinterpret_cast<char*>(&r->header) + r->moved : r->data + (r->moved - kHeader);
      const size_t want = r->moved < kHeader ? kHeader - r->moved : total - r->moved;
      ssize_t n = c->send ? ::send(c->fd, at, want, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : ::recv(c->fd, at, want, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return kPluginSuccess;
      if (n < 0) return fail(c, kPluginSystemError, c->send ? "send" : "recv");
      if (n == 0) {
        errno = ECONNRESET;
        return fail(c, kPluginRemoteError, "peer closed the connection");
      }
      r->moved += static_cast<size_t>(n);
      if (!c->send && r->moved == kHeader && r->header > r->size) {
        TS_LOG(kPluginLogWarn, "TestSock: a message of %llu bytes for a receive of %zu",
               static_cast<unsigned long long>(r->header), r->size);
        c->failed = kPluginInternalError;
      }
      continue;
    }
    r->size = r->header;
    r->done = true;
    ++c->messages;
    c->bytes += r->size;
    c->queue.pop_front();
  }
  return c->failed;
}

PluginResult tsInit(PluginLogger logger) {
  gLog = logger;
  TS_LOG(kPluginLogInfo, "TestSock: initialised");
  return kPluginSuccess;
}

PluginResult tsDevices(int* n) {
  *n = 1;
  return kPluginSuccess;
}

char gDevName[] = "lo";

template <typename P>
void fillCommon(P* p) {
  p->name = gDevName;
  p->pciPath = nullptr;
  p->guid = 0x7e57;
  p->ptrSupport = gpuOn() ? kPtrHost | kPtrCuda | kPtrDmaBuf : kPtrHost;
  p->regIsGlobal = 0;
  p->speedMbps = 10000;
  p->port = 0;
  p->latencyUs = 0;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  p->deviceType = 0;
  p->deviceVersion = 0;
}

PluginResult tsPropsV8(int dev, PluginPropsV8* p) {
  if (dev != 0) return kPluginInvalidArgument;
  fillCommon(p);
  return kPluginSuccess;
}

size_t maxP2pBytes() {
  const char* v = std::getenv("TESTSOCK_MAX_P2P");
  return v ? std::strtoull(v, nullptr, 10) : size_t{1} << 30;
}

// Versions 9 on: the virtual device (of 4 or 8) holds the one physical device.
template <typename P>
PluginResult tsPropsVDevice(int dev, P* p) {
  if (dev != 0) return kPluginInvalidArgument;
  fillCommon(p);
  p->forceFlush = 0;
  p->virtualDevice = {1, {0}};
  p->maxP2pBytes = maxP2pBytes();
  p->maxCollBytes = size_t{1} << 30;
  return kPluginSuccess;
}

PluginResult tsPropsV9(int dev, PluginPropsV9* p) { return tsPropsVDevice(dev, p); }

PluginResult tsPropsV11(int dev, PluginPropsV11* p) {
  p->maxMultiRequestSize = 1;
  return tsPropsVDevice(dev, &p->base);
}

PluginResult tsPropsV12(int dev, PluginPropsV12* p) {
  p->maxMultiRequestSize = 1;
  p->railId = 0;
  p->planeId = kPluginIdUndefined;
  return tsPropsVDevice(dev, &p->base);
}

PluginResult tsListen(int dev, void* handle, void** listenComm) {
  if (dev != 0) return kPluginInvalidArgument;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    TS_LOG(kPluginLogWarn, "TestSock: listen: %s", strerror(errno));
    if (fd >= 0) ::close(fd);
    return kPluginSystemError;
  }
  Handle h{kMagic, ntohs(a.sin_port), 0, 0, 0};
  std::memset(handle, 0, sizeof(Handle));
  std::memcpy(handle, &h, sizeof(h));
  *listenComm = new Listen{fd, 0};
  return kPluginSuccess;
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// First call: starts a non-blocking connect and answers "not yet"; so does the second.
// Later calls: "not yet" until the socket is writable, then the comm.
PluginResult tsConnectCore(void* handle, void** sendComm) {
  auto* h = static_cast<Handle*>(handle);
  *sendComm = nullptr;
  if (h->magic != kMagic) {
    TS_LOG(kPluginLogWarn, "TestSock: connect: not a TestSock handle");
    return kPluginInternalError;
  }
  if (h->pendingFd == 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(h->port);
    if (fd < 0 || (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS)) {
      TS_LOG(kPluginLogWarn, "TestSock: connect to port %u: %s", h->port, strerror(errno));
      if (fd >= 0) ::close(fd);
      return kPluginSystemError;
    }
    h->pendingFd = fd + 1;
    h->calls = 1;
    return kPluginSuccess;
  }
  if (++h->calls <= 2) return kPluginSuccess;
  const int fd = h->pendingFd - 1;
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) == 0) return kPluginSuccess;
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  h->pendingFd = 0;
  if (err != 0) {
    TS_LOG(kPluginLogWarn, "TestSock: connect to port %u: %s", h->port, strerror(err));
    ::close(fd);
    return kPluginSystemError;
  }
  setNoDelay(fd);
  *sendComm = new Comm{fd, true, {}, {}, {}};
  return kPluginSuccess;
}

PluginResult tsConnectV8(int dev, void* handle, void** sendComm, PluginDeviceHandle** /*offload*/) {
  if (dev != 0) return kPluginInvalidArgument;
  return tsConnectCore(handle, sendComm);
}

PluginResult tsConnectV10(int dev, PluginCommConfig*, void* handle, void** sendComm, PluginDeviceHandle** offload) {
  return tsConnectV8(dev, handle, sendComm, offload);
}

PluginResult tsAccept(void* listenComm, void** recvComm, PluginDeviceHandle** /*offload*/) {
  auto* l = static_cast<Listen*>(listenComm);
  *recvComm = nullptr;
  if (l->acceptCalls++ < 2) return kPluginSuccess;  // "not yet", always twice
  int fd = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return kPluginSuccess;
    TS_LOG(kPluginLogWarn, "TestSock: accept: %s", strerror(errno));
    return kPluginSystemError;
  }
  setNoDelay(fd);
  *recvComm = new Comm{fd, false, {}, {}, {}};
  return kPluginSuccess;
}

PluginResult tsRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != kPtrHost && !(type == kPtrCuda && gpuOn())) {
    TS_LOG(kPluginLogWarn, "TestSock: regMr of memory type %d (host only)", type);
    return kPluginInvalidArgument;
  }
  auto* c = static_cast<Comm*>(comm);
  auto* r = new Region{c, static_cast<char*>(data), size, type == kPtrCuda};
  c->regions.push_back(r);
  *mhandle = r;
  return kPluginSuccess;
}

PluginResult tsRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  struct stat st {};
  if (!gpuOn() || type != kPtrCuda) return kPluginInvalidUsage;
  if (fstat(fd, &st) != 0 || offset + size > static_cast<uint64_t>(st.st_size)) {
    TS_LOG(kPluginLogWarn, "TestSock: regMrDmaBuf: fd %d does not cover %zu bytes at offset %llu", fd, size,
           static_cast<unsigned long long>(offset));
    return kPluginInvalidArgument;
  }
  return tsRegMr(comm, data, size, kPtrCuda, mhandle);
}

PluginResult tsDeregMr(void* comm, void* mhandle) {
  auto* c = static_cast<Comm*>(comm);
  auto it = std::find(c->regions.begin(), c->regions.end(), static_cast<Region*>(mhandle));
  if (it == c->regions.end()) {
    TS_LOG(kPluginLogWarn, "TestSock: deregMr of a handle this comm does not hold");
    return kPluginInvalidUsage;
  }
  delete *it;
  c->regions.erase(it);
  return kPluginSuccess;
}

PluginResult post(Comm* c, void* data, size_t size, void* mhandle, void** request) {
  *request = nullptr;
  if (!covers(c, mhandle, data, size)) {
    TS_LOG(kPluginLogWarn, "TestSock: %s of %zu bytes outside the region of its mhandle", c->send ? "isend" : "irecv",
           size);
    return kPluginInvalidArgument;
  }
  if (c->failed != kPluginSuccess) return c->failed;
  if (c->live.size() >= kMaxInflight) return kPluginSuccess;  // no free request: a null one
  auto* r = new Request{c, static_cast<char*>(data), size, c->send ? size : 0, 0, false};
  c->queue.push_back(r);
  c->live.insert(r);
  *request = r;
  (void)pump(c);  // a failure shows in test()
  return kPluginSuccess;
}

PluginResult tsIsendCore(void* sendComm, void* data, size_t size, void* mhandle, void** request) {
  return post(static_cast<Comm*>(sendComm), data, size, mhandle, request);
}

PluginResult tsIrecvCore(void* recvComm, int n, void** data, size_t size, void** mhandles, void** request) {
  if (n != 1) return kPluginInvalidArgument;
  return post(static_cast<Comm*>(recvComm), data[0], size, mhandles[0], request);
}

PluginResult tsIsendV8(void* c, void* data, int size, int, void* mh, void** req) {
  return tsIsendCore(c, data, static_cast<size_t>(size), mh, req);
}
PluginResult tsIrecvV8(void* c, int n, void** data, int* sizes, int*, void** mhs, void** req) {
  return tsIrecvCore(c, n, data, static_cast<size_t>(sizes[0]), mhs, req);
}
PluginResult tsIsendV9(void* c, void* data, size_t size, int, void* mh, void** req) {
  return tsIsendCore(c, data, size, mh, req);
}
PluginResult tsIrecvV9(void* c, int n, void** data, size_t* sizes, int*, void** mhs, void** req) {
  return tsIrecvCore(c, n, data, sizes[0], mhs, req);
}
PluginResult tsIsendV10(void* c, void* data, size_t size, int, void* mh, void*, void** req) {
  return tsIsendCore(c, data, size, mh, req);
}
PluginResult tsIrecvV10(void* c, int n, void** data, size_t* sizes, int*, void** mhs, void**, void** req) {
  return tsIrecvCore(c, n, data, sizes[0], mhs, req);
}

// A receive into GPU memory gets a flush request, done at its first test (a real plugin
// reads a byte back over a loopback QP); host memory needs none.
PluginResult tsIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  *request = nullptr;
  auto* c = static_cast<Comm*>(recvComm);
  if (n != 1 || !covers(c, mhandles[0], data[0], static_cast<size_t>(sizes[0]))) return kPluginInvalidArgument;
  if (!static_cast<Region*>(mhandles[0])->gpu) return kPluginSuccess;
  auto* r = new Request{c, static_cast<char*>(data[0]), 0, 0, 0, true};
  c->live.insert(r);
  ++c->flushes;
  *request = r;
  return kPluginSuccess;
}

PluginResult tsTest(void* request, int* done, int* size) {
  auto* r = static_cast<Request*>(request);
  Comm* c = r->comm;
  if (!r->done) {
    PluginResult rc = pump(c);
    if (rc != kPluginSuccess && !r->done) return rc;
  }
  *done = r->done ? 1 : 0;
  if (r->done) {
    if (size) *size = static_cast<int>(r->size);
    c->live.erase(r);
    delete r;
  }
  return kPluginSuccess;
}

PluginResult closeComm(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  TS_LOG(kPluginLogInfo, "TestSock: %s connection closed after %llu messages, %llu bytes, %llu flushes",
         c->send ? "send" : "receive", c->messages, c->bytes, c->flushes);
  for (Request* r : c->live) delete r;
  for (Region* r : c->regions) delete r;
  ::close(c->fd);
  delete c;
  return kPluginSuccess;
}

PluginResult tsCloseListen(void* listenComm) {
  auto* l = static_cast<Listen*>(listenComm);
  ::close(l->fd);
  delete l;
  return kPluginSuccess;
}

PluginResult tsGetDeviceMr(void*, void*, void**) { return kPluginInvalidUsage; }
PluginResult tsIrecvConsumed(void*, int, void*) { return kPluginSuccess; }
PluginResult tsMakeVDevice(int*, PluginVirtualDevice*) { return kPluginInvalidUsage; }
PluginResult tsMakeVDeviceV12(int*, PluginVirtualDeviceV12*) { return kPluginInvalidUsage; }

PluginResult tsInitV10(PluginLogger logger, PluginProfiler) { return tsInit(logger); }
char gContext = 0;
PluginResult tsInitV11(void** ctx, uint64_t, PluginCommConfig*, PluginLogger logger, PluginProfiler) {
  *ctx = &gContext;
  return tsInit(logger);
}
PluginResult tsListenV11(void* ctx, int dev, void* handle, void** listenComm) {
  if (ctx != &gContext) return kPluginInvalidArgument;
  return tsListen(dev, handle, listenComm);
}
PluginResult tsConnectV11(void* ctx, int dev, void* handle, void** sendComm, PluginDeviceHandle** offload) {
  if (ctx != &gContext) return kPluginInvalidArgument;
  return tsConnectV8(dev, handle, sendComm, offload);
}
PluginResult tsFinalize(void*) { return kPluginSuccess; }
PluginResult tsSetNetAttr(void*, void*) { return kPluginSuccess; }

[[maybe_unused]] constexpr PluginNetV8 kTableV8 = {"TestSock",  tsInit,        tsDevices,     tsPropsV8,      tsListen,
                                                   tsConnectV8, tsAccept,      tsRegMr,       tsRegMrDmaBuf,  tsDeregMr,
                                                   tsIsendV8,   tsIrecvV8,     tsIflush,      tsTest,         closeComm,
                                                   closeComm,   tsCloseListen, tsGetDeviceMr, tsIrecvConsumed};

// Versions 11 and 12 differ in their properties and virtual NIC only.
template <typename Props, typename VDevice>
constexpr auto tableWithContext(PluginResult (*props)(int, Props*), PluginResult (*makeVDevice)(int*, VDevice*)) {
  return PluginNetWithContext<Props, VDevice>{
      "TestSock",    tsInitV11,     tsDevices,       props,       tsListenV11, tsConnectV11, tsAccept,  tsRegMr,
      tsRegMrDmaBuf, tsDeregMr,     tsIsendV10,      tsIrecvV10,  tsIflush,    tsTest,       closeComm, closeComm,
      tsCloseListen, tsGetDeviceMr, tsIrecvConsumed, makeVDevice, tsFinalize,  tsSetNetAttr};
}

}  // namespace

#define TS_EXPORT __attribute__((visibility("default")))

extern "C" {

#ifdef TESTSOCK_V12
TS_EXPORT PluginNetV12 ncclNetPlugin_v12 = tableWithContext(tsPropsV12, tsMakeVDeviceV12);
#endif
#ifdef TESTSOCK_V11
TS_EXPORT PluginNetV11 ncclNetPlugin_v11 = tableWithContext(tsPropsV11, tsMakeVDevice);
#endif
#ifdef TESTSOCK_V10
TS_EXPORT PluginNetV10 ncclNetPlugin_v10 = {"TestSock",   tsInitV10,     tsDevices,     tsPropsV9,       tsListen,
                                            tsConnectV10, tsAccept,      tsRegMr,       tsRegMrDmaBuf,   tsDeregMr,
                                            tsIsendV10,   tsIrecvV10,    tsIflush,      tsTest,          closeComm,
                                            closeComm,    tsCloseListen, tsGetDeviceMr, tsIrecvConsumed, tsMakeVDevice};
#endif
#ifdef TESTSOCK_V9
TS_EXPORT PluginNetV9 ncclNetPlugin_v9 = {"TestSock",  tsInit,        tsDevices,     tsPropsV9,       tsListen,
                                          tsConnectV8, tsAccept,      tsRegMr,       tsRegMrDmaBuf,   tsDeregMr,
                                          tsIsendV9,   tsIrecvV9,     tsIflush,      tsTest,          closeComm,
                                          closeComm,   tsCloseListen, tsGetDeviceMr, tsIrecvConsumed, tsMakeVDevice};
#endif
#ifdef TESTSOCK_V8
TS_EXPORT PluginNetV8 ncclNetPlugin_v8 = kTableV8;
#endif
// Tables under the names of versions the loader must refuse: one too old, one too new.
#ifdef TESTSOCK_V6
TS_EXPORT PluginNetV8 ncclNetPlugin_v6 = kTableV8;
#endif
#ifdef TESTSOCK_V13
TS_EXPORT PluginNetV8 ncclNetPlugin_v13 = kTableV8;
#endif

}  // extern "C"

#include "transport/net/plugin/plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/env_plugin.h"
#include "base/log.h"
#include "base/param.h"
#include "base/plugin_lib.h"
#include "transport/net/plugin/net_plugin_abi.h"

namespace coll {

namespace {

using namespace netabi;

const char* resultName(int r) {
  switch (r) {
    case kPluginSuccess: return "ncclSuccess";
    case kPluginUnhandledCudaError: return "ncclUnhandledCudaError";
    case kPluginSystemError: return "ncclSystemError";
    case kPluginInternalError: return "ncclInternalError";
    case kPluginInvalidArgument: return "ncclInvalidArgument";
    case kPluginInvalidUsage: return "ncclInvalidUsage";
    case kPluginRemoteError: return "ncclRemoteError";
    case kPluginInProgress: return "ncclInProgress";
    default: return "an unknown ncclResult_t";
  }
}

// The plugin's verdict as ours: a peer's failure stays a remote error (the executor then
// looks for a dead rank), the rest keep their meaning.
Code resultCode(int r) {
  switch (r) {
    case kPluginUnhandledCudaError: return Code::kCuda;
    case kPluginSystemError: return Code::kSystem;
    case kPluginInvalidArgument: return Code::kInvalidArgument;
    case kPluginInvalidUsage: return Code::kInvalidUsage;
    case kPluginRemoteError: return Code::kRemote;
    default: return Code::kInternal;
  }
}

// A plugin's log line, through our logger (base/plugin_lib.h), under NET where its flags
// name none of our subsystems.
void pluginLog(PluginLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pluginLogV(kSubNET, level, flags, file ? file : "net plugin", line, fmt, ap);
  va_end(ap);
}

// Given to init from version 10 on: we record no network events.
PluginResult noProfiler(void** event, int, void*, int64_t, void*) {
  if (event) *event = nullptr;
  return kPluginSuccess;
}

template <typename T>
constexpr int kAbi = std::is_same_v<T, PluginNetV12>   ? 12
                     : std::is_same_v<T, PluginNetV11> ? 11
                     : std::is_same_v<T, PluginNetV10> ? 10
                     : std::is_same_v<T, PluginNetV9>  ? 9
                                                       : 8;

// The properties type a table's getProperties fills (declared only, for decltype).
template <typename P>
P propertiesOf(PluginResult (*)(int, P*));

// The fields every version shares: the whole struct, or its `base` from version 11 on.
template <typename P>
const auto& commonProperties(const P& p) {
  if constexpr (requires { p.base; }) return p.base;
  else return p;
}

template <typename P>
void copyProperties(const P& p, NetProperties* out) {
  out->name = p.name ? p.name : "";
  out->speedMbps = p.speedMbps;
  out->maxComms = p.maxComms;
  out->cudaPtr = (p.ptrSupport & kPtrCuda) != 0;
  out->dmaBuf = (p.ptrSupport & kPtrDmaBuf) != 0;
  out->hostMemOnly = !out->cudaPtr && !out->dmaBuf;
  out->pciPath = p.pciPath ? p.pciPath : "";
}

// One loaded library: its table, its ABI version, and each call spelled for that
// version. Lives as long as the process.
class PluginLib {
 public:
  PluginLib(void* dl, std::string path, int version, const void* table)
      : dl_(dl), path_(std::move(path)), version_(version), table_(table) {
    name_ = visit([](const auto& n) -> const char* { return n.name ? n.name : ""; });
  }
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  int version() const { return version_; }

  // A failed call, as our Status: the plugin, the call and its ncclResult_t.
  Status error(int rc, const char* call) const {
    return Status(resultCode(rc), "net plugin " + name_ + " (" + path_ + "): " + call + " returned " + resultName(rc) +
                                      " (" + std::to_string(rc) + ")");
  }
  Status check(int rc, const char* call) const { return rc == kPluginSuccess ? okStatus() : error(rc, call); }

  // The name of the first member the plugin left null among those we call, or nullptr.
  const char* missingMember() const {
    return visit([](const auto& n) -> const char* {
      if (!n.init) return "init";
      if (!n.devices) return "devices";
      if (!n.getProperties) return "getProperties";
      if (!n.listen) return "listen";
      if (!n.connect) return "connect";
      if (!n.accept) return "accept";
      if (!n.regMr || !n.deregMr) return "regMr/deregMr";
      if (!n.isend || !n.irecv || !n.test) return "isend/irecv/test";
      if (!n.closeSend || !n.closeRecv || !n.closeListen) return "closeSend/closeRecv/closeListen";
      return nullptr;
    });
  }

  int init() {
    return visit([this](const auto& n) -> int {
      using T = std::decay_t<decltype(n)>;
      if constexpr (kAbi<T> >= 11) {
        PluginCommConfig config{-1};
        return n.init(&context_, 0, &config, pluginLog, noProfiler);
      } else if constexpr (kAbi<T> == 10) {
        return n.init(pluginLog, noProfiler);
      } else {
        return n.init(pluginLog);
      }
    });
  }
  int devices(int* count) const {
    return visit([&](const auto& n) -> int { return n.devices(count); });
  }
  // Also the largest message a connection on `dev` takes (maxMessage).
  Status properties(int dev, NetProperties* out, size_t* maxMessage) const {
    return visit([&](const auto& n) -> Status {
      decltype(propertiesOf(n.getProperties)) p{};
      COLL_CHECK(check(n.getProperties(dev, &p), "getProperties"));
      const auto& common = commonProperties(p);
      copyProperties(common, out);
      *maxMessage = INT_MAX;  // test() reports sizes as int
      if constexpr (requires { common.maxP2pBytes; }) return limitMessages(dev, common.maxP2pBytes, maxMessage);
      return okStatus();
    });
  }
  int listen(int dev, void* handle, void** comm) const {
    return visit([&](const auto& n) -> int {
      if constexpr (kAbi<std::decay_t<decltype(n)>> >= 11) return n.listen(context_, dev, handle, comm);
      else return n.listen(dev, handle, comm);
    });
  }
  int connect(int dev, void* handle, void** comm) const {
    return visit([&](const auto& n) -> int {
      using T = std::decay_t<decltype(n)>;
      PluginDeviceHandle* offload = nullptr;  // no device offload asked for
      if constexpr (kAbi<T> >= 11) {
        return n.connect(context_, dev, handle, comm, &offload);
      } else if constexpr (kAbi<T> == 10) {
        PluginCommConfig config{-1};
        return n.connect(dev, &config, handle, comm, &offload);
      } else {
        return n.connect(dev, handle, comm, &offload);
      }
    });
  }
  int accept(void* listenComm, void** comm) const {
    return visit([&](const auto& n) -> int {
      PluginDeviceHandle* offload = nullptr;
      return n.accept(listenComm, comm, &offload);
    });
  }
  // GPU memory (range: NetBackend::GpuRange) as a dma-buf where one is given, else as a
  // CUDA pointer; host memory with range null.
  int regMr(void* comm, void* data, size_t size, const NetBackend::GpuRange* range, void** mhandle) const {
    return visit([&](const auto& n) -> int {
      if (!range) return n.regMr(comm, data, size, kPtrHost, mhandle);
      if (range->dmaBufFd < 0) return n.regMr(comm, data, size, kPtrCuda, mhandle);
      if (!n.regMrDmaBuf) return kPluginInternalError;
      return n.regMrDmaBuf(comm, data, size, kPtrCuda, range->offset, range->dmaBufFd, mhandle);
    });
  }
  // Null *req: nothing to flush (also where the plugin has no iflush).
  int iflush(void* comm, void* data, size_t size, void* mhandle, void** req) const {
    return visit([&](const auto& n) -> int {
      *req = nullptr;
      if (!n.iflush) return kPluginSuccess;
      void* buffers[1] = {data};
      int sizes[1] = {static_cast<int>(size)};
      void* mhandles[1] = {mhandle};
      return n.iflush(comm, 1, buffers, sizes, mhandles, req);
    });
  }
  int deregMr(void* comm, void* mhandle) const {
    return visit([&](const auto& n) -> int { return n.deregMr(comm, mhandle); });
  }
  int isend(void* comm, void* data, size_t size, void* mhandle, void** req) const;
  int irecv(void* comm, void* data, size_t size, void* mhandle, void** req) const;
  int test(void* req, int* done, int* size) const {
    return visit([&](const auto& n) -> int { return n.test(req, done, size); });
  }
  int closeSend(void* c) const {
    return visit([&](const auto& n) -> int { return n.closeSend(c); });
  }
  int closeRecv(void* c) const {
    return visit([&](const auto& n) -> int { return n.closeRecv(c); });
  }
  int closeListen(void* c) const {
    return visit([&](const auto& n) -> int { return n.closeListen(c); });
  }

 private:
  // A device's maxP2pBytes (version 9 on), checked as NCCL checks it before a connection.
  Status limitMessages(int dev, size_t maxP2pBytes, size_t* maxMessage) const {
    if (maxP2pBytes == 0 || maxP2pBytes > kPluginMaxNetBytes)
      return internalError("net plugin " + name_ + " (" + path_ + "): device " + std::to_string(dev) +
                           " reports maxP2pBytes " + std::to_string(maxP2pBytes) + " (valid: 1 to " +
                           std::to_string(kPluginMaxNetBytes) + ")");
    *maxMessage = std::min(*maxMessage, maxP2pBytes);
    return okStatus();
  }

  // Calls f with the table as its version's type (every f returns the same type for all).
  template <typename F>
  auto visit(F&& f) const -> decltype(f(std::declval<const PluginNetV8&>())) {
    switch (version_) {
      case 12: return f(*static_cast<const PluginNetV12*>(table_));
      case 11: return f(*static_cast<const PluginNetV11*>(table_));
      case 10: return f(*static_cast<const PluginNetV10*>(table_));
      case 9: return f(*static_cast<const PluginNetV9*>(table_));
      default: return f(*static_cast<const PluginNetV8*>(table_));
    }
  }

  void* dl_;
  std::string path_;
  int version_;
  const void* table_;
  std::string name_;
  void* context_ = nullptr;  // from init, versions 11 and 12
};

// Sizes are int before version 9 (the caller checks they fit); the tag is always 0 (one
// stream of messages per comm, completed in order).
int PluginLib::isend(void* comm, void* data, size_t size, void* mhandle, void** req) const {
  return visit([&](const auto& n) -> int {
    using T = std::decay_t<decltype(n)>;
    if constexpr (kAbi<T> == 8) return n.isend(comm, data, static_cast<int>(size), 0, mhandle, req);
    else if constexpr (kAbi<T> == 9) return n.isend(comm, data, size, 0, mhandle, req);
    else return n.isend(comm, data, size, 0, mhandle, nullptr, req);
  });
}

int PluginLib::irecv(void* comm, void* data, size_t size, void* mhandle, void** req) const {
  return visit([&](const auto& n) -> int {
    using T = std::decay_t<decltype(n)>;
    int tag = 0;
    void* buffers[1] = {data};
    void* mhandles[1] = {mhandle};
    if constexpr (kAbi<T> == 8) {
      int sizes[1] = {static_cast<int>(size)};
      return n.irecv(comm, 1, buffers, sizes, &tag, mhandles, req);
    } else if constexpr (kAbi<T> == 9) {
      size_t sizes[1] = {size};
      return n.irecv(comm, 1, buffers, sizes, &tag, mhandles, req);
    } else {
      size_t sizes[1] = {size};
      void* profiling[1] = {nullptr};
      return n.irecv(comm, 1, buffers, sizes, &tag, mhandles, profiling, req);
    }
  });
}

// A listener, shared by the pending receive comm accept() hands out: the plugin's
// listen comm must live until its accept succeeds. maxMessage: its device's largest.
struct ListenState {
  ListenState(PluginLib* l, void* c, size_t max) : lib(l), comm(c), maxMessage(max) {}
  ~ListenState() {
    int rc = lib->closeListen(comm);
    if (rc != kPluginSuccess) COLL_INFO(NET, "%s", lib->error(rc, "closeListen").message().c_str());
  }
  PluginLib* lib;
  void* comm;
  size_t maxMessage;
};

class PluginListen : public NetListenComm {
 public:
  std::shared_ptr<ListenState> state;
};

class PluginConn;
struct PluginRequest : NetRequest {
  PluginConn* conn;
  void* req;
};

// One direction of a connection: the plugin's comm once connect/accept gave it, the
// ranges registered on it (or waiting for it), and the requests in flight.
class PluginConn {
 public:
  // Sender: connect() retried with the same handle buffer (a plugin may keep its
  // connection state there between calls, as NCCL's IB plugin does).
  PluginConn(PluginLib* lib, int dev, const NetHandle& handle, size_t maxMessage)
      : lib_(lib), send_(true), dev_(dev), maxMessage_(maxMessage) {
    std::memcpy(handle_, handle.bytes, sizeof(handle.bytes));
  }
  // Receiver: accept() retried on the listener.
  PluginConn(PluginLib* lib, std::shared_ptr<ListenState> listen)
      : lib_(lib), send_(false), maxMessage_(listen->maxMessage), listen_(std::move(listen)) {}
  ~PluginConn();
  PluginConn(const PluginConn&) = delete;
  PluginConn& operator=(const PluginConn&) = delete;

  bool established() const { return comm_ != nullptr; }
  size_t maxMessage() const { return maxMessage_; }
  void* comm() const { return comm_; }
  Status establish();
  // range: GPU memory (NetBackend::regMrGpu); null: host memory.
  Status regMr(void* data, size_t size, const NetBackend::GpuRange* range = nullptr);
  Result<void*> mhandleFor(const void* data, size_t size, bool* gpu = nullptr) const;
  NetRequest* track(void* req) {
    auto* r = new PluginRequest();
    r->conn = this;
    r->req = req;
    live_.push_back(r);
    return r;
  }
  void retire(PluginRequest* r) {
    live_.erase(std::find(live_.begin(), live_.end(), r));
    delete r;
  }

 private:
  struct Registration {
    char* base;
    size_t size;
    void* mhandle;
    bool gpu;
  };
  struct Wanted {
    void* data;
    size_t size;
    bool gpu;
    NetBackend::GpuRange range;
  };
  Status registerNow(const Wanted& w);

  PluginLib* lib_;
  bool send_;
  int dev_ = 0;
  size_t maxMessage_;  // the device's maxP2pBytes, at most INT_MAX
  char handle_[kPluginHandleBytes] = {};
  std::shared_ptr<ListenState> listen_;
  void* comm_ = nullptr;
  std::vector<Wanted> wanted_;  // regMr before the comm existed
  std::vector<Registration> regs_;
  std::vector<PluginRequest*> live_;
};

PluginConn::~PluginConn() {
  // Requests still in flight are the plugin's to drop when the comm closes.
  for (PluginRequest* r : live_) delete r;
  if (!comm_) return;
  for (const Registration& g : regs_) {
    int rc = lib_->deregMr(comm_, g.mhandle);
    if (rc != kPluginSuccess) COLL_INFO(NET, "%s", lib_->error(rc, "deregMr").message().c_str());
  }
  int rc = send_ ? lib_->closeSend(comm_) : lib_->closeRecv(comm_);
  if (rc != kPluginSuccess) COLL_INFO(NET, "%s", lib_->error(rc, send_ ? "closeSend" : "closeRecv").message().c_str());
}

// One more try of the plugin's connect/accept; success with no comm means "later".
Status PluginConn::establish() {
  if (comm_) return okStatus();
  void* c = nullptr;
  const int rc = send_ ? lib_->connect(dev_, handle_, &c) : lib_->accept(listen_->comm, &c);
  COLL_CHECK(lib_->check(rc, send_ ? "connect" : "accept"));
  if (!c) return okStatus();
  comm_ = c;
  listen_.reset();  // the listener served its one connection (NCCL closes it here too)
  for (const Wanted& w : wanted_) COLL_CHECK(registerNow(w));
  wanted_.clear();
  return okStatus();
}

Status PluginConn::regMr(void* data, size_t size, const NetBackend::GpuRange* range) {
  const Wanted w{data, size, range != nullptr, range ? *range : NetBackend::GpuRange{}};
  if (!comm_) {
    wanted_.push_back(w);
    return okStatus();
  }
  return registerNow(w);
}

Status PluginConn::registerNow(const Wanted& w) {
  void* mh = nullptr;
  const char* call = !w.gpu ? "regMr" : w.range.dmaBufFd >= 0 ? "regMrDmaBuf" : "regMr (a CUDA pointer)";
  COLL_CHECK(lib_->check(lib_->regMr(comm_, w.data, w.size, w.gpu ? &w.range : nullptr, &mh), call));
  regs_.push_back({static_cast<char*>(w.data), w.size, mh, w.gpu});
  return okStatus();
}

Result<void*> PluginConn::mhandleFor(const void* data, size_t size, bool* gpu) const {
  const char* p = static_cast<const char*>(data);
  for (const Registration& g : regs_)
    if (p >= g.base && p + size <= g.base + g.size) {
      if (gpu) *gpu = g.gpu;
      return g.mhandle;
    }
  return invalidUsage("net plugin " + lib_->name() + ": a buffer of " + std::to_string(size) +
                      " bytes was not registered on its connection (regMr)");
}

class PluginSend : public NetSendComm {
 public:
  PluginSend(PluginLib* lib, int dev, const NetHandle& h, size_t maxMessage) : conn(lib, dev, h, maxMessage) {}
  PluginConn conn;
};
class PluginRecv : public NetRecvComm {
 public:
  PluginRecv(PluginLib* lib, std::shared_ptr<ListenState> l) : conn(lib, std::move(l)) {}
  PluginConn conn;
};

// The pattern written past our handle's bytes before listen(), to see whether the plugin
// needed more than we can ship.
constexpr unsigned char kHandleFill = 0xA5;

class PluginBackend : public NetBackend {
 public:
  PluginBackend(std::unique_ptr<PluginLib> lib, int ndev) : lib_(std::move(lib)), ndev_(ndev) {}
  const char* name() const override { return lib_->name().c_str(); }
  int version() const { return lib_->version(); }
  int devices() override { return ndev_; }
  Status properties(int dev, NetProperties* props) override {
    size_t maxMessage = 0;
    return properties(dev, props, &maxMessage);
  }

  // NCCL's plugin ABI has no place for the communicator's key: connections through a
  // plugin are not authenticated by this library (docs/SECURITY.md).
  Result<std::unique_ptr<NetListenComm>> listen(int dev, const AuthKey&, NetHandle* handle) override {
    NetProperties props;
    size_t maxMessage = 0;
    COLL_CHECK(properties(dev, &props, &maxMessage));
    unsigned char buf[kPluginHandleBytes];
    std::memset(buf, kHandleFill, sizeof(buf));
    void* comm = nullptr;
    COLL_CHECK(lib_->check(lib_->listen(dev, buf, &comm), "listen"));
    auto l = std::make_unique<PluginListen>();
    l->state = std::make_shared<ListenState>(lib_.get(), comm, maxMessage);
    for (size_t i = kNetHandleBytes; i < sizeof(buf); ++i)
      if (buf[i] != kHandleFill)
        return internalError("net plugin " + lib_->name() + ": its connection handle is larger than the " +
                             std::to_string(kNetHandleBytes) + " bytes a net connection carries");
    std::memcpy(handle->bytes, buf, kNetHandleBytes);
    return std::unique_ptr<NetListenComm>(std::move(l));
  }
  // Never waits (the plugin's connect is non-blocking): nothing to cancel.
  Result<std::unique_ptr<NetSendComm>> connect(int dev, const NetHandle& handle, const AuthKey&,
                                               const std::atomic<bool>*) override {
    NetProperties props;
    size_t maxMessage = 0;
    COLL_CHECK(properties(dev, &props, &maxMessage));
    auto s = std::make_unique<PluginSend>(lib_.get(), dev, handle, maxMessage);
    COLL_CHECK(s->conn.establish());
    return std::unique_ptr<NetSendComm>(std::move(s));
  }
  Result<std::unique_ptr<NetRecvComm>> accept(NetListenComm* lc) override {
    auto r = std::make_unique<PluginRecv>(lib_.get(), static_cast<PluginListen*>(lc)->state);
    COLL_CHECK(r->conn.establish());
    return std::unique_ptr<NetRecvComm>(std::move(r));
  }
  Status regMr(NetSendComm* c, void* data, size_t size) override {
    return static_cast<PluginSend*>(c)->conn.regMr(data, size);
  }
  Status regMr(NetRecvComm* c, void* data, size_t size) override {
    return static_cast<PluginRecv*>(c)->conn.regMr(data, size);
  }
  Status regMrGpu(NetSendComm* c, void* data, size_t size, const GpuRange& range) override {
    return static_cast<PluginSend*>(c)->conn.regMr(data, size, &range);
  }
  Status regMrGpu(NetRecvComm* c, void* data, size_t size, const GpuRange& range) override {
    return static_cast<PluginRecv*>(c)->conn.regMr(data, size, &range);
  }
  // The plugin's iflush for receives into GPU memory (null request: none needed).
  Result<NetRequest*> iflush(NetRecvComm* rc, void* data, size_t size) override {
    PluginConn& c = static_cast<PluginRecv*>(rc)->conn;
    bool gpu = false;
    COLL_ASSIGN(void* mh, c.mhandleFor(data, size, &gpu));
    if (!gpu || size == 0) return static_cast<NetRequest*>(nullptr);
    void* req = nullptr;
    COLL_CHECK(lib_->check(lib_->iflush(c.comm(), data, size, mh, &req), "iflush"));
    if (!req) return static_cast<NetRequest*>(nullptr);
    return c.track(req);
  }
  Result<NetRequest*> isend(NetSendComm* sc, const void* data, size_t size) override {
    return post(static_cast<PluginSend*>(sc)->conn, const_cast<void*>(data), size, true);
  }
  Result<NetRequest*> irecv(NetRecvComm* rc, void* data, size_t maxSize) override {
    return post(static_cast<PluginRecv*>(rc)->conn, data, maxSize, false);
  }
  Status test(NetRequest* req, bool* done, size_t* size) override {
    auto* r = static_cast<PluginRequest*>(req);
    int finished = 0, bytes = 0;
    COLL_CHECK(lib_->check(lib_->test(r->req, &finished, &bytes), "test"));
    *done = finished != 0;
    if (*done) {
      *size = static_cast<size_t>(bytes);
      r->conn->retire(r);
    }
    return okStatus();
  }

 private:
  // The device's properties, and the largest message its connections take.
  Status properties(int dev, NetProperties* props, size_t* maxMessage) const {
    if (dev < 0 || dev >= ndev_)
      return invalidArgument("net plugin " + lib_->name() + ": device " + std::to_string(dev));
    return lib_->properties(dev, props, maxMessage);
  }

  // isend or irecv once the connection is up; a null request while it is not, or while
  // the plugin has no room (both: call again later).
  Result<NetRequest*> post(PluginConn& c, void* data, size_t size, bool send) {
    COLL_CHECK(c.establish());
    if (!c.established()) return static_cast<NetRequest*>(nullptr);
    if (size > c.maxMessage())
      return invalidArgument("net plugin " + lib_->name() + ": a message of " + std::to_string(size) +
                             " bytes, more than the " + std::to_string(c.maxMessage()) +
                             " its connection takes (the device's maxP2pBytes, at most INT_MAX: test() reports "
                             "sizes as int)");
    COLL_ASSIGN(void* mh, c.mhandleFor(data, size));
    void* req = nullptr;
    const int rc = send ? lib_->isend(c.comm(), data, size, mh, &req) : lib_->irecv(c.comm(), data, size, mh, &req);
    COLL_CHECK(lib_->check(rc, send ? "isend" : "irecv"));
    if (!req) return static_cast<NetRequest*>(nullptr);
    return c.track(req);
  }

  std::unique_ptr<PluginLib> lib_;
  int ndev_;
};

struct Supported {
  int version;
  const char* symbol;
};
constexpr Supported kSupported[] = {
    {12, kPluginSymbolV12}, {11, kPluginSymbolV11}, {10, kPluginSymbolV10}, {9, kPluginSymbolV9}, {8, kPluginSymbolV8}};
constexpr int kNewestSupported = kSupported[0].version;
constexpr int kOldestSupported = std::end(kSupported)[-1].version;

// Why a library holds no table we read: the symbols looked for and those it has.
Status noSupportedSymbol(void* dl, const std::string& path) {
  std::string found;
  bool older = false, newer = false;
  for (int v = 1; v <= 32; ++v) {
    if (v >= kOldestSupported && v <= kNewestSupported) continue;
    std::string sym = "ncclNetPlugin_v" + std::to_string(v);
    if (!dlsym(dl, sym.c_str())) continue;
    found += (found.empty() ? "" : ", ") + sym;
    (v < kOldestSupported ? older : newer) = true;
  }
  std::string msg = "net plugin " + path + " exports none of ";
  for (const Supported& s : kSupported) msg += std::string(s.symbol) + (s.version > kOldestSupported ? ", " : "");
  msg += " (the versions supported); ";
  if (found.empty())
    return invalidUsage(msg + "it exports no ncclNetPlugin_v* symbol at all (not an NCCL net plugin?)");
  msg += "it exports " + found + " (";
  msg += older ? "older than version " + std::to_string(kOldestSupported) + ", the oldest supported" : "";
  msg += older && newer ? "; " : "";
  msg += newer ? "newer than version " + std::to_string(kNewestSupported) + ", the newest supported" : "";
  return invalidUsage(msg + ")");
}

}  // namespace

Result<std::unique_ptr<NetBackend>> loadNetPlugin(const std::string& spec) {
  Result<PluginHandle> opened = openPluginLib("net", spec);
  if (!opened.ok()) return opened.takeStatus();  // no hop: the message is the WARN's
  void* dl = opened.value().handle;
  std::string path = opened.value().path;
  const Supported* which = nullptr;
  const void* table = nullptr;
  for (const Supported& s : kSupported)
    if ((table = dlsym(dl, s.symbol)) != nullptr) {
      which = &s;
      break;
    }
  Dl_info info{};
  if (table && dladdr(table, &info) && info.dli_fname) path = info.dli_fname;
  if (!table) {
    Status st = noSupportedSymbol(dl, path);
    dlclose(dl);
    return st;
  }
  auto lib = std::make_unique<PluginLib>(dl, path, which->version, table);
  if (const char* member = lib->missingMember()) {
    dlclose(dl);
    return invalidUsage("net plugin " + path + ": " + which->symbol + " leaves " + member + " null");
  }
  COLL_CHECK(lib->check(lib->init(), "init"));
  int ndev = 0;
  COLL_CHECK(lib->check(lib->devices(&ndev), "devices"));
  if (ndev <= 0) return Status(Code::kSystem, "net plugin " + lib->name() + " (" + path + ") found no devices");
  return std::unique_ptr<NetBackend>(std::make_unique<PluginBackend>(std::move(lib), ndev));
}

NetBackend* netPlugin() {
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, NetBackend*>();  // never freed: see plugin.h
  std::lock_guard<std::mutex> lock(mu);
  const char* raw = paramRaw(StringParam::NET_PLUGIN);
  const std::string spec = raw ? raw : "";
  if (pluginDisabled(raw)) return nullptr;
  auto it = loaded->find(spec);
  if (it != loaded->end()) return it->second;
  Result<std::unique_ptr<NetBackend>> r = loadNetPlugin(spec);
  NetBackend* b = nullptr;
  if (r.ok()) {
    b = r.take().release();
    auto* p = static_cast<PluginBackend*>(b);
    COLL_INFO(NET, "net plugin %s loaded (%s): ABI v%d, %d device(s)", p->name(),
              spec.empty() ? "default" : spec.c_str(), p->version(), p->devices());
  } else if (!spec.empty()) {
    const char* var = envValue("COLL_NET_PLUGIN") ? "COLL_NET_PLUGIN" : "NCCL_NET_PLUGIN";
    COLL_WARN(NET, "%s=\"%s\": %s; using the built-in Socket backend", var, spec.c_str(), r.status().message().c_str());
  } else {
    COLL_INFO(NET, "no default net plugin: %s", r.status().message().c_str());
  }
  (*loaded)[spec] = b;
  return b;
}

int netPluginVersion(const NetBackend* b) {
  auto* p = dynamic_cast<const PluginBackend*>(b);
  return p ? p->version() : 0;
}

}  // namespace coll

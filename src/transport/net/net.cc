#include "transport/net/net.h"

#include <strings.h>

#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "base/log.h"
#include "base/param.h"
#include "cuda/gpu.h"
#include "transport/net/gdr.h"
#include "transport/net/ib/ib_net.h"
#include "transport/net/net_device.h"
#include "transport/net/plugin/plugin.h"
#include "transport/net/socket/socket_net.h"

namespace coll {

namespace {

// The ib backend, made on first use (dlopens the verbs library, opens its devices); a
// failure is retried on the next call (a test may point COLL_IB_VERBS_LIB elsewhere).
Result<NetBackend*> ibBackend() {
#if COLL_HAVE_IB
  static std::mutex mu;
  static std::unique_ptr<NetBackend> ib;
  if (param(IntParam::IB_DISABLE) != 0) return invalidArgument("disabled by COLL_IB_DISABLE/NCCL_IB_DISABLE=1");
  std::lock_guard<std::mutex> lock(mu);
  if (!ib) {
    Result<std::unique_ptr<NetBackend>> made = makeIbBackend();
    if (!made.ok()) return made.takeStatus();
    ib = made.take();
  }
  return ib.get();
#else
  return Status(Code::kSystem, "this build has no ib backend (infiniband/verbs.h was not found at build time)");
#endif
}

// This rank's device of `b` for `channel`, given its GPU's bus id ("" for host ranks).
int localDevice(NetBackend* b, const std::string& gpuBusId, int channel) {
  return netDeviceFor(b, pciSysPath(gpuBusId), channel);
}

}  // namespace

std::string defaultNetName(bool* chosen) {
  const char* raw = paramRaw(StringParam::NET);
  *chosen = raw && *raw;
  if (*chosen) return raw;
  if (NetBackend* plugin = netPlugin()) return plugin->name();
  return ibBackend().ok() ? "IB" : "Socket";
}

Result<NetBackend*> netBackend() { return netBackendNamed(""); }

Result<NetBackend*> netBackendNamed(const std::string& name) {
  static std::mutex mu;
  static std::unique_ptr<NetBackend> socket;
  NetBackend* plugin = netPlugin();
  bool chosen = true;
  const std::string want = name.empty() ? defaultNetName(&chosen) : name;
  if (plugin && strcasecmp(plugin->name(), want.c_str()) == 0) return plugin;
  if (strcasecmp(want.c_str(), "IB") == 0) {
    Result<NetBackend*> ib = ibBackend();
    if (!ib.ok()) return ib.takeStatus().prefix("COLL_NET=" + want + ": ");
    return ib;
  }
  COLL_CHECK(checkNetName(want).prefix("COLL_NET: "));
  std::lock_guard<std::mutex> lock(mu);
  if (!socket) socket = makeSocketBackend();
  return socket.get();
}

Status checkNetName(const std::string& name) {
  if (strcasecmp(name.c_str(), "Socket") == 0) return okStatus();
  NetBackend* plugin = netPlugin();
  if (plugin && strcasecmp(name.c_str(), plugin->name()) == 0) return okStatus();
  // IB is available when the verbs library loads and lists a usable port; asked for by
  // name, its error says why not.
  Result<NetBackend*> ib = ibBackend();
  if (strcasecmp(name.c_str(), "IB") == 0)
    return ib.ok() ? okStatus() : invalidArgument("IB is not usable here: " + ib.status().message());
  std::string available = plugin ? std::string("Socket, ") + plugin->name() : "Socket";
  if (ib.ok()) available += ", IB";
  return invalidArgument("\"" + name + "\": no such net backend (available: " + available + ")");
}

namespace {

// A heap FIFO local to one side of a net connection. Whole pages: kernels reach it through
// cudaHostRegister, which locks whole pages, so no other allocation may share its last one
// (registering that one's memory would then fail as already registered).
struct LocalFifo {
  static size_t pages(size_t slotBytes) { return (fifoBytes(slotBytes) + 4095) & ~size_t{4095}; }
  explicit LocalFifo(size_t slotBytes)
      : mem(static_cast<char*>(::operator new(pages(slotBytes), std::align_val_t(4096)))) {
    view.ctrl = new (mem) FifoCtrl();
    view.data = mem + sizeof(FifoCtrl);
    view.slotBytes = slotBytes;
  }
  ~LocalFifo() {
    gpu::unmapHost(mem);
    ::operator delete(mem, std::align_val_t(4096));
  }
  char* mem;
  FifoView view;
};

// Tests outstanding requests oldest first (a connection completes them in order),
// advancing *next past each completed one (at most `most`) and handing its size to onDone.
template <typename F>
Status completeInOrder(NetBackend* b, NetRequest* const* reqs, uint32_t* next, uint32_t posted, uint32_t most,
                       const char* what, int peer, F onDone) {
  for (uint32_t n = 0; *next != posted && n < most; ++n) {
    bool done = false;
    size_t size = 0;
    Status st = b->test(reqs[*next % kFifoSlots], &done, &size);
    if (!st.ok()) return st.prefix(std::string(what) + " rank " + std::to_string(peer) + ": ");
    if (!done) break;
    onDone(*next, size);
    ++*next;
  }
  return okStatus();
}

// Registers one side's slots with the backend: RDMA backends pin and register them and
// can fail (locked-memory limit, no device), so connectors are made by factories. GPU
// slots (gdr.h) the backend refuses give way to the host FIFO's, saying why at INFO.
template <typename Comm>
Status registerSlots(NetBackend* b, Comm* comm, LocalFifo& fifo, GpuSlots& gpu, int peer) {
  const size_t bytes = kFifoSlots * fifo.view.slotBytes;
  if (gpu.data) {
    Status st = b->regMrGpu(comm, gpu.data, bytes, gpu.range);
    if (st.ok()) {
      fifo.view.data = gpu.data;
      return st;
    }
    COLL_INFO(NET, "connection with rank %d: GPUDirect RDMA off (slots in pinned host memory): %s", peer,
              st.message().c_str());
    gpu = GpuSlots{};
  }
  Status st = b->regMr(comm, fifo.view.data, bytes);
  if (!st.ok())
    st.prefix("registering the FIFO of a connection with rank " + std::to_string(peer) + " with net backend " +
              b->name() + ": ");
  return st;
}

// Counters live in the local FIFO's control block (tail: slots filled by the producer,
// head: slots sent), so the producer may be the host executor or a device kernel with
// progress() driven by a proxy thread (device/proxy.h).
class NetSend : public SendConnector {
 public:
  static Result<std::unique_ptr<SendConnector>> create(int peer, NetBackend* b, std::unique_ptr<NetSendComm> comm,
                                                       size_t slotBytes, GpuSlots gpu = {}) {
    std::unique_ptr<NetSend> c(new NetSend(peer, b, std::move(comm), slotBytes, std::move(gpu)));
    COLL_CHECK(registerSlots(b, c->comm_.get(), c->fifo_, c->gpu_, peer));
    return std::unique_ptr<SendConnector>(std::move(c));
  }
  bool ready() override { return filled() - done() < static_cast<uint32_t>(kFifoSlots); }
  char* slot() override { return fifo_.view.slotAt(filled()); }
  void post(size_t bytes) override { postFrom(nullptr, bytes); }
  bool canPostInPlace() const override { return inPlace_; }
  void postInPlace(const char* data, size_t bytes) override { postFrom(data, bytes); }
  bool flushed() override { return done() == filled(); }
  Status progress() override {
    const uint32_t filledNow = fifo_.view.ctrl->tail.load(std::memory_order_acquire);
    while (posted_ != filledNow) {
      const char* from = from_[posted_ % kFifoSlots];
      COLL_ASSIGN(NetRequest * r, backend_->isend(comm_.get(), from ? from : fifo_.view.slotAt(posted_),
                                                  fifo_.view.ctrl->sizes[posted_ % kFifoSlots]));
      if (!r) break;  // not posted yet (a connection still being made): the next call posts it
      reqs_[posted_ % kFifoSlots] = r;
      from_[posted_ % kFifoSlots] = nullptr;
      ++posted_;
    }
    uint32_t d = done();
    Status st = completeInOrder(backend_, reqs_, &d, posted_, kFifoSlots, "send to", peer_, [](uint32_t, size_t) {});
    fifo_.view.ctrl->head.store(d, std::memory_order_release);
    return st;
  }
  WaitTarget waitTarget() override { return backend_->waitTarget(comm_.get()); }
  const FifoView* fifo() const override { return &fifo_.view; }
  bool needsProgress() const override { return true; }
  bool slotsInDeviceMemory() const override { return gpu_.data != nullptr; }

 private:
  NetSend(int peer, NetBackend* b, std::unique_ptr<NetSendComm> comm, size_t slotBytes, GpuSlots gpu)
      : backend_(b), fifo_(slotBytes), gpu_(std::move(gpu)), comm_(std::move(comm)) {
    slotBytes_ = slotBytes;
    peer_ = peer;
    kind_ = "net";
    inPlace_ = backend_->sendsOnlyWhenTested(comm_.get());
  }
  uint32_t filled() const { return fifo_.view.ctrl->tail.load(std::memory_order_acquire); }
  uint32_t done() const { return fifo_.view.ctrl->head.load(std::memory_order_acquire); }
  // Host producers only (a device kernel fills the slots and advances tail itself, and
  // from_ stays null: its slots are sent).
  void postFrom(const char* data, size_t bytes) {
    const uint32_t t = filled();
    from_[t % kFifoSlots] = data;
    fifo_.view.ctrl->sizes[t % kFifoSlots] = static_cast<uint32_t>(bytes);
    fifo_.view.ctrl->tail.store(t + 1, std::memory_order_release);
  }
  NetBackend* backend_;
  LocalFifo fifo_;  // before comm_: registered on it, so it outlives it
  GpuSlots gpu_;    // likewise: the slots in GPU memory, when GPUDirect RDMA serves them
  std::unique_ptr<NetSendComm> comm_;
  NetRequest* reqs_[kFifoSlots] = {};
  const char* from_[kFifoSlots] = {};  // per slot: the caller's memory to send instead (postInPlace)
  bool inPlace_ = false;               // the backend reads sends only while tested
  uint32_t posted_ = 0;
};

// Counters in the local FIFO's control block as for NetSend: tail counts slots arrived
// (written by progress()), head slots consumed (by the host executor or a device kernel).
class NetRecv : public RecvConnector {
 public:
  static Result<std::unique_ptr<RecvConnector>> create(int peer, NetBackend* b, std::unique_ptr<NetRecvComm> comm,
                                                       size_t slotBytes, GpuSlots gpu = {}) {
    std::unique_ptr<NetRecv> c(new NetRecv(peer, b, std::move(comm), slotBytes, std::move(gpu)));
    COLL_CHECK(registerSlots(b, c->comm_.get(), c->fifo_, c->gpu_, peer));
    return std::unique_ptr<RecvConnector>(std::move(c));
  }
  bool ready() override { return arrived() != consumed(); }
  const char* slot() override { return fifo_.view.slotAt(consumed()); }
  size_t size() override { return fifo_.view.ctrl->sizes[consumed() % kFifoSlots]; }
  void release() override { fifo_.view.ctrl->head.store(consumed() + 1, std::memory_order_release); }
  // A failed connection is reported only once the slots that did arrive are consumed:
  // the peer may have sent its last message and closed, which is not an error here.
  Status progress() override {
    if (!error_.ok()) return ready() ? okStatus() : error_;
    Status st = progressConnection();
    if (st.ok()) return st;
    error_ = st;
    return ready() ? okStatus() : error_;
  }
  WaitTarget waitTarget() override { return backend_->waitTarget(comm_.get()); }
  const FifoView* fifo() const override { return &fifo_.view; }
  bool needsProgress() const override { return true; }
  bool slotsInDeviceMemory() const override { return gpu_.data != nullptr; }

 private:
  NetRecv(int peer, NetBackend* b, std::unique_ptr<NetRecvComm> comm, size_t slotBytes, GpuSlots gpu)
      : backend_(b), fifo_(slotBytes), gpu_(std::move(gpu)), comm_(std::move(comm)) {
    slotBytes_ = slotBytes;
    peer_ = peer;
    kind_ = "net";
  }
  uint32_t arrived() const { return fifo_.view.ctrl->tail.load(std::memory_order_acquire); }
  uint32_t consumed() const { return fifo_.view.ctrl->head.load(std::memory_order_acquire); }
  Status progressConnection() {
    // A receive that cannot be posted (the peer closed) must not hold back the messages
    // that arrived before: they are published below, and the failure reported after.
    Status posting;
    while (posting.ok() && posted_ - consumed() < static_cast<uint32_t>(kFifoSlots)) {
      Result<NetRequest*> r = backend_->irecv(comm_.get(), fifo_.view.slotAt(posted_), slotBytes_);
      if (!r.ok()) {
        posting = r.takeStatus().prefix("receive from rank " + std::to_string(peer_) + ": ");
        break;
      }
      if (!r.value()) break;  // not posted yet: the next call posts it
      reqs_[posted_ % kFifoSlots] = r.take();
      ++posted_;
    }
    uint32_t a = arrived();
    // One arrival per call: testing the next request right away would cost a syscall
    // between the consumer learning of this message and acting on it. Once the
    // connection failed there is no next call (progress() latches the error): all of them.
    const uint32_t most = posting.ok() ? 1 : kFifoSlots;
    Status st = gpu_.data ? completeFlushed(&a, most)
                          : completeInOrder(backend_, reqs_, &a, posted_, most, "receive from", peer_,
                                            [this](uint32_t i, size_t size) {
      fifo_.view.ctrl->sizes[i % kFifoSlots] = static_cast<uint32_t>(size);
                            });
    fifo_.view.ctrl->tail.store(a, std::memory_order_release);
    return st.ok() ? posting : st;
  }

  // GPU slots: a receive is published only once its flush (NetBackend::iflush)
  // completed, so a kernel never reads a slot the NIC's writes have not all reached.
  Status completeFlushed(uint32_t* a, uint32_t most) {
    const std::string from = "rank " + std::to_string(peer_) + ": ";
    for (uint32_t n = 0; n < most && *a != posted_; ++n) {
      bool done = false;
      size_t size = 0;
      if (!flushing_) {
        COLL_CHECK(backend_->test(reqs_[*a % kFifoSlots], &done, &size).prefix("receive from " + from));
        if (!done) break;
        fifo_.view.ctrl->sizes[*a % kFifoSlots] = static_cast<uint32_t>(size);
        Result<NetRequest*> f = backend_->iflush(comm_.get(), fifo_.view.slotAt(*a), size);
        if (!f.ok()) return f.takeStatus().prefix("flushing a receive from " + from);
        flush_ = f.value();
        if (!flush_) {
          ++*a;
          continue;
        }
        flushing_ = true;
      }
      COLL_CHECK(backend_->test(flush_, &done, &size).prefix("flushing a receive from " + from));
      if (!done) break;
      flushing_ = false;
      ++*a;
    }
    return okStatus();
  }

  Status error_;
  NetBackend* backend_;
  LocalFifo fifo_;  // before comm_: registered on it, so it outlives it
  GpuSlots gpu_;    // likewise: the slots in GPU memory, when GPUDirect RDMA serves them
  std::unique_ptr<NetRecvComm> comm_;
  NetRequest* reqs_[kFifoSlots] = {};
  uint32_t posted_ = 0;
  NetRequest* flush_ = nullptr;  // GPU slots: the flush of receive `arrived()`, while flushing_
  bool flushing_ = false;
};

// Both directions of one established connection: `send` and `recv` are its two comms.
Result<DuplexConnectors> makeDuplex(int peer, NetBackend* b, std::unique_ptr<NetSendComm> send,
                                    std::unique_ptr<NetRecvComm> recv, size_t slotBytes) {
  DuplexConnectors d;
  COLL_ASSIGN(d.send, NetSend::create(peer, b, std::move(send), slotBytes));
  COLL_ASSIGN(d.recv, NetRecv::create(peer, b, std::move(recv), slotBytes));
  return d;
}

class NetPendingRecv : public PendingRecv {
 public:
  NetPendingRecv(int peer, NetBackend* b, std::unique_ptr<NetListenComm> l, NetConnectInfo info, GpuSlots gpu)
      : peer_(peer), backend_(b), listen_(std::move(l)), info_(info), gpu_(std::move(gpu)) {}
  std::span<const std::byte> handle() const override { return handleBytes(info_); }
  // Accepts the sender's connection (it connected after receiving handle()).
  Result<std::unique_ptr<RecvConnector>> finish() override {
    COLL_ASSIGN(auto comm, backend_->accept(listen_.get()));
    listen_.reset();
    return NetRecv::create(peer_, backend_, std::move(comm), info_.slotBytes, std::move(gpu_));
  }
  // Accepts the peer's connectDuplex() and sends back over the same connection.
  Result<DuplexConnectors> finishDuplex() override {
    COLL_ASSIGN(auto comm, backend_->accept(listen_.get()));
    listen_.reset();
    COLL_ASSIGN(auto back, backend_->reverse(comm.get()));
    return makeDuplex(peer_, backend_, std::move(back), std::move(comm), info_.slotBytes);
  }

 private:
  int peer_;
  NetBackend* backend_;
  std::unique_ptr<NetListenComm> listen_;
  NetConnectInfo info_;
  GpuSlots gpu_;  // finish() only: duplex connections use host-memory slots
};

}  // namespace

// The backend given, else the default.
Result<NetBackend*> backendOr(NetBackend* given) {
  if (given) return given;
  return netBackend();
}

Result<std::unique_ptr<PendingRecv>> netSetupRecv(int peer, size_t slotBytes, const AuthKey& key, int channel,
                                                  const std::string& gpuBusId, NetBackend* backend, NetUser user) {
  COLL_ASSIGN(NetBackend * b, backendOr(backend));
  NetConnectInfo info{};
  info.slotBytes = slotBytes;
  // Channels spread over the backend's devices (rails) nearest this rank's GPU
  // (net_device.h). The sender connects to the address in the handle from its own.
  const int devs = b->devices();
  const int dev = localDevice(b, gpuBusId, channel);
  if (devs > 1) {
    NetProperties props;
    if (b->properties(dev, &props).ok())
      COLL_INFO(NET, "channel %d from rank %d: net device %d of %d (%s%s%s)", channel, peer, dev, devs,
                props.name.c_str(), gpuBusId.empty() ? "" : ", near GPU ", gpuBusId.c_str());
  }
  COLL_ASSIGN(auto listen, b->listen(dev, key, &info.handle));
  GpuSlots gpu = gpuSlotsFor(b, dev, user, gpuBusId, kFifoSlots * slotBytes,
                             "channel " + std::to_string(channel) + " receives from rank " + std::to_string(peer));
  return std::unique_ptr<PendingRecv>(new NetPendingRecv(peer, b, std::move(listen), info, std::move(gpu)));
}

Result<std::unique_ptr<SendConnector>> netConnectSend(int peer, std::span<const std::byte> handle, const AuthKey& key,
                                                      int channel, const std::string& gpuBusId,
                                                      const std::atomic<bool>* cancel, NetBackend* backend,
                                                      NetUser user) {
  COLL_ASSIGN(const NetConnectInfo info, handleAs<NetConnectInfo>(handle, "net"));
  COLL_ASSIGN(NetBackend * b, backendOr(backend));
  const int dev = localDevice(b, gpuBusId, channel);
  COLL_ASSIGN(auto comm, b->connect(dev, info.handle, key, cancel));
  GpuSlots gpu = gpuSlotsFor(b, dev, user, gpuBusId, kFifoSlots * info.slotBytes,
                             "channel " + std::to_string(channel) + " sends to rank " + std::to_string(peer));
  return NetSend::create(peer, b, std::move(comm), info.slotBytes, std::move(gpu));
}

namespace {

bool canConnect(const PeerInfo&, const PeerInfo&, const TransportOptions&) { return true; }

// Who uses a link's connectors (gdr.h: device ones may get GPU memory slots).
NetUser userOf(const Link& l) {
  if (!l.options.device) return NetUser::kHost;
  return l.options.emulated ? NetUser::kEmulatedDevice : NetUser::kDevice;
}

// Every net connection proves the communicator's key, which the bootstrap holds.
Result<const AuthKey*> keyOf(const Link& l) {
  if (!l.options.auth)
    return internalError("a net connection with rank " + std::to_string(l.peerRank) +
                         " was asked for without the communicator's key");
  return l.options.auth;
}

Result<std::unique_ptr<PendingRecv>> setupRecv(const Link& l, size_t slotBytes) {
  COLL_ASSIGN(const AuthKey* key, keyOf(l));
  return netSetupRecv(l.peerRank, slotBytes, *key, l.channel, l.self.busId, l.options.net, userOf(l));
}

Result<std::unique_ptr<SendConnector>> connectSend(const Link& l, std::span<const std::byte> handle) {
  COLL_ASSIGN(const AuthKey* key, keyOf(l));
  return netConnectSend(l.peerRank, handle, *key, l.channel, l.self.busId, l.options.cancel, l.options.net, userOf(l));
}

// COLL_NET_DUPLEX=1 and a backend that can (every rank agrees on both: checked at init).
bool duplexEnabled(const TransportOptions& o) {
  if (param(IntParam::NET_DUPLEX) == 0) return false;
  Result<NetBackend*> b = backendOr(o.net);
  return b.ok() && b.value()->duplex();
}

// Connects to the peer's listener and receives over the same connection.
Result<DuplexConnectors> connectDuplex(const Link& l, std::span<const std::byte> handle) {
  COLL_ASSIGN(const NetConnectInfo info, handleAs<NetConnectInfo>(handle, "net"));
  COLL_ASSIGN(NetBackend * b, backendOr(l.options.net));
  COLL_ASSIGN(const AuthKey* key, keyOf(l));
  COLL_ASSIGN(auto comm, b->connect(localDevice(b, l.self.busId, l.channel), info.handle, *key, l.options.cancel));
  COLL_ASSIGN(auto back, b->reverse(comm.get()));
  return makeDuplex(l.peerRank, b, std::move(comm), std::move(back), info.slotBytes);
}

const DuplexHooks kNetDuplex = {.enabled = duplexEnabled, .connect = connectDuplex};

}  // namespace

const Transport kNetTransport = {
    .name = "net", .canConnect = canConnect, .setupRecv = setupRecv, .connectSend = connectSend, .duplex = &kNetDuplex};

}  // namespace coll

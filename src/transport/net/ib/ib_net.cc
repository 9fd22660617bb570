// The ib net backend: the devices it opens (NCCL_IB_HCA, active ports, GID choice) and the
// NetBackend calls over IbConn (ib_conn.h). ib_net.h describes the protocol.
#include "transport/net/ib/ib_net.h"

#include <unistd.h>

#include <cstring>

#include "base/log.h"
#include "base/param.h"
#include "bootstrap/socket.h"
#include "transport/net/ib/ib_conn.h"

namespace coll {

namespace ib {
namespace {

static_assert(sizeof(IbHandle) <= kNetHandleBytes, "ib handle too large");

struct IbListen : NetListenComm {
  std::shared_ptr<Socket> listener;
  int dev = 0;  // the receiver's device: the one listen() was asked for
  AuthKey key;
  AuthNonce nonce;
};
struct IbSend : NetSendComm {
  std::unique_ptr<IbConn> conn;
};
struct IbRecv : NetRecvComm {
  std::unique_ptr<IbConn> conn;
};

// IBTA port attributes to Mb/s: lanes x per-lane rate.
int portSpeedMbps(const ibv_port_attr& a) {
  int lanes = a.active_width == 1   ? 1
              : a.active_width == 2 ? 4
              : a.active_width == 4 ? 8
              : a.active_width == 8 ? 12
                                    : 2;
  int lane = 0;
  switch (a.active_speed) {
    case 1: lane = 2500; break;
    case 2: lane = 5000; break;
    case 4:
    case 8: lane = 10000; break;
    case 16: lane = 14000; break;
    case 32: lane = 25000; break;
    case 64: lane = 50000; break;
    default: lane = 100000; break;
  }
  return lanes * lane;
}

// NCCL_IB_GID_INDEX, or (-1) the first RoCE v2 GID: IPv4-mapped (::ffff:a.b.c.d).
Status pickGid(const Verbs& v, IbDevice* d, int tableLen) {
  int64_t want = param(IntParam::IB_GID_INDEX);
  if (want < -1 || want >= tableLen) {
    COLL_WARN(ENV, "COLL_IB_GID_INDEX/NCCL_IB_GID_INDEX=%lld: %s:%d has %d GIDs; choosing one",
              static_cast<long long>(want), d->name.c_str(), d->port, tableLen);
    want = -1;
  }
  int index = want >= 0 ? static_cast<int>(want) : 0;
  for (int i = 0; want < 0 && i < tableLen; ++i) {
    ibv_gid g{};
    if (v.queryGid(d->ctx.get(), d->port, i, &g) != 0) continue;
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g.raw, kMapped, 12) == 0) {
      index = i;
      break;
    }
  }
  if (v.queryGid(d->ctx.get(), d->port, index, &d->gid) != 0)
    return systemError("ibv_query_gid(" + d->name + ", index " + std::to_string(index) + ")", errno);
  d->gidIndex = static_cast<uint8_t>(index);
  return okStatus();
}

// The usable ports of one device: active and selected by NCCL_IB_HCA.
Status openPorts(const Verbs& v, ibv_device* dev, const IbHcaSpec& spec, std::vector<std::unique_ptr<IbDevice>>* out,
                 std::string* skipped) {
  const std::string name = v.getDeviceName(dev);
  COLL_ASSIGN(Context probe, openDevice(v, dev));
  ibv_device_attr attr{};
  if (v.queryDevice(probe.get(), &attr) != 0) return systemError("ibv_query_device(" + name + ")", errno);
  for (int port = 1; port <= attr.phys_port_cnt; ++port) {
    ibv_port_attr pa{};
    if (v.queryPort(probe.get(), static_cast<uint8_t>(port), &pa) != 0)
      return systemError("ibv_query_port(" + name + ":" + std::to_string(port) + ")", errno);
    const std::string id = name + ":" + std::to_string(port);
    if (!ibHcaMatches(spec, name, port)) {
      *skipped += " " + id + " (not in IB_HCA)";
      continue;
    }
    if (pa.state != IBV_PORT_ACTIVE) {
      *skipped += " " + id + " (port not active)";
      continue;
    }
    auto d = std::make_unique<IbDevice>();
    d->name = name;
    d->port = static_cast<uint8_t>(port);
    COLL_ASSIGN(d->ctx, openDevice(v, dev));
    COLL_ASSIGN(d->pd, allocPd(v, d->ctx.get()));
    d->lid = pa.lid;
    d->eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    d->mtu = pa.active_mtu;
    d->speedMbps = portSpeedMbps(pa);
    d->dmaBuf = dmaBufSupported(v, d->pd.get());
    COLL_CHECK(pickGid(v, d.get(), pa.gid_tbl_len));
    COLL_INFO(NET, "ib: using %s (%s, LID %u, GID index %d, %d Mb/s, dma-buf %s)", id.c_str(),
              d->eth ? "RoCE" : "InfiniBand", d->lid, d->gidIndex, d->speedMbps, d->dmaBuf ? "yes" : "no");
    out->push_back(std::move(d));
  }
  return okStatus();
}

// The peer-memory module's sysfs trace: nvidia-peermem (CUDA >= 11.4's driver), or
// MOFED's nv_peer_mem; "" when neither is loaded.
std::string peerMemModule() {
  for (const char* path : {"/sys/kernel/mm/memory_peers/nv_mem/version", "/sys/module/nvidia_peermem"})
    if (::access(path, F_OK) == 0) return path;
  return "";
}

class IbBackend : public NetBackend {
 public:
  explicit IbBackend(std::unique_ptr<IbShared> s) : s_(std::move(s)) {}
  const char* name() const override { return "IB"; }
  int devices() override { return static_cast<int>(s_->devices.size()); }
  Status properties(int dev, NetProperties* p) override {
    if (dev < 0 || dev >= devices()) return invalidArgument("ib device " + std::to_string(dev) + " does not exist");
    const IbDevice& d = *s_->devices[static_cast<size_t>(dev)];
    p->name = d.name + ":" + std::to_string(d.port);
    p->speedMbps = d.speedMbps;
    p->maxComms = 65536;
    // GPUDirect RDMA: dma-buf where the library, provider and kernel take it (rdma-core
    // >= 34, Linux >= 5.12), else CUDA pointers where the peer-memory module is loaded.
    p->dmaBuf = d.dmaBuf;
    p->cudaPtr = !s_->peerMem.empty();
    p->hostMemOnly = !p->dmaBuf && !p->cudaPtr;
    return okStatus();
  }
  Result<std::unique_ptr<NetListenComm>> listen(int dev, const AuthKey& key, NetHandle* handle) override;
  Result<std::unique_ptr<NetSendComm>> connect(int dev, const NetHandle& handle, const AuthKey& key,
                                               const std::atomic<bool>* cancel) override;
  Result<std::unique_ptr<NetRecvComm>> accept(NetListenComm* listen) override;
  Status regMr(NetSendComm* c, void* data, size_t size) override {
    return static_cast<IbSend*>(c)->conn->regMr(data, size);
  }
  Status regMr(NetRecvComm* c, void* data, size_t size) override {
    return static_cast<IbRecv*>(c)->conn->regMr(data, size);
  }
  Status regMrGpu(NetSendComm* c, void* data, size_t size, const GpuRange& range) override {
    return static_cast<IbSend*>(c)->conn->regMrGpu(data, size, range);
  }
  Status regMrGpu(NetRecvComm* c, void* data, size_t size, const GpuRange& range) override {
    return static_cast<IbRecv*>(c)->conn->regMrGpu(data, size, range);
  }
  Result<NetRequest*> iflush(NetRecvComm* c, void* data, size_t size) override {
    return static_cast<IbRecv*>(c)->conn->iflush(data, size);
  }
  Result<NetRequest*> isend(NetSendComm* c, const void* data, size_t size) override {
    return static_cast<IbSend*>(c)->conn->isend(data, size);
  }
  Result<NetRequest*> irecv(NetRecvComm* c, void* data, size_t maxSize) override {
    return static_cast<IbRecv*>(c)->conn->irecv(data, maxSize);
  }
  Status test(NetRequest* req, bool* done, size_t* size) override {
    auto* r = static_cast<IbRequest*>(req);
    return r->conn->test(r, done, size);
  }

 private:
  IbDevice* device(int dev) const {
    return s_->devices[static_cast<size_t>(dev >= 0 && dev < static_cast<int>(s_->devices.size()) ? dev : 0)].get();
  }
  std::unique_ptr<IbShared> s_;
};

Result<std::unique_ptr<NetListenComm>> IbBackend::listen(int dev, const AuthKey& key, NetHandle* handle) {
  std::vector<NetIf> ifs = findInterfaces();
  if (ifs.empty())
    return Status(Code::kSystem, "ib backend: no interface for its side channel (COLL_SOCKET_IFNAME=\"" +
                                     param(StringParam::SOCKET_IFNAME) + "\")");
  SockAddr a = ifs[0].addr;
  a.setPort(0);
  auto l = std::make_unique<IbListen>();
  COLL_ASSIGN(Socket s, Socket::listen(&a));
  l->listener = std::make_shared<Socket>(std::move(s));
  l->dev = dev;
  l->key = key;
  COLL_ASSIGN(l->nonce, randomNonce());
  IbHandle h{kHandleMagic, static_cast<uint32_t>(dev), a, l->nonce};
  std::memset(handle->bytes, 0, sizeof(handle->bytes));
  std::memcpy(handle->bytes, &h, sizeof(h));
  return std::unique_ptr<NetListenComm>(std::move(l));
}

Result<std::unique_ptr<NetSendComm>> IbBackend::connect(int dev, const NetHandle& handle, const AuthKey& key,
                                                        const std::atomic<bool>* cancel) {
  IbHandle h;
  COLL_CHECK(parseIbHandle(handle.bytes, sizeof(handle.bytes), &h));
  // `dev` is this side's choice for the channel (net_device.h: the NIC nearest this
  // rank's GPU, else channel mod devices, the listener's rule too).
  if (dev < 0 || dev >= devices()) return invalidArgument("ib device " + std::to_string(dev));
  auto c = std::make_unique<IbSend>();
  c->conn = std::make_unique<IbConn>(s_.get(), device(dev), true);
  COLL_CHECK(c->conn->startConnect(h.addr, key, h.nonce, cancel));
  return std::unique_ptr<NetSendComm>(std::move(c));
}

Result<std::unique_ptr<NetRecvComm>> IbBackend::accept(NetListenComm* listen) {
  auto* l = static_cast<IbListen*>(listen);
  auto c = std::make_unique<IbRecv>();
  c->conn = std::make_unique<IbConn>(s_.get(), device(l->dev), false);
  c->conn->startAccept(l->listener, l->key, l->nonce);
  Result<bool> ready = c->conn->progressSetup();  // at most what has arrived: never waits
  if (!ready.ok()) return ready.takeStatus();
  return std::unique_ptr<NetRecvComm>(std::move(c));
}

}  // namespace
}  // namespace ib

Result<std::unique_ptr<NetBackend>> makeIbBackend() {
  auto s = std::make_unique<ib::IbShared>();
  COLL_ASSIGN(s->verbs, ib::Verbs::loadDefault());
  const ib::Verbs& v = *s->verbs;
  COLL_ASSIGN(ib::DeviceList list, ib::DeviceList::get(v));
  const std::string hca = param(StringParam::IB_HCA);
  const IbHcaSpec spec = parseIbHca(hca);
  std::string skipped;
  for (int i = 0; i < list.size(); ++i)
    COLL_CHECK(ib::openPorts(v, list[i], spec, &s->devices, &skipped).prefix("ib backend: "));
  if (s->devices.empty())
    return Status(Code::kSystem, "ib backend: " + v.path() + " lists " + std::to_string(list.size()) +
                                     " device(s) and no usable port" + (skipped.empty() ? "" : ":" + skipped) +
                                     (hca.empty() ? "" : " (IB_HCA=\"" + hca + "\")"));
  s->relaxedOrdering = static_cast<int>(param(IntParam::IB_PCI_RELAXED_ORDERING));
  if (s->relaxedOrdering < 0 || s->relaxedOrdering > 2) {
    COLL_WARN(ENV, "COLL_IB_PCI_RELAXED_ORDERING/NCCL_IB_PCI_RELAXED_ORDERING=%d: want 0, 1 or 2; using 2",
              s->relaxedOrdering);
    s->relaxedOrdering = 2;
  }
  s->peerMem = ib::peerMemModule();
  if (!s->peerMem.empty()) COLL_INFO(NET, "ib: peer memory (%s): CUDA pointers register", s->peerMem.c_str());
  return std::unique_ptr<NetBackend>(new ib::IbBackend(std::move(s)));
}

ibv_qp* ibCommQp(NetSendComm* comm, int i) { return static_cast<ib::IbSend*>(comm)->conn->qp(i); }
ibv_qp* ibCommQp(NetRecvComm* comm, int i) { return static_cast<ib::IbRecv*>(comm)->conn->qp(i); }

}  // namespace coll

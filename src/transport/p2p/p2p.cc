#include "transport/p2p/p2p.h"

#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include <new>

#include "collectives/config.h"
#include "base/log.h"
#include "base/param.h"
#include "cuda/gpu.h"
#include "transport/shm/shm.h"  // shmRandomId

namespace coll {

namespace {

// Memory holding one FIFO: the receiver's GPU allocation, a sender's IPC mapping of one,
// or (COLL_DEVICE_EMULATE) a host block standing in for GPU memory.
class P2pRegion {
 public:
  // p stays valid while `owner` (a gpu::DeviceBuffer, a gpu::IpcMapping, a host block)
  // lives.
  P2pRegion(void* p, std::shared_ptr<void> owner) : p_(p), owner_(std::move(owner)) {}
  FifoView view(size_t slotBytes) const {
    return {static_cast<FifoCtrl*>(p_), static_cast<char*>(p_) + sizeof(FifoCtrl), slotBytes};
  }

 private:
  void* p_;
  std::shared_ptr<void> owner_;
};

// Receivers' allocations waiting for their in-process sender.
std::mutex gMu;
std::map<uint64_t, std::shared_ptr<P2pRegion>> gPending;

Status hostUse(int peer) {
  return internalError("a p2p FIFO (device memory, peer rank " + std::to_string(peer) +
                       ") was used by the host executor; only device executors can");
}

// What both ends share: the region, its view, and refusing the host executor.
template <typename Base>
class P2pEnd : public Base {
 public:
  P2pEnd(int peer, std::shared_ptr<P2pRegion> r, size_t slotBytes, bool sameGpu)
      : region_(std::move(r)), f_(region_->view(slotBytes)), sameGpu_(sameGpu) {
    this->slotBytes_ = slotBytes;
    this->peer_ = peer;
    this->kind_ = "p2p";
  }
  bool ready() override { return false; }
  Status progress() override { return hostUse(this->peer_); }
  WaitTarget waitTarget() override { return {}; }
  const FifoView* fifo() const override { return &f_; }
  bool fifoInDeviceMemory() const override { return true; }
  bool sameGpu() const override { return sameGpu_; }

 private:
  std::shared_ptr<P2pRegion> region_;
  FifoView f_;
  bool sameGpu_;
};

class P2pSend : public P2pEnd<SendConnector> {
 public:
  using P2pEnd::P2pEnd;
  char* slot() override { return nullptr; }
  void post(size_t) override {}
};

class P2pRecv : public P2pEnd<RecvConnector> {
 public:
  using P2pEnd::P2pEnd;
  const char* slot() override { return nullptr; }
  size_t size() override { return 0; }
  void release() override {}
};

class P2pPendingRecv : public PendingRecv {
 public:
  P2pPendingRecv(int peer, std::shared_ptr<P2pRegion> r, P2pHandle h, bool sameGpu)
      : peer_(peer), region_(std::move(r)), h_(h), sameGpu_(sameGpu) {}
  ~P2pPendingRecv() override { forget(); }
  std::span<const std::byte> handle() const override { return handleBytes(h_); }
  Result<std::unique_ptr<RecvConnector>> finish() override {
    forget();
    return std::unique_ptr<RecvConnector>(new P2pRecv(peer_, region_, h_.slotBytes, sameGpu_));
  }

 private:
  void forget() {
    std::lock_guard<std::mutex> lock(gMu);
    gPending.erase(h_.localId);
  }
  int peer_;
  std::shared_ptr<P2pRegion> region_;
  P2pHandle h_;
  bool sameGpu_;
};

}  // namespace

bool p2pPossible(const PeerInfo& self, const PeerInfo& peer, bool emulated) {
  if (param(IntParam::P2P_DISABLE) != 0) return false;
  if (!sameHost(self, peer)) return false;
  if (emulated) return self.pid == peer.pid;  // host blocks stand in: threads of one process
#if COLL_HAVE_CUDA
  if (self.cudaDev < 0 || peer.cudaDev < 0 || !self.busId[0] || !peer.busId[0]) return false;
  if (std::strncmp(self.busId, peer.busId, sizeof(self.busId)) == 0) return true;  // one GPU
  const std::string level = param(StringParam::P2P_LEVEL);
  if (level == "LOC" || level == "0") return false;
  // The sender's GPU as this process numbers it: it writes into this rank's GPU memory.
  const int senderHere = gpu::deviceByBusId(peer.busId);
  return senderHere >= 0 && gpu::canAccessPeer(senderHere, self.cudaDev);
#else
  return false;
#endif
}

// PTX's GPU scope covers the kernels one program runs on a device: ranks of other
// processes on this GPU (MPS) keep system scope.
bool p2pSameGpu(const PeerInfo& self, const PeerInfo& peer, bool emulated) {
  if (emulated) return sameProcess(self, peer);  // the emulated GPU is the process's
  return sameProcess(self, peer) && sameGpu(self, peer);
}

Result<std::unique_ptr<PendingRecv>> p2pSetupRecv(int peer, size_t slotBytes, int dev, bool emulated, bool sameGpu) {
  P2pHandle h{};
  h.pid = getpid();
  h.slotBytes = slotBytes;
  h.localId = shmRandomId();
  std::shared_ptr<P2pRegion> region;
  if (emulated) {
    void* p = ::operator new(fifoBytes(slotBytes), std::align_val_t(4096));
    std::memset(p, 0, fifoBytes(slotBytes));
    new (p) FifoCtrl();
    region = std::make_shared<P2pRegion>(p, std::shared_ptr<void>(p, [](void* q) {
                                           ::operator delete(q, std::align_val_t(4096));
                                         }));
  } else {
#if COLL_HAVE_CUDA
    COLL_ASSIGN(gpu::DeviceBuffer buf, gpu::DeviceBuffer::allocateZeroed(dev, fifoBytes(slotBytes)));
    COLL_ASSIGN(h.ipc, buf.exportHandle());
    region = std::make_shared<P2pRegion>(buf.get(), std::make_shared<gpu::DeviceBuffer>(buf));
#else
    (void)dev;
    return internalError("p2p FIFOs in GPU memory need a build with CUDA");
#endif
  }
  {
    std::lock_guard<std::mutex> lock(gMu);
    gPending[h.localId] = region;
  }
  COLL_TRACE(P2P, "recv FIFO from rank %d in %s memory, %zu-byte slots", peer,
             emulated ? "host (emulated device)" : ("device " + std::to_string(dev)).c_str(), slotBytes);
  return std::unique_ptr<PendingRecv>(new P2pPendingRecv(peer, std::move(region), h, sameGpu));
}

Result<std::unique_ptr<SendConnector>> p2pConnectSend(int peer, std::span<const std::byte> handle, int selfDev,
                                                      const PeerInfo& receiver, bool emulated, bool sameGpu) {
  COLL_ASSIGN(const P2pHandle h, handleAs<P2pHandle>(handle, "p2p"));
  std::shared_ptr<P2pRegion> region;
  if (h.pid == getpid()) {
    {
      std::lock_guard<std::mutex> lock(gMu);
      auto it = gPending.find(h.localId);
      if (it == gPending.end()) return internalError("rank " + std::to_string(peer) + "'s p2p FIFO is not registered");
      region = it->second;
    }
#if COLL_HAVE_CUDA
    if (!emulated) {
      const int to = gpu::deviceByBusId(receiver.busId);
      if (to < 0)
        return internalError("rank " + std::to_string(peer) + "'s GPU " + receiver.busId + " is not visible here");
      COLL_CHECK(gpu::enablePeerAccess(selfDev, to));
    }
#else
    (void)selfDev;
    (void)receiver;
#endif
  } else {
#if COLL_HAVE_CUDA
    if (emulated) return internalError("emulated p2p between processes");
    COLL_ASSIGN(gpu::IpcMapping m, gpu::IpcMapping::open(h.ipc, selfDev));
    region = std::make_shared<P2pRegion>(m.get(), std::make_shared<gpu::IpcMapping>(m));
#else
    (void)emulated;
    return internalError("rank " + std::to_string(peer) + " offered a p2p FIFO between processes, which needs CUDA");
#endif
  }
  return std::unique_ptr<SendConnector>(new P2pSend(peer, std::move(region), h.slotBytes, sameGpu));
}

namespace {

bool canConnect(const PeerInfo& self, const PeerInfo& peer, const TransportOptions& o) {
  return o.device && p2pPossible(self, peer, o.emulated);
}

Result<std::unique_ptr<PendingRecv>> setupRecv(const Link& l, size_t slotBytes) {
  return p2pSetupRecv(l.peerRank, slotBytes, l.self.cudaDev, l.options.emulated,
                      p2pSameGpu(l.self, l.peer, l.options.emulated));
}

Result<std::unique_ptr<SendConnector>> connectSend(const Link& l, std::span<const std::byte> handle) {
  return p2pConnectSend(l.peerRank, handle, l.self.cudaDev, l.peer, l.options.emulated,
                        p2pSameGpu(l.self, l.peer, l.options.emulated));
}

}  // namespace

const Transport kP2pTransport = {
    .name = "p2p", .canConnect = canConnect, .setupRecv = setupRecv, .connectSend = connectSend};

}  // namespace coll

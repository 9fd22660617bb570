#include "transport/p2p/p2p.h"

#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "core/log.h"
#include "core/param.h"
#include "device/device_cuda.h"
#include "transport/shm/shm.h"  // shmRandomId

namespace coll {

namespace {

// Device memory holding one FIFO: the receiver's allocation, or a sender's IPC mapping.
class P2pRegion {
 public:
  P2pRegion(void* p, bool imported) : p_(p), imported_(imported) {}
  ~P2pRegion() {
    if (imported_) cudaIpcClose(p_);
    else cudaFreeDevice(p_);
  }
  FifoView view(size_t slotBytes) const {
    return {static_cast<FifoCtrl*>(p_), static_cast<char*>(p_) + sizeof(FifoCtrl), slotBytes};
  }

 private:
  void* p_;
  bool imported_;
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
  P2pEnd(int peer, std::shared_ptr<P2pRegion> r, size_t slotBytes)
      : region_(std::move(r)), f_(region_->view(slotBytes)) {
    this->slotBytes_ = slotBytes;
    this->peer_ = peer;
    this->kind_ = "p2p";
  }
  bool ready() override { return false; }
  Status progress() override { return hostUse(this->peer_); }
  WaitTarget waitTarget() override { return {}; }
  const FifoView* fifo() const override { return &f_; }
  bool fifoInDeviceMemory() const override { return true; }

 private:
  std::shared_ptr<P2pRegion> region_;
  FifoView f_;
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

class PendingRecv : public P2pPendingRecv {
 public:
  PendingRecv(int peer, std::shared_ptr<P2pRegion> r, P2pHandle h) : peer_(peer), region_(std::move(r)), h_(h) {}
  ~PendingRecv() override { forget(); }
  const P2pHandle& handle() const override { return h_; }
  std::unique_ptr<RecvConnector> finish() override {
    forget();
    return std::make_unique<P2pRecv>(peer_, region_, h_.slotBytes);
  }

 private:
  void forget() {
    std::lock_guard<std::mutex> lock(gMu);
    gPending.erase(h_.localId);
  }
  int peer_;
  std::shared_ptr<P2pRegion> region_;
  P2pHandle h_;
};

}  // namespace

bool p2pPossible(const PeerInfo& self, const PeerInfo& peer) {
  if (paramInt("P2P_DISABLE") != 0) return false;
  if (std::strncmp(self.hostId, peer.hostId, sizeof(self.hostId)) != 0) return false;
  if (self.cudaDev < 0 || peer.cudaDev < 0 || !self.busId[0] || !peer.busId[0]) return false;
  if (std::strncmp(self.busId, peer.busId, sizeof(self.busId)) == 0) return true;  // one GPU
  const std::string level = paramString("P2P_LEVEL");
  if (level == "LOC" || level == "0") return false;
  // The sender's GPU as this process numbers it: it writes into this rank's GPU memory.
  const int senderHere = cudaDeviceByBusId(peer.busId);
  return senderHere >= 0 && cudaCanAccess(senderHere, self.cudaDev);
}

Result<std::unique_ptr<P2pPendingRecv>> p2pSetupRecv(int peer, size_t slotBytes, int dev) {
  P2pHandle h{};
  h.pid = getpid();
  h.slotBytes = slotBytes;
  h.localId = shmRandomId();
  COLL_ASSIGN(void* p, cudaAllocDevice(dev, fifoBytes(slotBytes)));
  auto region = std::make_shared<P2pRegion>(p, false);
  COLL_CHECK(cudaIpcExport(p, h.ipc));
  {
    std::lock_guard<std::mutex> lock(gMu);
    gPending[h.localId] = region;
  }
  COLL_TRACE(P2P, "recv FIFO from rank %d in device %d memory, %zu-byte slots", peer, dev, slotBytes);
  return std::unique_ptr<P2pPendingRecv>(new PendingRecv(peer, std::move(region), h));
}

Result<std::unique_ptr<SendConnector>> p2pConnectSend(int peer, const P2pHandle& h, int selfDev,
                                                     const PeerInfo& receiver) {
  std::shared_ptr<P2pRegion> region;
  if (h.pid == getpid()) {
    {
      std::lock_guard<std::mutex> lock(gMu);
      auto it = gPending.find(h.localId);
      if (it == gPending.end()) return internalError("rank " + std::to_string(peer) + "'s p2p FIFO is not registered");
      region = it->second;
    }
    const int to = cudaDeviceByBusId(receiver.busId);
    if (to < 0) return internalError("rank " + std::to_string(peer) + "'s GPU " + receiver.busId + " is not visible here");
    COLL_CHECK(cudaEnablePeer(selfDev, to));
  } else {
    COLL_ASSIGN(void* p, cudaIpcImport(h.ipc, selfDev));
    region = std::make_shared<P2pRegion>(p, true);
  }
  return std::unique_ptr<SendConnector>(new P2pSend(peer, std::move(region), h.slotBytes));
}

}  // namespace coll

// Net transport: connectors that move FIFO slots between hosts through a net backend.
//
// A backend is the small interface of NCCL's net plugins: devices, properties,
// listen/connect/accept, memory registration, isend/irecv/test and close. The socket
// backend (socket/) implements it over TCP, the plugin backend (plugin/) over an external
// library speaking NCCL's plugin ABI (COLL_NET_PLUGIN); COLL_NET names the backend.
//
// Each side keeps a local FIFO. The sender's progress() posts isend for every filled
// slot and frees the slot when the send completes; the receiver's progress() keeps an
// irecv posted on every free slot and publishes a slot when its receive completes.
// Requests of one connection complete in the order they were posted. A backend may
// refuse to post for now (a null request: its connection is still being established, or
// it has no room), and progress() posts the slot again on its next call.
//
// The last row of the transport table (kNetTransport): it connects any two ranks. Its
// duplex hooks give an LL pair or a tree edge one connection for both directions
// (COLL_NET_DUPLEX, transport.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/table.h"

namespace coll {

// What a listener ships to its connector: with NetConnectInfo's slot size, the 120 bytes
// a transport frame carries (NCCL's plugins may use up to 128; the plugin backend checks
// that they used at most these).
constexpr size_t kNetHandleBytes = 112;
struct NetHandle {
  char bytes[kNetHandleBytes];
};

struct NetProperties {
  std::string name;  // device name (interface)
  int speedMbps = 0;
  int maxComms = 0;
  bool hostMemOnly = true;  // false: GPU memory registers (regMrGpu; GPUDirect RDMA), as
  bool dmaBuf = false;      // a dma-buf
  bool cudaPtr = false;     // or a CUDA pointer (nvidia-peermem)
  std::string pciPath;      // the device's PCI function in sysfs ("" when not one): which GPUs it is near
};

// The objects a backend hands out, each its own type (a backend derives its own from them).
template <typename Tag>
class NetObject {
 public:
  virtual ~NetObject() = default;
};
using NetListenComm = NetObject<struct NetListenTag>;
using NetSendComm = NetObject<struct NetSendTag>;
using NetRecvComm = NetObject<struct NetRecvTag>;
using NetRequest = NetObject<struct NetRequestTag>;

class NetBackend {
 public:
  virtual ~NetBackend() = default;
  virtual const char* name() const = 0;
  virtual int devices() = 0;
  virtual Status properties(int dev, NetProperties* props) = 0;
  // `key`: the communicator's key (auth.h). The socket and ib backends accept only
  // connections that prove it, and a connector proves it; an external plugin cannot
  // carry it (NCCL's ABI has no place for it) and ignores it.
  virtual Result<std::unique_ptr<NetListenComm>> listen(int dev, const AuthKey& key, NetHandle* handle) = 0;
  // Starts a connection; the receiver completes it with accept(). Neither may wait for
  // the other side (one thread may connect several ranks' sends before accepting any of
  // their receives): a backend whose set-up needs both sides returns the comm at once and
  // finishes it in later isend/irecv calls, which give null requests until then.
  // `cancel` (may be null): the communicator's abort flag; a connect that waits (a
  // refused connection retried) gives up once it is raised, as a peer failed meanwhile.
  virtual Result<std::unique_ptr<NetSendComm>> connect(int dev, const NetHandle& handle, const AuthKey& key,
                                                       const std::atomic<bool>* cancel) = 0;
  virtual Result<std::unique_ptr<NetRecvComm>> accept(NetListenComm* listen) = 0;
  // Memory registration, per comm: every buffer later given to isend/irecv on `comm`
  // lies in a range registered on it, which stays valid until the comm is destroyed
  // (which deregisters it). A no-op for sockets; plugins need a handle per comm.
  virtual Status regMr(NetSendComm*, void* /*data*/, size_t /*size*/) { return okStatus(); }
  virtual Status regMr(NetRecvComm*, void* /*data*/, size_t /*size*/) { return okStatus(); }
  // GPU memory, for GPUDirect RDMA (only where properties() cleared hostMemOnly): the
  // NIC then reads and writes it directly. `dmaBufFd` >= 0: the range's dma-buf
  // (cuda/gpu.h dmaBufOf), `offset` where `data` starts in it; -1: a CUDA pointer (the
  // peer-memory path, nvidia-peermem). The caller keeps the fd open until the comm is
  // destroyed.
  struct GpuRange {
    int dmaBufFd = -1;
    uint64_t offset = 0;
  };
  virtual Status regMrGpu(NetSendComm*, void*, size_t, const GpuRange&) { return noGpuMemory(); }
  virtual Status regMrGpu(NetRecvComm*, void*, size_t, const GpuRange&) { return noGpuMemory(); }
  // After a receive into GPU memory completed: orders the NIC's writes of it before a
  // kernel reads them (PCIe lets them be overtaken). Completed through test(); a null
  // request: nothing to do.
  virtual Result<NetRequest*> iflush(NetRecvComm*, void* /*data*/, size_t /*size*/) { return nullptr; }
  // A null request: not posted (see connect), post it again later.
  virtual Result<NetRequest*> isend(NetSendComm* comm, const void* data, size_t size) = 0;
  virtual Result<NetRequest*> irecv(NetRecvComm* comm, void* data, size_t maxSize) = 0;
  // Progresses and checks a request; a completed request is freed by test().
  virtual Status test(NetRequest* req, bool* done, size_t* size) = 0;
  // True when a send's bytes are read only inside test() calls on this comm (no thread of
  // the backend's own reads them later), so they may be the caller's memory: once an
  // operation failed nobody tests again, and nothing reads a buffer the caller may have
  // freed (connector.h postInPlace).
  virtual bool sendsOnlyWhenTested(NetSendComm*) { return false; }
  // What an idle caller may sleep on until this comm can make progress.
  virtual WaitTarget waitTarget(NetSendComm*) { return {}; }
  virtual WaitTarget waitTarget(NetRecvComm*) { return {}; }
  // Duplex connections (optional): the opposite direction of an established connection,
  // on the same sockets, so a rank pair that sends both ways (a 2-rank ring, later tree
  // edges) holds one connection and acknowledgements ride on data packets.
  virtual bool duplex() const { return false; }
  virtual Result<std::unique_ptr<NetRecvComm>> reverse(NetSendComm*) {
    return internalError(std::string("net backend ") + name() + " has no duplex connections");
  }
  virtual Result<std::unique_ptr<NetSendComm>> reverse(NetRecvComm*) {
    return internalError(std::string("net backend ") + name() + " has no duplex connections");
  }

 private:
  Status noGpuMemory() const {
    return invalidUsage(std::string("net backend ") + name() + " registers host memory only");
  }
};

// The backend `name` names (Socket, IB, or the loaded plugin's name; any case), created on
// first use. "" names the default: COLL_NET where set, else the plugin of COLL_NET_PLUGIN
// when one loads, else IB where it is usable, else Socket (NCCL's order).
Result<NetBackend*> netBackendNamed(const std::string& name);
Result<NetBackend*> netBackend();  // the default
// The default's name, and whether the user chose it (COLL_NET) rather than the probe.
std::string defaultNetName(bool* chosen);
// Whether `name` names a net backend this build has (collConfig_t.netName, COLL_NET).
Status checkNetName(const std::string& name);

// The handle a net receiver ships to its sender.
struct NetConnectInfo {
  NetHandle handle;
  uint64_t slotBytes;
};

extern const Transport kNetTransport;

// What a net connection side serves: host executors, device kernels (their slots may be
// GPU memory: gdr.h), or the device emulation (COLL_DEVICE_EMULATE: host threads stand
// in for kernels and a memfd, as its dma-buf, for GPU memory).
enum class NetUser { kHost, kDevice, kEmulatedDevice };

// The row's halves, for callers that know they want net (tests). The handle is a
// NetConnectInfo; finish() accepts the sender's connection.
// `channel` and the rank's GPU (its PCI bus id, "" for host ranks) choose the net device
// (net_device.h).
// `key`: the communicator's key, which the connection proves (NetBackend::listen);
// `backend` null: the default.
Result<std::unique_ptr<PendingRecv>> netSetupRecv(int peer, size_t slotBytes, const AuthKey& key, int channel = 0,
                                                  const std::string& gpuBusId = "", NetBackend* backend = nullptr,
                                                  NetUser user = NetUser::kHost);
Result<std::unique_ptr<SendConnector>> netConnectSend(int peer, std::span<const std::byte> handle, const AuthKey& key,
                                                      int channel = 0, const std::string& gpuBusId = "",
                                                      const std::atomic<bool>* cancel = nullptr,
                                                      NetBackend* backend = nullptr, NetUser user = NetUser::kHost);

}  // namespace coll

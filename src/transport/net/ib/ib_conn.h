// The ib backend's internals (ib_net.h says what the backend does): the devices it opened,
// and one side of a connection with its set-up state machine and data path.
//
// Concurrency: an IbConn is touched by one thread at a time (the thread driving its comm);
// IbDevice is immutable once the backend is made (verbs calls on it are thread-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/socket.h"
#include "transport/net/ib/ib_net.h"
#include "transport/net/ib/ib_wire.h"
#include "transport/net/ib/verbs.h"

namespace coll::ib {

constexpr uint32_t kDepth = 32;  // requests in flight per comm; CTS FIFO entries
// wr_id tags on the receiver's CQ (low bits: the QP of a receive, the seq of a credit); a
// sender's wr_id is seq << 8 | QP.
constexpr uint64_t kRecvTag = 1ull << 63;
constexpr uint64_t kCtsTag = 1ull << 62;
constexpr uint64_t kFlushTag = 1ull << 61;  // receiver: a flush's READ (low bits: its request)

// One usable port of a device.
struct IbDevice {
  std::string name;  // "mlx5_0"
  uint8_t port = 1;
  Context ctx;
  Pd pd;
  uint16_t lid = 0;
  bool eth = false;  // RoCE: GRH with the GID below
  ibv_mtu mtu = IBV_MTU_1024;
  uint8_t gidIndex = 0;
  ibv_gid gid{};
  int speedMbps = 0;
  bool dmaBuf = false;  // ibv_reg_dmabuf_mr works here (dmaBufSupported)
};

// The knobs, read (and range-checked, with a WARN naming the variable) per connection.
struct IbOptions {
  int qps = 1;
  uint8_t timeout = 20, retryCnt = 7, tc = 0, sl = 0;
  static IbOptions read();
};

// After set-up the side channel carries only these. A receiver waiting for data sends
// kCredits now and then: how many of its credits have landed (their RDMA WRITEs
// completed), so a sender that never saw one of them knows it was lost rather than late;
// that sender then answers kLost (seq: the credit), so both ends fail naming each other.
struct Beacon {
  enum Kind : uint32_t { kCredits = 1, kLost = 2 };
  uint32_t magic;
  Kind kind;
  uint64_t seq;
};

// Before its PeerInfo, each side proves the communicator's key (auth.h) over the
// listener's nonce (the handle carried it) and the connector's: the connector with the
// label "ib connector", the listener "ib acceptor". Each checks the other's before it
// uses a byte of the info.
struct IbAuth {
  uint32_t magic;
  uint32_t reserved;
  AuthNonce connectorNonce;
  Digest mac;
};
struct SetupMsg {
  IbAuth auth;
  PeerInfo info;
};

class IbConn;
struct IbRequest : NetRequest {
  IbConn* conn = nullptr;
  bool inUse = false;
  bool done = false;
  bool written = false;  // sender: its writes are posted
  bool flush = false;    // receiver: an iflush (size 0 when done), not a message
  uint64_t seq = 0;
  int pending = 0;  // completions still to come
  const char* data = nullptr;
  size_t size = 0;
  uint32_t lkey = 0;
};

// The backend's shared state, which comms point to.
struct IbShared {
  std::unique_ptr<Verbs> verbs;
  std::vector<std::unique_ptr<IbDevice>> devices;
  int relaxedOrdering = 2;  // COLL_IB_PCI_RELAXED_ORDERING
  std::atomic<bool> roRefused{false};
  // The peer-memory module (nvidia-peermem, or MOFED's nv_peer_mem) is loaded: ibv_reg_mr
  // accepts CUDA pointers. The path that showed it, for errors and INFO ("" if none).
  std::string peerMem;
};

// One side of a connection. The sender and receiver comms own one each.
class IbConn {
 public:
  enum class SetupPhase { kAccept, kReadInfo, kWaitInfo, kWaitReady, kReady };
  IbConn(IbShared* s, IbDevice* d, bool sender) : s_(s), v_(*s->verbs), dev_(d), sender_(sender) {}
  // Logs what the connection carried (INFO NET): tests check that ib carried the traffic.
  ~IbConn();
  IbConn(const IbConn&) = delete;
  IbConn& operator=(const IbConn&) = delete;

  // Sender: TCP connect, QPs to INIT, its info sent; established later (progressSetup).
  // `key` and `listenerNonce` (from the handle): what the side channel proves.
  Status startConnect(const SockAddr& addr, const AuthKey& key, const AuthNonce& listenerNonce,
                      const std::atomic<bool>* cancel);
  // Receiver: established later from this listener, by a connection that proves `key`.
  void startAccept(std::shared_ptr<Socket> listener, const AuthKey& key, const AuthNonce& listenerNonce) {
    listener_ = std::move(listener);
    key_ = key;
    listenerNonce_ = listenerNonce;
    setupPhase_ = SetupPhase::kAccept;
  }
  // Advances set-up without waiting; true once established.
  Result<bool> progressSetup();
  Status regMr(void* data, size_t size);
  // GPU memory (GPUDirect RDMA): through its dma-buf, or as a CUDA pointer with the
  // peer-memory module; refused, naming why, where this device can do neither.
  Status regMrGpu(void* data, size_t size, const NetBackend::GpuRange& range);
  // Receiver: a 1-byte RDMA READ of `data` over a QP connected to itself, whose completion
  // means the NIC's earlier writes there are visible to the GPU (a READ cannot pass them
  // on PCIe). nullptr where nothing is to flush (host memory, size 0).
  Result<NetRequest*> iflush(void* data, size_t size);
  Result<NetRequest*> isend(const void* data, size_t size);
  Result<NetRequest*> irecv(void* data, size_t maxSize);
  Status test(IbRequest* r, bool* done, size_t* size);
  ibv_qp* qp(int i) const { return i >= 0 && i < static_cast<int>(qps_.size()) ? qps_[i].get() : nullptr; }

 private:
  struct Reg {
    char* base;
    size_t size;
    Mr mr;
    bool gpu;  // GPU memory: what the NIC wrote there needs a flush before a kernel reads it
  };
  Result<Mr> regRelaxed(int access, const std::function<Result<Mr>(int)>& reg);
  Status setupFlush();
  Status fail(Status st);
  Status acceptSocket(bool* got);
  Status readSetup(bool* got);
  Status readInfo(bool* got);
  Digest authMacFor(bool connector) const;
  Status checkAuth(const IbAuth& a);
  void rejectPeer(const std::string& why);
  Status createQps(int n);
  Status connectQps(const PeerInfo& peer);
  Status receiverSetup();
  Status postRecv(int qp);
  Status sendInfo();
  SetupMsg localMsg() const;
  const Reg* findReg(const void* p, size_t n) const;
  Status progress();
  Status pollCq(bool* any);
  Status onCompletion(const ibv_wc& wc);
  Status postWrites(IbRequest* r, const CtsEntry& cts);
  Status postCts(IbRequest* r);
  Status checkPeerAlive();
  Status readBeacons();
  Status onBeacon(const Beacon& b);
  void sendBeacon(Beacon::Kind kind, uint64_t seq);
  bool waitingForData() const;
  std::string who() const;

  IbShared* s_;
  const Verbs& v_;
  IbDevice* dev_;
  bool sender_;
  SetupPhase setupPhase_ = SetupPhase::kWaitInfo;
  Status error_;
  std::shared_ptr<Socket> listener_;
  Socket sock_;
  std::string peer_;
  PeerInfo peerInfo_{};
  SetupMsg inMsg_{};  // the peer's, as it arrives (infoGot_ bytes)
  size_t infoGot_ = 0;
  AuthKey key_{};
  AuthNonce listenerNonce_{}, connectorNonce_{};
  Deadline authBy_{};  // receiver: when a connection that has not proved the key is dropped
  uint32_t psn_[kMaxQpsPerConn] = {};
  IbOptions opt_;
  int64_t lastAliveCheckNs_ = 0;
  int64_t lastBeaconNs_ = 0;
  Beacon beaconIn_{};
  size_t beaconGot_ = 0;
  uint64_t ctsLanded_ = 0;             // receiver: credits whose writes completed
  uint64_t suspect_ = UINT64_MAX;      // sender: a credit reported landed but not in the FIFO
  uint64_t messages_ = 0, bytes_ = 0;  // completed requests
  // Destroyed bottom-up: QPs before the MRs and the CQ they use.
  Cq cq_;
  std::unique_ptr<CtsEntry[]> cts_;  // sender: the FIFO; receiver: the credit buffer for the writes
  Mr ctsMr_;
  std::vector<Reg> regs_;
  std::vector<Qp> qps_;
  // Receiver: the flush's loopback QP (on cq_) and the host scratch its READs land in,
  // made by the first iflush.
  std::unique_ptr<char[]> flushBuf_;
  Mr flushMr_;
  Qp flushQp_;
  IbRequest flushReqs_[kDepth];
  IbRequest reqs_[kDepth];
  uint64_t nextSeq_ = 0;                  // requests handed out
  uint64_t writeSeq_ = 0;                 // sender: requests whose writes are posted
  uint64_t immSeq_[kMaxQpsPerConn] = {};  // receiver: immediates seen per QP
};

}  // namespace coll::ib

// The verbs calls of the ib net backend, loaded at run time, and RAII owners over them.
//
// The library never links libibverbs: Verbs::load() dlopens it (COLL_IB_VERBS_LIB,
// default libibverbs.so.1) and looks up every call the backend makes into a table, so a
// machine without rdma-core still loads the library and gets an error value naming the
// library when it asks for ib. rdma-core's <infiniband/verbs.h> gives the types only.
//
// Three calls are not symbols in rdma-core: ibv_post_send, ibv_post_recv and ibv_poll_cq
// are static inlines that call through the context's ops (ctx->ops.post_send ...), and
// ibv_query_port is a macro over an inline. The table's entries for them do the same, so
// they reach whichever provider opened the device: mlx5, rxe, or the test-only emulation
// (tests/verbs_emu/, which tests select by pointing COLL_IB_VERBS_LIB at it).
//
// Lifetime: a Verbs outlives everything opened through it (its destructor dlcloses the
// library). Owners are single-threaded objects; verbs calls themselves are thread-safe.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "base/status.h"

namespace coll::ib {

// The table. Every entry is set after a successful load() except regDmabufMr, which is
// nullptr where the library predates ibv_reg_dmabuf_mr (rdma-core < 34). Entries return
// what the ibv_* call returns (and set errno as it does).
class Verbs {
 public:
  // Loads the library at `path` (a name dlopen searches, or a path).
  static Result<std::unique_ptr<Verbs>> load(const std::string& path);
  // load() of COLL_IB_VERBS_LIB.
  static Result<std::unique_ptr<Verbs>> loadDefault();
  ~Verbs();
  Verbs(const Verbs&) = delete;
  Verbs& operator=(const Verbs&) = delete;

  const std::string& path() const { return path_; }

  ibv_device** (*getDeviceList)(int* num) = nullptr;
  void (*freeDeviceList)(ibv_device** list) = nullptr;
  const char* (*getDeviceName)(ibv_device* dev) = nullptr;
  ibv_context* (*openDevice)(ibv_device* dev) = nullptr;
  int (*closeDevice)(ibv_context* ctx) = nullptr;
  int (*queryDevice)(ibv_context* ctx, ibv_device_attr* attr) = nullptr;
  int (*queryGid)(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*allocPd)(ibv_context* ctx) = nullptr;
  int (*deallocPd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*regMr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  ibv_mr* (*regDmabufMr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) = nullptr;
  int (*deregMr)(ibv_mr* mr) = nullptr;
  ibv_cq* (*createCq)(ibv_context* ctx, int cqe, void* cqContext, ibv_comp_channel* channel, int vector) = nullptr;
  int (*destroyCq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*createQp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modifyQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*queryQp)(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) = nullptr;
  int (*destroyQp)(ibv_qp* qp) = nullptr;
  const char* (*wcStatusStr)(ibv_wc_status status) = nullptr;
  const char* (*eventTypeStr)(ibv_event_type event) = nullptr;
  // Through ctx->ops (see the top of this file). pollCq returns the completions polled
  // (0: none) or a negative value on a CQ error; postSend/postRecv 0 or an errno, with
  // *bad the first work request not posted.
  int (*pollCq)(ibv_cq* cq, int n, ibv_wc* wc) = nullptr;
  int (*postSend)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) = nullptr;
  int (*postRecv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) = nullptr;

  // ibv_query_port as the header's inline does it: the provider's extended query where
  // the context has one, else the exported (IBVERBS_1.1) symbol on a zeroed attr.
  int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const;

 private:
  Verbs() = default;
  Status resolve();

  std::string path_;
  void* handle_ = nullptr;
  int (*queryPortCompat_)(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) = nullptr;
};

// An owner of one verbs object: destroys it with the table's `Destroy` entry. Movable,
// not copyable; get() lends the object.
template <typename T, auto Verbs::*Destroy>
class VerbsOwner {
 public:
  VerbsOwner() = default;
  VerbsOwner(const Verbs* v, T* p) : v_(v), p_(p) {}
  ~VerbsOwner() { static_cast<void>(reset()); }  // a destructor has nobody to tell
  VerbsOwner(const VerbsOwner&) = delete;
  VerbsOwner& operator=(const VerbsOwner&) = delete;
  VerbsOwner(VerbsOwner&& o) noexcept : v_(o.v_), p_(std::exchange(o.p_, nullptr)) {}
  VerbsOwner& operator=(VerbsOwner&& o) noexcept {
    if (this != &o) {
      static_cast<void>(reset());
      v_ = o.v_;
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  // Destroys the object now; the verbs call's errno text when it refuses (EBUSY: in use).
  // A refused object stays owned, so a later reset() (or the destructor, once what used it
  // is gone) destroys it: dropping the handle would leak it for good.
  Status reset() {
    if (!p_) return okStatus();
    int rc = (v_->*Destroy)(p_);
    if (rc != 0) return systemError("destroying a verbs object", rc > 0 ? rc : errno);
    p_ = nullptr;
    return okStatus();
  }

 private:
  const Verbs* v_ = nullptr;
  T* p_ = nullptr;
};

using Context = VerbsOwner<ibv_context, &Verbs::closeDevice>;
using Pd = VerbsOwner<ibv_pd, &Verbs::deallocPd>;
using Mr = VerbsOwner<ibv_mr, &Verbs::deregMr>;
using Cq = VerbsOwner<ibv_cq, &Verbs::destroyCq>;
using Qp = VerbsOwner<ibv_qp, &Verbs::destroyQp>;

// The devices the library lists.
class DeviceList {
 public:
  static Result<DeviceList> get(const Verbs& v);
  ~DeviceList();
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  DeviceList(DeviceList&& o) noexcept : v_(o.v_), list_(std::exchange(o.list_, nullptr)), n_(o.n_) {}
  DeviceList& operator=(DeviceList&&) = delete;
  int size() const { return n_; }
  ibv_device* operator[](int i) const { return list_[i]; }

 private:
  DeviceList(const Verbs* v, ibv_device** list, int n) : v_(v), list_(list), n_(n) {}
  const Verbs* v_;
  ibv_device** list_;
  int n_;
};

// Each names the device (or QP) and the errno text when the call fails.
Result<Context> openDevice(const Verbs& v, ibv_device* dev);
Result<Pd> allocPd(const Verbs& v, ibv_context* ctx);
Result<Mr> regMr(const Verbs& v, ibv_pd* pd, void* addr, size_t length, int access);
// A dma-buf registration (GPU memory exported by its driver): [offset, offset + length)
// of the buffer behind `fd`, addressed as [iova, iova + length) by work requests. The
// error names the call, the range, the fd, the device and errno's text; where the library
// predates the call, the library.
Result<Mr> regDmabufMr(const Verbs& v, ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
// Whether dma-buf registrations can work on pd's device: the library has the call, and a
// registration of nothing (fd -1) fails for its arguments (EBADF, EINVAL) rather than with
// EOPNOTSUPP or EPROTONOSUPPORT, which a provider or kernel without support gives.
bool dmaBufSupported(const Verbs& v, ibv_pd* pd);
Result<Cq> createCq(const Verbs& v, ibv_context* ctx, int cqe);
struct QpCaps {
  uint32_t maxSendWr = 64, maxRecvWr = 64, maxSendSge = 1, maxRecvSge = 1, maxInline = 0;
  bool signalAll = false;
};
Result<Qp> createRcQp(const Verbs& v, ibv_pd* pd, ibv_cq* sendCq, ibv_cq* recvCq, const QpCaps& caps);

// What an RC QP needs to reach its peer, and how patiently (RESET -> INIT -> RTR -> RTS).
struct RcConnectParams {
  uint8_t port = 1;
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;  // what the peer may do
  uint32_t remoteQpn = 0;
  uint32_t remotePsn = 0;  // the peer's sq_psn: our rq_psn
  uint32_t localPsn = 0;   // our sq_psn: the peer's rq_psn
  uint16_t remoteLid = 0;  // InfiniBand without GRH
  bool useGid = false;     // GRH: required on RoCE (Ethernet link layer)
  ibv_gid remoteGid{};
  uint8_t gidIndex = 0;  // our source GID
  ibv_mtu mtu = IBV_MTU_1024;
  uint8_t timeout = 14;  // 4.096 us << timeout per try
  uint8_t retryCount = 7;
  uint8_t rnrRetry = 7;      // 7: retry forever
  uint8_t minRnrTimer = 12;  // 0.64 ms
  uint8_t trafficClass = 0;
  uint8_t serviceLevel = 0;
  uint8_t maxRdAtomic = 1;
};

// One step each; the error names the step ("RESET->INIT"), the QP and errno's text.
Status rcToInit(const Verbs& v, ibv_qp* qp, const RcConnectParams& p);
Status rcToRtr(const Verbs& v, ibv_qp* qp, const RcConnectParams& p);
Status rcToRts(const Verbs& v, ibv_qp* qp, const RcConnectParams& p);
// All three, from RESET. Receives can be posted only from INIT on: a caller that must post
// them before the peer may send calls the steps apart.
Status connectRcQp(const Verbs& v, ibv_qp* qp, const RcConnectParams& p);

}  // namespace coll::ib

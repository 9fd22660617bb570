// The verbs table (verbs.h): dlopen, symbol lookup, owners and the RC connection steps.
#include "transport/net/ib/verbs.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/param.h"

namespace coll::ib {

namespace {

// rdma-core's inlines, as entries of the table (they call through the provider's ops).
int pollCqOps(ibv_cq* cq, int n, ibv_wc* wc) { return cq->context->ops.poll_cq(cq, n, wc); }
int postSendOps(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) { return qp->context->ops.post_send(qp, wr, bad); }
int postRecvOps(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) { return qp->context->ops.post_recv(qp, wr, bad); }

// The symbol at libibverbs' version IBVERBS_1.1 where the library versions its symbols,
// else the plain one (libraries without version nodes).
void* lookup(void* handle, const char* name) {
  void* p = dlvsym(handle, name, "IBVERBS_1.1");
  return p ? p : dlsym(handle, name);
}

template <typename F>
bool assign(void* handle, const char* name, F* entry, std::string* missing) {
  *entry = reinterpret_cast<F>(lookup(handle, name));
  if (!*entry) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *entry != nullptr;
}

std::string hex(uint64_t x) {
  char buf[24];
  snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(x));
  return buf;
}

std::string errnoText(int err) { return std::string(strerror(err)) + " (errno " + std::to_string(err) + ")"; }

std::string qpName(const Verbs& v, ibv_qp* qp) {
  return "QP " + std::to_string(qp->qp_num) + " on " + v.getDeviceName(qp->context->device);
}

}  // namespace

Result<std::unique_ptr<Verbs>> Verbs::load(const std::string& path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return Status(Code::kSystem, "cannot load the verbs library " + path +
                                     " (COLL_IB_VERBS_LIB): " + (why ? why : "unknown dlopen error"));
  }
  std::unique_ptr<Verbs> v(new Verbs());
  v->path_ = path;
  v->handle_ = h;
  COLL_CHECK(v->resolve());
  return v;
}

Result<std::unique_ptr<Verbs>> Verbs::loadDefault() { return load(param(StringParam::IB_VERBS_LIB)); }

Verbs::~Verbs() {
  if (handle_) dlclose(handle_);
}

Status Verbs::resolve() {
  std::string missing;
  void* h = handle_;
  assign(h, "ibv_get_device_list", &getDeviceList, &missing);
  assign(h, "ibv_free_device_list", &freeDeviceList, &missing);
  assign(h, "ibv_get_device_name", &getDeviceName, &missing);
  assign(h, "ibv_open_device", &openDevice, &missing);
  assign(h, "ibv_close_device", &closeDevice, &missing);
  assign(h, "ibv_query_device", &queryDevice, &missing);
  assign(h, "ibv_query_port", &queryPortCompat_, &missing);
  assign(h, "ibv_query_gid", &queryGid, &missing);
  assign(h, "ibv_alloc_pd", &allocPd, &missing);
  assign(h, "ibv_dealloc_pd", &deallocPd, &missing);
  assign(h, "ibv_reg_mr", &regMr, &missing);
  assign(h, "ibv_dereg_mr", &deregMr, &missing);
  assign(h, "ibv_create_cq", &createCq, &missing);
  assign(h, "ibv_destroy_cq", &destroyCq, &missing);
  assign(h, "ibv_create_qp", &createQp, &missing);
  assign(h, "ibv_modify_qp", &modifyQp, &missing);
  assign(h, "ibv_query_qp", &queryQp, &missing);
  assign(h, "ibv_destroy_qp", &destroyQp, &missing);
  assign(h, "ibv_wc_status_str", &wcStatusStr, &missing);
  assign(h, "ibv_event_type_str", &eventTypeStr, &missing);
  // Optional: added in rdma-core 34 (IBVERBS_1.12).
  regDmabufMr = reinterpret_cast<decltype(regDmabufMr)>(dlsym(h, "ibv_reg_dmabuf_mr"));
  pollCq = pollCqOps;
  postSend = postSendOps;
  postRecv = postRecvOps;
  if (!missing.empty())
    return Status(Code::kSystem, "the verbs library " + path_ + " lacks " + missing + " (not libibverbs?)");
  return okStatus();
}

int Verbs::queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) const {
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  memset(attr, 0, sizeof(*attr));
  return queryPortCompat_(ctx, port, attr);
}

Result<DeviceList> DeviceList::get(const Verbs& v) {
  int n = 0;
  errno = 0;
  ibv_device** list = v.getDeviceList(&n);
  if (!list) return systemError("ibv_get_device_list of " + v.path(), errno ? errno : ENODEV);
  return DeviceList(&v, list, n);
}

DeviceList::~DeviceList() {
  if (list_) v_->freeDeviceList(list_);
}

Result<Context> openDevice(const Verbs& v, ibv_device* dev) {
  ibv_context* ctx = v.openDevice(dev);
  if (!ctx) return systemError(std::string("ibv_open_device ") + v.getDeviceName(dev), errno);
  return Context(&v, ctx);
}

Result<Pd> allocPd(const Verbs& v, ibv_context* ctx) {
  ibv_pd* pd = v.allocPd(ctx);
  if (!pd) return systemError(std::string("ibv_alloc_pd on ") + v.getDeviceName(ctx->device), errno);
  return Pd(&v, pd);
}

Result<Mr> regMr(const Verbs& v, ibv_pd* pd, void* addr, size_t length, int access) {
  ibv_mr* mr = v.regMr(pd, addr, length, access);
  if (!mr)
    return systemError("ibv_reg_mr of " + std::to_string(length) + " bytes at " +
                           hex(reinterpret_cast<uintptr_t>(addr)) + " (access " + hex(static_cast<unsigned>(access)) +
                           ") on " + v.getDeviceName(pd->context->device),
                       errno);
  return Mr(&v, mr);
}

Result<Mr> regDmabufMr(const Verbs& v, ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  const std::string what = "ibv_reg_dmabuf_mr of " + std::to_string(length) + " bytes at offset " +
                           std::to_string(offset) + " of dma-buf fd " + std::to_string(fd) + " (iova " + hex(iova) +
                           ", access " + hex(static_cast<unsigned>(access)) + ") on " +
                           v.getDeviceName(pd->context->device);
  if (!v.regDmabufMr)
    return Status(Code::kSystem,
                  what + ": the verbs library " + v.path() + " has no ibv_reg_dmabuf_mr (rdma-core < 34)");
  ibv_mr* mr = v.regDmabufMr(pd, offset, length, iova, fd, access);
  if (!mr) return systemError(what, errno);
  return Mr(&v, mr);
}

bool dmaBufSupported(const Verbs& v, ibv_pd* pd) {
  if (!v.regDmabufMr) return false;
  errno = 0;
  ibv_mr* mr = v.regDmabufMr(pd, 0, 0, 0, -1, 0);
  if (mr) {  // no provider accepts this; if one did, it supports the call
    v.deregMr(mr);
    return true;
  }
  return errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
}

Result<Cq> createCq(const Verbs& v, ibv_context* ctx, int cqe) {
  ibv_cq* cq = v.createCq(ctx, cqe, nullptr, nullptr, 0);
  if (!cq)
    return systemError("ibv_create_cq of " + std::to_string(cqe) + " entries on " + v.getDeviceName(ctx->device),
                       errno);
  return Cq(&v, cq);
}

Result<Qp> createRcQp(const Verbs& v, ibv_pd* pd, ibv_cq* sendCq, ibv_cq* recvCq, const QpCaps& caps) {
  ibv_qp_init_attr attr{};
  attr.send_cq = sendCq;
  attr.recv_cq = recvCq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = caps.signalAll ? 1 : 0;
  attr.cap.max_send_wr = caps.maxSendWr;
  attr.cap.max_recv_wr = caps.maxRecvWr;
  attr.cap.max_send_sge = caps.maxSendSge;
  attr.cap.max_recv_sge = caps.maxRecvSge;
  attr.cap.max_inline_data = caps.maxInline;
  ibv_qp* qp = v.createQp(pd, &attr);
  if (!qp) return systemError(std::string("ibv_create_qp (RC) on ") + v.getDeviceName(pd->context->device), errno);
  return Qp(&v, qp);
}

namespace {

Status modify(const Verbs& v, ibv_qp* qp, ibv_qp_attr* attr, int mask, const char* step) {
  int rc = v.modifyQp(qp, attr, mask);
  if (rc == 0) return okStatus();
  int err = rc > 0 ? rc : errno;
  return Status(Code::kSystem, std::string("ibv_modify_qp ") + step + " of " + qpName(v, qp) + ": " + errnoText(err));
}

}  // namespace

Status rcToInit(const Verbs& v, ibv_qp* qp, const RcConnectParams& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = p.port;
  a.qp_access_flags = static_cast<unsigned>(p.access);
  return modify(v, qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "RESET->INIT");
}

Status rcToRtr(const Verbs& v, ibv_qp* qp, const RcConnectParams& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = p.mtu;
  a.dest_qp_num = p.remoteQpn;
  a.rq_psn = p.remotePsn & 0xffffff;
  a.max_dest_rd_atomic = p.maxRdAtomic;
  a.min_rnr_timer = p.minRnrTimer;
  a.ah_attr.port_num = p.port;
  a.ah_attr.sl = p.serviceLevel;
  a.ah_attr.dlid = p.remoteLid;
  if (p.useGid) {
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = p.remoteGid;
    a.ah_attr.grh.sgid_index = p.gidIndex;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = p.trafficClass;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
             IBV_QP_MIN_RNR_TIMER;
  return modify(v, qp, &a, mask, "INIT->RTR");
}

Status rcToRts(const Verbs& v, ibv_qp* qp, const RcConnectParams& p) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = p.localPsn & 0xffffff;
  a.timeout = p.timeout;
  a.retry_cnt = p.retryCount;
  a.rnr_retry = p.rnrRetry;
  a.max_rd_atomic = p.maxRdAtomic;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
             IBV_QP_MAX_QP_RD_ATOMIC;
  return modify(v, qp, &a, mask, "RTR->RTS");
}

Status connectRcQp(const Verbs& v, ibv_qp* qp, const RcConnectParams& p) {
  COLL_RETURN_IF_FAILED(rcToInit(v, qp, p));
  COLL_RETURN_IF_FAILED(rcToRtr(v, qp, p));
  return rcToRts(v, qp, p);
}

}  // namespace coll::ib

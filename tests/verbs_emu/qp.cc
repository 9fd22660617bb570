// RC queue pairs of the verbs emulation: creation, the RESET -> INIT -> RTR -> RTS state
// machine of modify_qp with the attribute masks the IB spec (and the kernel's
// ib_modify_qp_is_ok) require and allow per transition, query and destruction.
#include <cerrno>
#include <cstring>
#include <new>

#include "emu.h"

using namespace verbs_emu;

namespace {

struct Transition {
  int from, to;
  int required, optional;
};

constexpr int kAnyState = -1;
constexpr Transition kRcTransitions[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, IBV_QP_STATE, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {IBV_QPS_INIT, IBV_QPS_RTR,
     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
         IBV_QP_MIN_RNR_TIMER,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {IBV_QPS_RTR, IBV_QPS_RTS,
     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0,
     IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
         IBV_QP_MIN_RNR_TIMER},
    {kAnyState, IBV_QPS_RESET, IBV_QP_STATE, 0},
    {kAnyState, IBV_QPS_ERR, IBV_QP_STATE, 0},
};

const Transition* findTransition(int from, int to) {
  for (const Transition& t : kRcTransitions)
    if ((t.from == from || t.from == kAnyState) && t.to == to) return &t;
  return nullptr;
}

// The values a driver refuses (EINVAL) for this emulated port.
bool valuesOk(const ibv_qp_attr* a, int mask) {
  bool eth = linkIsEthernet();
  if ((mask & IBV_QP_PORT) && a->port_num != 1) return false;
  if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) return false;
  if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > (eth ? IBV_MTU_1024 : IBV_MTU_4096)))
    return false;
  if (mask & IBV_QP_AV) {
    const ibv_ah_attr& ah = a->ah_attr;
    if (ah.port_num != 1 || (eth && !ah.is_global)) return false;  // RoCE needs the GRH
    if (ah.is_global && ah.grh.sgid_index >= gidTableLen()) return false;
    if (!ah.is_global && ah.dlid == 0) return false;
  }
  if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff) return false;
  if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) return false;
  if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) return false;
  if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) return false;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) return false;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > 16) return false;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > 16) return false;
  return true;
}

void applyAttrs(QpSlot& s, const ibv_qp_attr* a, int mask) {
  if (mask & IBV_QP_PORT) s.port = a->port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) s.access = static_cast<int32_t>(a->qp_access_flags);
  if (mask & IBV_QP_PATH_MTU) s.mtu = static_cast<uint8_t>(a->path_mtu);
  if (mask & IBV_QP_DEST_QPN) s.destQpn = a->dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) s.rqPsn = a->rq_psn & 0xffffff;
  if (mask & IBV_QP_SQ_PSN) s.sqPsn = a->sq_psn & 0xffffff;
  if (mask & IBV_QP_MIN_RNR_TIMER) s.minRnrTimer = a->min_rnr_timer;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.maxDestRdAtomic = a->max_dest_rd_atomic;
  if (mask & IBV_QP_TIMEOUT) s.timeout = a->timeout;
  if (mask & IBV_QP_RETRY_CNT) s.retryCnt = a->retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) s.rnrRetry = a->rnr_retry;
  if (mask & IBV_QP_AV) {
    s.dlid = a->ah_attr.dlid;
    s.isGlobal = a->ah_attr.is_global;
    memcpy(s.dgid, a->ah_attr.grh.dgid.raw, 16);
  }
}

bool capsOk(const ibv_qp_init_attr* a) {
  const ibv_qp_cap& c = a->cap;
  return a->qp_type == IBV_QPT_RC && a->send_cq && a->recv_cq && !a->srq && c.max_send_wr >= 1 &&
         c.max_send_wr <= kMaxWr && c.max_recv_wr <= kMaxWr && c.max_send_sge <= kMaxSge && c.max_recv_sge <= kMaxSge &&
         c.max_inline_data <= kMaxInline;
}

}  // namespace

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* ibpd, ibv_qp_init_attr* attr) {
  if (!capsOk(attr)) {
    errno = attr->qp_type == IBV_QPT_RC ? EINVAL : EOPNOTSUPP;
    return nullptr;
  }
  EmuContext* c = emuCtx(ibpd->context);
  Fabric* f = c->fabric;
  FabricLock lock(f);
  int i = -1;
  for (int k = 0; k < kMaxQps && i < 0; k++)
    if (!f->qps[k].inUse || !procAlive(f->qps[k].owner)) i = k;
  auto* qp = i < 0 ? nullptr : new (std::nothrow) EmuQp{};
  if (!qp) {
    errno = ENOMEM;
    return nullptr;
  }
  QpSlot& s = f->qps[i];
  memset(static_cast<void*>(&s), 0, offsetof(QpSlot, rq));  // the receive ring needs no clearing
  s.inUse = 1;
  s.owner = selfProc();
  s.dev = c->dev;
  s.qpn = f->nextQpn++ & 0xffffff;
  s.pd = reinterpret_cast<EmuPd*>(ibpd)->id;
  s.state = IBV_QPS_RESET;
  s.sendCq = emuCq(attr->send_cq)->slot;
  s.recvCq = emuCq(attr->recv_cq)->slot;
  s.maxRecv = attr->cap.max_recv_wr;
  f->cqs[s.sendCq].users++;
  f->cqs[s.recvCq].users++;
  qp->slot = i;
  qp->pd = reinterpret_cast<EmuPd*>(ibpd);
  qp->pd->users++;
  qp->maxSend = attr->cap.max_send_wr;
  qp->maxSendSge = attr->cap.max_send_sge;
  qp->sigAll = attr->sq_sig_all != 0;
  qp->qp = {};
  qp->qp.context = ibpd->context;
  qp->qp.qp_context = attr->qp_context;
  qp->qp.pd = ibpd;
  qp->qp.send_cq = attr->send_cq;
  qp->qp.recv_cq = attr->recv_cq;
  qp->qp.handle = static_cast<uint32_t>(i);
  qp->qp.qp_num = s.qpn;
  qp->qp.state = IBV_QPS_RESET;
  qp->qp.qp_type = IBV_QPT_RC;
  c->qps.push_back(qp);
  return &qp->qp;
}

// EINVAL for a transition RC does not have, a required attribute missing, an attribute
// the transition does not take, or a value the port refuses; nothing changes then.
int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  EmuQp* qp = emuQp(ibqp);
  EmuContext* c = emuCtx(ibqp->context);
  FabricLock lock(c->fabric);
  QpSlot& s = c->fabric->qps[qp->slot];
  int to = (mask & IBV_QP_STATE) ? attr->qp_state : s.state;
  const Transition* t = findTransition(s.state, to);
  bool ok = t && (mask & t->required) == t->required && (mask & ~(t->required | t->optional)) == 0 &&
            (!(mask & IBV_QP_CUR_STATE) || attr->cur_qp_state == s.state) && valuesOk(attr, mask);
  if (!ok) return errno = EINVAL;
  applyAttrs(s, attr, mask);
  if (to == IBV_QPS_RESET) {  // posted work is discarded without completions
    s.rqHead = s.rqTail;
    qp->sq.clear();
    qp->unsignaledHeld = 0;
  }
  if (to == IBV_QPS_ERR) moveToError(c->fabric, &s);
  s.state = to;
  ibqp->state = static_cast<ibv_qp_state>(to);
  progressContext(c);  // flushes the send queue of a QP now in ERR
  return 0;
}

int ibv_query_qp(ibv_qp* ibqp, ibv_qp_attr* a, int /*mask*/, ibv_qp_init_attr* init) {
  EmuQp* qp = emuQp(ibqp);
  Fabric* f = emuCtx(ibqp->context)->fabric;
  FabricLock lock(f);
  const QpSlot& s = f->qps[qp->slot];
  memset(a, 0, sizeof(*a));
  a->qp_state = a->cur_qp_state = static_cast<ibv_qp_state>(s.state);
  a->path_mtu = static_cast<ibv_mtu>(s.mtu);
  a->qp_access_flags = static_cast<unsigned>(s.access);
  a->dest_qp_num = s.destQpn;
  a->rq_psn = s.rqPsn;
  a->sq_psn = s.sqPsn;
  a->port_num = s.port;
  a->timeout = s.timeout;
  a->retry_cnt = s.retryCnt;
  a->rnr_retry = s.rnrRetry;
  a->min_rnr_timer = s.minRnrTimer;
  a->ah_attr.dlid = s.dlid;
  a->ah_attr.is_global = s.isGlobal;
  memcpy(a->ah_attr.grh.dgid.raw, s.dgid, 16);
  a->cap.max_send_wr = qp->maxSend;
  a->cap.max_send_sge = qp->maxSendSge;
  a->cap.max_recv_wr = s.maxRecv;
  if (init) {
    memset(init, 0, sizeof(*init));
    init->send_cq = ibqp->send_cq;
    init->recv_cq = ibqp->recv_cq;
    init->cap = a->cap;
    init->qp_type = IBV_QPT_RC;
    init->sq_sig_all = qp->sigAll;
  }
  return 0;
}

// The QP disappears at once: its peer's next packets go unanswered (retry exceeded).
int ibv_destroy_qp(ibv_qp* ibqp) {
  EmuQp* qp = emuQp(ibqp);
  EmuContext* c = emuCtx(ibqp->context);
  FabricLock lock(c->fabric);
  QpSlot& s = c->fabric->qps[qp->slot];
  c->fabric->cqs[s.sendCq].users--;
  c->fabric->cqs[s.recvCq].users--;
  s.inUse = 0;
  qp->pd->users--;
  forgetQp(c, qp);
  delete qp;
  return 0;
}

// Test hook: the QP goes to ERR as after a fatal error; its posted receives and sends
// complete with IBV_WC_WR_FLUSH_ERR. Returns 0 (every state may move to ERR).
int collVerbsEmuForceError(ibv_qp* ibqp) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  return ibv_modify_qp(ibqp, &a, IBV_QP_STATE);
}

int collVerbsEmuDropWrites(ibv_qp* ibqp, int n) {
  EmuQp* qp = emuQp(ibqp);
  FabricLock lock(emuCtx(ibqp->context)->fabric);
  qp->dropWrites = n;
  return 0;
}

}  // extern "C"

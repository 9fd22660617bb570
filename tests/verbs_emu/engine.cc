// The data path of the verbs emulation: post_send, post_recv, poll_cq, and the execution
// of send work requests.
//
// How a work request moves. post_send queues the WR on the QP's process-local send queue
// and tries to execute it at once; WRs that cannot run yet (no receive posted at the peer,
// the peer unreachable) stay at the head and are retried by every later post_send and
// poll_cq of the context, so completions of a QP come in posting order. Executing a WR
// checks what the hardware checks (the requester's lkeys, then the responder's state,
// connection, rkey, range and access) and writes the bytes straight into the responder
// process's memory with process_vm_writev, so an RDMA WRITE lands without the target
// process doing anything, as on hardware (between processes of one user; the library's
// constructor lets Yama's ptrace_scope=1 allow it, verbs_emu.cc). An RDMA READ is the mirror
// image: process_vm_readv from the responder, then into the requester's own SGEs; a QP
// connected to itself (loopback, as NCCL's flush uses) is its own responder.
// What a test may not assume: the moment.
// Hardware writes in the background; here the bytes land during one of the requester's
// verbs calls (post_send or poll_cq), never between them. A backend that waits for a
// remote write without polling its own CQ works on hardware and hangs here only if it
// also never posts or polls, which a backend does not do.
//
// Simplifications, each a place where a test must not rely on more than the spec says:
//   - Packets are not modelled: a WR moves whole or not at all, retries do not rewrite.
//   - The transport timeout (4.096 us << timeout, times retry_cnt + 1) is capped at 2 s.
//   - A responder that NAKs a remote access error keeps its state (hardware may differ).
//   - The PSN check compares the requester's sq_psn with the responder's rq_psn as set by
//     modify_qp; PSNs do not advance per message.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "emu.h"

namespace verbs_emu {

uint64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

enum class Outcome { kDone, kLater, kFailed };
struct Exec {
  Outcome outcome;
  ibv_wc_status status = IBV_WC_SUCCESS;
};
Exec failed(ibv_wc_status s) { return {Outcome::kFailed, s}; }
Exec later() { return {Outcome::kLater}; }

// IBTA's RNR NAK timer values (min_rnr_timer 0..31), in microseconds.
constexpr uint32_t kRnrTimerUs[32] = {655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
                                      480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
                                      20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};
constexpr uint64_t kMaxTransportTimeoutNs = 2000000000ull;

bool sameProc(const ProcId& a, const ProcId& b) { return a.pid == b.pid && a.start == b.start; }

// An SGE of `qp`'s process and PD, inside one MR that grants `access`.
bool sgeOk(Fabric* f, const QpSlot& qp, const ShmSge& s, int access) {
  if (s.length == 0) return true;
  MrSlot* m = findMrByLkey(f, s.lkey);
  if (!m || !sameProc(m->owner, qp.owner) || m->pd != qp.pd) return false;
  if (s.addr < m->addr || s.addr + s.length > m->addr + m->length) return false;
  return (m->access & access) == access;
}

// Writes into process `pid` (ours included); 0 or the errno.
int writeTo(int pid, uint64_t addr, const char* src, size_t len) {
  while (len > 0) {
    iovec l{const_cast<char*>(src), len};
    iovec r{reinterpret_cast<void*>(addr), len};
    ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;
    src += n;
    addr += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return 0;
}

// Reads from process `pid` (ours included); 0 or the errno.
int readFrom(int pid, uint64_t addr, char* dst, size_t len) {
  while (len > 0) {
    iovec l{dst, len};
    iovec r{reinterpret_cast<void*>(addr), len};
    ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;
    dst += n;
    addr += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return 0;
}

size_t sgeBytes(const PendingSend& w) {
  size_t n = 0;
  for (const ShmSge& s : w.sge) n += s.length;
  return n;
}

std::vector<char> gather(const PendingSend& w) {
  if (w.isInline) return w.inlineData;
  std::vector<char> out;
  for (const ShmSge& s : w.sge) {
    const char* p = reinterpret_cast<const char*>(s.addr);
    out.insert(out.end(), p, p + s.length);
  }
  return out;
}

bool addressed(const QpSlot& q, const QpSlot& t) {
  if (linkIsEthernet() || q.isGlobal) {
    for (int i = 0; i < gidTableLen(); i++) {
      ibv_gid g = deviceGid(t.dev, i);
      if (memcmp(g.raw, q.dgid, 16) == 0) return true;
    }
    return false;
  }
  return q.dlid == deviceLid(t.dev);
}

// The responder that accepts this QP's packets, or nullptr: hardware gets no answer then
// and retries until the transport timeout.
QpSlot* responder(Fabric* f, const QpSlot& q) {
  QpSlot* t = findQp(f, q.destQpn);
  if (!t || !procAlive(t->owner)) return nullptr;
  if (t->state != IBV_QPS_RTR && t->state != IBV_QPS_RTS) return nullptr;
  if (t->destQpn != q.qpn || !addressed(q, *t) || q.sqPsn != t->rqPsn) return nullptr;
  return t;
}

Exec unreachable(const QpSlot& q, PendingSend& w) {
  uint64_t now = nowNs();
  if (w.firstTryNs == 0) w.firstTryNs = now;
  if (q.timeout == 0) return later();  // 0: wait forever (IBTA)
  uint64_t limit = std::min<uint64_t>((4096ull << q.timeout) * (q.retryCnt + 1u), kMaxTransportTimeoutNs);
  return now - w.firstTryNs >= limit ? failed(IBV_WC_RETRY_EXC_ERR) : later();
}

// No receive posted at the responder: an RNR NAK; the requester retries after the
// responder's min_rnr_timer, rnr_retry times (7: forever).
Exec receiverNotReady(const QpSlot& q, const QpSlot& t, PendingSend& w) {
  uint64_t now = nowNs();
  if (now < w.nextTryNs) return later();
  w.rnrTries++;
  if (q.rnrRetry != 7 && w.rnrTries > q.rnrRetry) return failed(IBV_WC_RNR_RETRY_EXC_ERR);
  w.nextTryNs = now + kRnrTimerUs[t.minRnrTimer & 31] * 1000ull;
  return later();
}

// The responder consumed a receive and failed it: its QP goes to ERR.
void responderError(Fabric* f, QpSlot* t, uint64_t wrId, ibv_wc_status status) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = IBV_WC_RECV;
  wc.qp_num = t->qpn;
  pushCompletion(f, t->recvCq, wc);
  moveToError(f, t);
}

void completeRecv(Fabric* f, QpSlot* t, const QpSlot& q, uint64_t wrId, ibv_wc_opcode op, size_t len,
                  const PendingSend& w) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = op;
  wc.byte_len = static_cast<uint32_t>(len);
  wc.qp_num = t->qpn;
  wc.src_qp = q.qpn;
  wc.slid = deviceLid(q.dev);
  if (w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || w.opcode == IBV_WR_SEND_WITH_IMM) {
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = w.imm;
  }
  if (!pushCompletion(f, t->recvCq, wc)) moveToError(f, t);
}

// SEND: scatters into the responder's next receive, whose SGEs it checks as the
// responder's hardware would (lkey, LOCAL_WRITE, room).
Exec deliverSend(Fabric* f, const QpSlot& q, QpSlot* t, const PendingSend& w, const std::vector<char>& data) {
  const ShmRecv r = t->rq[t->rqHead % kMaxWr];
  t->rqHead++;
  size_t room = 0;
  for (int i = 0; i < r.numSge; i++) {
    if (!sgeOk(f, *t, r.sge[i], IBV_ACCESS_LOCAL_WRITE)) {
      responderError(f, t, r.wrId, IBV_WC_LOC_PROT_ERR);
      return failed(IBV_WC_REM_OP_ERR);
    }
    room += r.sge[i].length;
  }
  if (room < data.size()) {
    responderError(f, t, r.wrId, IBV_WC_LOC_LEN_ERR);
    return failed(IBV_WC_REM_INV_REQ_ERR);
  }
  size_t off = 0;
  for (int i = 0; i < r.numSge && off < data.size(); i++) {
    size_t n = std::min<size_t>(r.sge[i].length, data.size() - off);
    if (writeTo(t->owner.pid, r.sge[i].addr, data.data() + off, n) != 0) return failed(IBV_WC_REM_OP_ERR);
    off += n;
  }
  completeRecv(f, t, q, r.wrId, IBV_WC_RECV, data.size(), w);
  return {Outcome::kDone};
}

// RDMA WRITE (with immediate): the rkey must name an MR of the responder's process and PD
// granting REMOTE_WRITE over the whole range, and the responder QP must allow it.
Exec deliverWrite(Fabric* f, const QpSlot& q, QpSlot* t, PendingSend& w, const std::vector<char>& data) {
  MrSlot* m = findMrByRkey(f, w.rkey);
  bool ok = m && sameProc(m->owner, t->owner) && m->pd == t->pd && (m->access & IBV_ACCESS_REMOTE_WRITE) &&
            (t->access & IBV_ACCESS_REMOTE_WRITE) && w.remoteAddr >= m->addr &&
            w.remoteAddr + data.size() <= m->addr + m->length;
  if (!ok) return failed(IBV_WC_REM_ACCESS_ERR);
  bool imm = w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (imm && t->rqHead == t->rqTail) return receiverNotReady(q, *t, w);
  int err = writeTo(t->owner.pid, w.remoteAddr, data.data(), data.size());
  if (err == ESRCH) return unreachable(q, w);
  // EFAULT: the MR's memory was unmapped; hardware would write the pinned pages anyway.
  if (err != 0) return failed(IBV_WC_REM_ACCESS_ERR);
  if (imm) {
    uint64_t wrId = t->rq[t->rqHead % kMaxWr].wrId;
    t->rqHead++;
    completeRecv(f, t, q, wrId, IBV_WC_RECV_RDMA_WITH_IMM, data.size(), w);
  }
  return {Outcome::kDone};
}

// RDMA READ: the rkey must name an MR of the responder's process and PD granting
// REMOTE_READ over the whole range, the responder QP must allow remote reads, and it must
// have taken read resources (max_dest_rd_atomic > 0) or it NAKs the request as invalid.
// The bytes land in the requester's SGEs (checked for LOCAL_WRITE by execute()).
Exec deliverRead(Fabric* f, const QpSlot& q, const QpSlot* t, PendingSend& w) {
  const size_t len = sgeBytes(w);
  if (t->maxDestRdAtomic == 0) return failed(IBV_WC_REM_INV_REQ_ERR);
  MrSlot* m = findMrByRkey(f, w.rkey);
  bool ok = m && sameProc(m->owner, t->owner) && m->pd == t->pd && (m->access & IBV_ACCESS_REMOTE_READ) &&
            (t->access & IBV_ACCESS_REMOTE_READ) && w.remoteAddr >= m->addr &&
            w.remoteAddr + len <= m->addr + m->length;
  if (!ok) return failed(IBV_WC_REM_ACCESS_ERR);
  std::vector<char> data(len);
  int err = readFrom(t->owner.pid, w.remoteAddr, data.data(), len);
  if (err == ESRCH) return unreachable(q, w);
  // EFAULT: the MR's memory was unmapped; hardware would read the pinned pages anyway.
  if (err != 0) return failed(IBV_WC_REM_ACCESS_ERR);
  size_t off = 0;
  for (const ShmSge& s : w.sge) {
    if (writeTo(q.owner.pid, s.addr, data.data() + off, s.length) != 0) return failed(IBV_WC_LOC_PROT_ERR);
    off += s.length;
  }
  return {Outcome::kDone};
}

Exec execute(Fabric* f, const QpSlot& q, PendingSend& w) {
  // A READ writes into the local SGEs, so they need LOCAL_WRITE; the others only read them.
  const bool read = w.opcode == IBV_WR_RDMA_READ;
  if (!w.isInline)
    for (const ShmSge& s : w.sge)
      if (!sgeOk(f, q, s, read ? IBV_ACCESS_LOCAL_WRITE : 0)) return failed(IBV_WC_LOC_PROT_ERR);
  QpSlot* t = responder(f, q);
  if (!t) return unreachable(q, w);
  if (read) return deliverRead(f, q, t, w);
  std::vector<char> data = gather(w);
  if (w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) return deliverWrite(f, q, t, w, data);
  if (t->rqHead == t->rqTail) return receiverNotReady(q, *t, w);
  return deliverSend(f, q, t, w, data);
}

// Pushes a send completion; false when the CQ overran.
bool completeSend(Fabric* f, const QpSlot& q, const PendingSend& w, ibv_wc_status status) {
  ibv_wc wc{};
  wc.wr_id = w.wrId;
  wc.status = status;
  bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  wc.opcode = write ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
  if (w.opcode == IBV_WR_RDMA_READ) {  // byte_len is valid for READ completions only
    wc.opcode = IBV_WC_RDMA_READ;
    wc.byte_len = static_cast<uint32_t>(sgeBytes(w));
  }
  wc.qp_num = q.qpn;
  return pushCompletion(f, q.sendCq, wc);
}

void progressQp(Fabric* f, EmuQp* qp) {
  QpSlot& q = f->qps[qp->slot];
  while (!qp->sq.empty()) {
    PendingSend& w = qp->sq.front();
    if (q.state == IBV_QPS_ERR) {  // every WR completes, signaled or not, with a flush error
      completeSend(f, q, w, IBV_WC_WR_FLUSH_ERR);
      qp->sq.pop_front();
      continue;
    }
    if (q.state != IBV_QPS_RTS) return;
    const bool drop = qp->dropWrites > 0 && w.opcode == IBV_WR_RDMA_WRITE;
    if (drop) qp->dropWrites--;
    Exec e = drop ? Exec{Outcome::kDone} : execute(f, q, w);
    if (e.outcome == Outcome::kLater) return;
    if (e.outcome == Outcome::kFailed) {
      completeSend(f, q, w, e.status);
      moveToError(f, &q);
    } else if (w.signaled || qp->sigAll) {
      qp->unsignaledHeld = 0;
      if (!completeSend(f, q, w, IBV_WC_SUCCESS)) moveToError(f, &q);
    } else {
      qp->unsignaledHeld++;
    }
    qp->sq.pop_front();
  }
}

// Checks a send WR as the provider does at post time; 0 or the errno post_send returns.
int checkSendWr(const EmuQp* qp, const ibv_send_wr* wr) {
  switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: break;
    case IBV_WR_RDMA_READ:
      if (wr->send_flags & IBV_SEND_INLINE) return EINVAL;  // inline data is for what the requester sends
      break;
    default: return EINVAL;  // atomics are not emulated
  }
  if (wr->num_sge < 0 || wr->num_sge > static_cast<int>(qp->maxSendSge)) return EINVAL;
  if (qp->sq.size() + qp->unsignaledHeld >= qp->maxSend) return ENOMEM;
  if (wr->send_flags & IBV_SEND_INLINE) {
    size_t len = 0;
    for (int i = 0; i < wr->num_sge; i++) len += wr->sg_list[i].length;
    if (len > kMaxInline) return EINVAL;
  }
  return 0;
}

PendingSend toPending(const ibv_send_wr* wr) {
  PendingSend w{};
  w.wrId = wr->wr_id;
  w.opcode = wr->opcode;
  w.signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
  w.imm = wr->imm_data;
  w.remoteAddr = wr->wr.rdma.remote_addr;
  w.rkey = wr->wr.rdma.rkey;
  w.isInline = (wr->send_flags & IBV_SEND_INLINE) != 0;
  for (int i = 0; i < wr->num_sge; i++) {
    const ibv_sge& s = wr->sg_list[i];
    w.sge.push_back({s.addr, s.length, s.lkey});
    if (w.isInline) {
      const char* p = reinterpret_cast<const char*>(s.addr);
      w.inlineData.insert(w.inlineData.end(), p, p + s.length);
    }
  }
  return w;
}

}  // namespace

void progressContext(EmuContext* c) {
  for (EmuQp* qp : c->qps) progressQp(c->fabric, qp);
}

void forgetQp(EmuContext* c, EmuQp* qp) { c->qps.erase(std::remove(c->qps.begin(), c->qps.end(), qp), c->qps.end()); }

// Posting is refused (EINVAL) before RTS, as rxe and the IB spec's "post send in RESET,
// INIT or RTR" rule do; in ERR a post is accepted and flushed.
int postSend(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  EmuQp* qp = emuQp(ibqp);
  EmuContext* c = emuCtx(ibqp->context);
  FabricLock lock(c->fabric);
  int state = c->fabric->qps[qp->slot].state;
  int err = (state == IBV_QPS_RTS || state == IBV_QPS_ERR) ? 0 : EINVAL;
  for (; wr && err == 0; wr = wr->next) {
    err = checkSendWr(qp, wr);
    if (err == 0) qp->sq.push_back(toPending(wr));
  }
  if (err != 0 && bad) *bad = wr;
  progressContext(c);
  return err;
}

int postRecv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  EmuQp* qp = emuQp(ibqp);
  Fabric* f = emuCtx(ibqp->context)->fabric;
  FabricLock lock(f);
  QpSlot& q = f->qps[qp->slot];
  for (; wr; wr = wr->next) {
    int err = 0;
    if (q.state == IBV_QPS_RESET) err = EINVAL;
    else if (wr->num_sge < 0 || wr->num_sge > kMaxSge) err = EINVAL;
    else if (q.rqTail - q.rqHead >= q.maxRecv) err = ENOMEM;
    if (err != 0) {
      if (bad) *bad = wr;
      return err;
    }
    ShmRecv& r = q.rq[q.rqTail % kMaxWr];
    r.wrId = wr->wr_id;
    r.numSge = wr->num_sge;
    for (int i = 0; i < wr->num_sge; i++) r.sge[i] = {wr->sg_list[i].addr, wr->sg_list[i].length, wr->sg_list[i].lkey};
    q.rqTail++;
    if (q.state == IBV_QPS_ERR) moveToError(f, &q);  // flushes it at once
  }
  return 0;
}

// Entries first; once a CQ that overran is empty, every poll fails (EOVERFLOW): hardware
// reports the overrun as an asynchronous CQ error and the CQ is unusable after it.
int pollCq(ibv_cq* ibcq, int n, ibv_wc* wc) {
  EmuContext* c = emuCtx(ibcq->context);
  FabricLock lock(c->fabric);
  progressContext(c);
  CqSlot& cq = c->fabric->cqs[emuCq(ibcq)->slot];
  int got = 0;
  for (; got < n && cq.head != cq.tail; got++, cq.head++) wc[got] = cq.wc[cq.head % kMaxCqe];
  if (got == 0 && cq.overrun) {
    errno = EOVERFLOW;
    return -1;
  }
  return got;
}

}  // namespace verbs_emu

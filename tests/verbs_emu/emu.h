// Process-local objects of the verbs emulation: what ibv_* hands out. Each embeds the
// rdma-core struct first, so the pointer the caller holds is the object.
//
// Concurrency: every field that changes after creation (a QP's send queue, a context's QP
// list) is guarded by the fabric lock of the object's context, like the shared slots.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "fabric.h"

namespace verbs_emu {

struct EmuQp;

struct EmuContext {
  ibv_context ctx;  // first: ctx.ops holds post_send, post_recv, poll_cq
  Fabric* fabric;
  int dev;
  std::vector<EmuQp*> qps;  // progressed by every poll_cq and post_send of the context
};

struct EmuPd {
  ibv_pd pd;
  uint32_t id;  // fabric-wide
  int users;    // MRs and QPs (dealloc_pd gives EBUSY while any)
};

struct EmuMr {
  ibv_mr mr;
  int slot;
};

struct EmuCq {
  ibv_cq cq;
  int slot;
};

// A posted send, as the emulation executes it later.
struct PendingSend {
  uint64_t wrId;
  ibv_wr_opcode opcode;
  bool signaled;
  uint32_t imm;  // network order, as posted and as delivered
  uint64_t remoteAddr;
  uint32_t rkey;
  std::vector<ShmSge> sge;
  bool isInline;
  std::vector<char> inlineData;  // IBV_SEND_INLINE: the bytes, copied at post time
  uint64_t firstTryNs = 0;       // when the peer was first found unreachable
  uint64_t nextTryNs = 0;        // RNR back-off
  int rnrTries = 0;
};

struct EmuQp {
  ibv_qp qp;
  int slot;
  EmuPd* pd;
  uint32_t maxSend, maxSendSge;
  bool sigAll;
  // Executed unsignaled WRs whose send-queue slots hardware frees only when a later
  // signaled WR completes; they count against max_send_wr until then.
  uint32_t unsignaledHeld = 0;
  // Test hook: plain RDMA WRITEs still to complete successfully without placing their data.
  int dropWrites = 0;
  std::deque<PendingSend> sq;
};

inline EmuContext* emuCtx(ibv_context* c) { return reinterpret_cast<EmuContext*>(c); }
inline EmuQp* emuQp(ibv_qp* q) { return reinterpret_cast<EmuQp*>(q); }
inline EmuCq* emuCq(ibv_cq* c) { return reinterpret_cast<EmuCq*>(c); }

// The data path (engine.cc), installed in ibv_context::ops.
int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int pollCq(ibv_cq* cq, int n, ibv_wc* wc);
// Executes what it can of every QP's send queue of the context (lock held).
void progressContext(EmuContext* c);
// Drops a QP from its context's progress list (lock held).
void forgetQp(EmuContext* c, EmuQp* qp);

uint64_t nowNs();

}  // namespace verbs_emu

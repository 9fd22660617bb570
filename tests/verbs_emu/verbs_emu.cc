// libcoll_verbs_emu.so: the ibv_* calls src/transport/net/ib/verbs.cc loads, emulated in
// shared memory for tests on machines without an RDMA device (fabric.h says what is
// shared, engine.cc how work requests execute). This file is the control path: devices,
// ports, PDs, MRs, CQs, QPs and the RC state machine.
//
// Configuration (environment, read at each call that needs it):
//   COLL_VERBS_EMU_DEVICES  device names, comma list of at most 2 (default "emu0")
//   COLL_VERBS_EMU_LINK     "ib" (default: LIDs) or "eth" (RoCE: GIDs, GRH required)
//   COLL_VERBS_EMU_FABRIC   shm name of the fabric (default "/coll_verbs_emu_<uid>")
//   COLL_VERBS_EMU_DMABUF   "0": ibv_reg_dmabuf_mr fails with EOPNOTSUPP, as rdma-core's
//                           does where the provider or kernel has no dma-buf support
// Test hooks: collVerbsEmuForceError(qp) moves a QP to ERR as a fatal error would;
// collVerbsEmuDropWrites(qp, n) makes the QP's next n plain RDMA WRITEs complete
// successfully without placing their data (a lost message no RC hardware would report).
//
// dma-buf MRs (ibv_reg_dmabuf_mr): any file stands for the dma-buf (tests use a memfd),
// and its pages must be mapped in the process at `iova`, because the emulation moves bytes
// through process memory; a NIC would reach the dma-buf's pages whatever `iova` maps to.
//
// Not modelled: completion channels and asynchronous events, SRQs, UD/UC QPs, atomics,
// memory windows, multiple ports, P_Keys beyond index 0, alternate paths, SQD.
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "emu.h"

#undef ibv_get_device_list
#undef ibv_reg_mr
#undef ibv_query_port

using namespace verbs_emu;

namespace {

ibv_device gDevices[kMaxDevices];

// Lets a process of our user write into this one with process_vm_writev where Yama's
// ptrace_scope is 1 (EINVAL without Yama, which is fine).
__attribute__((constructor)) void allowPeerWrites() { prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); }

int deviceIndex(const ibv_device* d) {
  for (int i = 0; i < kMaxDevices; i++)
    if (d == &gDevices[i]) return i;
  return -1;
}

int setErr(int e) {
  errno = e;
  return e;
}

template <typename T>
T* nullWith(int e) {
  errno = e;
  return nullptr;
}

// A free slot of `slots` (or one whose owner died), or -1.
template <typename Slot, size_t N>
int freeSlot(Slot (&slots)[N]) {
  for (size_t i = 0; i < N; i++)
    if (!slots[i].inUse || !procAlive(slots[i].owner)) {
      memset(static_cast<void*>(&slots[i]), 0, sizeof(Slot));
      return static_cast<int>(i);
    }
  return -1;
}

// The readable bytes of [addr, addr+len) at both ends: reg_mr of unmapped memory fails.
bool mapped(void* addr, size_t len) {
  char a = 0, b = 0;
  iovec local[2] = {{&a, 1}, {&b, 1}};
  iovec remote[2] = {{addr, 1}, {static_cast<char*>(addr) + len - 1, 1}};
  return process_vm_readv(getpid(), local, 2, remote, 2, 0) == 2;
}

bool accessOk(size_t len, int access) {
  constexpr int kKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_OPTIONAL_RANGE;
  if (len == 0 || (access & ~kKnown)) return false;
  // IBTA: remote write or atomic access requires local write.
  return !((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE));
}

// An MR slot for [addr, addr + len) of this process, once the caller checked the range.
ibv_mr* registerMr(ibv_pd* ibpd, void* addr, size_t len, int access) {
  auto* pd = reinterpret_cast<EmuPd*>(ibpd);
  Fabric* f = emuCtx(ibpd->context)->fabric;
  FabricLock lock(f);
  int i = freeSlot(f->mrs);
  if (i < 0) return nullWith<ibv_mr>(ENOMEM);
  auto* mr = new (std::nothrow) EmuMr{};
  if (!mr) return nullWith<ibv_mr>(ENOMEM);
  MrSlot& s = f->mrs[i];
  s.inUse = 1;
  s.owner = selfProc();
  s.pd = pd->id;
  s.lkey = (static_cast<uint32_t>(i) << 8) | (f->keyVariant++ & 0xff);
  s.rkey = s.lkey | kRkeyBit;
  s.addr = reinterpret_cast<uint64_t>(addr);
  s.length = len;
  s.access = access;
  mr->slot = i;
  mr->mr = {ibpd->context, ibpd, addr, len, static_cast<uint32_t>(i), s.lkey, s.rkey};
  pd->users++;
  return &mr->mr;
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  const char* env = getenv("COLL_VERBS_EMU_DEVICES");
  std::string names = env && *env ? env : "emu0";
  auto** list = static_cast<ibv_device**>(calloc(kMaxDevices + 1, sizeof(ibv_device*)));
  if (!list) return nullWith<ibv_device*>(ENOMEM);
  int n = 0;
  size_t pos = 0;
  while (n < kMaxDevices && pos <= names.size()) {
    size_t end = names.find(',', pos);
    if (end == std::string::npos) end = names.size();
    std::string name = names.substr(pos, end - pos);
    pos = end + 1;
    if (name.empty()) continue;
    ibv_device& d = gDevices[n];
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    snprintf(d.name, sizeof(d.name), "%s", name.c_str());
    snprintf(d.dev_name, sizeof(d.dev_name), "uverbs%d", n);
    snprintf(d.dev_path, sizeof(d.dev_path), "/sys/class/infiniband_verbs/uverbs%d", n);
    snprintf(d.ibdev_path, sizeof(d.ibdev_path), "/sys/class/infiniband/%s", name.c_str());
    list[n++] = &d;
  }
  if (num) *num = n;
  return list;
}

void ibv_free_device_list(ibv_device** list) { free(list); }

const char* ibv_get_device_name(ibv_device* d) { return d->name; }

ibv_context* ibv_open_device(ibv_device* d) {
  int dev = deviceIndex(d);
  if (dev < 0) return nullWith<ibv_context>(ENODEV);
  Fabric* f = mapFabric();
  if (!f) return nullptr;
  auto* c = new (std::nothrow) EmuContext{};
  if (!c) {
    unmapFabric(f);
    return nullWith<ibv_context>(ENOMEM);
  }
  c->fabric = f;
  c->dev = dev;
  c->ctx.device = d;
  c->ctx.cmd_fd = -1;
  c->ctx.async_fd = -1;
  c->ctx.num_comp_vectors = 1;
  c->ctx.abi_compat = nullptr;  // not a verbs_context: rdma-core's inlines use ops below
  pthread_mutex_init(&c->ctx.mutex, nullptr);
  c->ctx.ops.post_send = postSend;
  c->ctx.ops.post_recv = postRecv;
  c->ctx.ops.poll_cq = pollCq;
  return &c->ctx;
}

int ibv_close_device(ibv_context* ctx) {
  EmuContext* c = emuCtx(ctx);
  unmapFabric(c->fabric);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  return 0;
}

int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "coll-verbs-emu");
  a->node_guid = htobe64(0x0002e33000000000ull + static_cast<uint64_t>(emuCtx(ctx)->dev) + 1);
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = 1ull << 40;
  a->page_size_cap = 4096;
  a->max_qp = kMaxQps;
  a->max_qp_wr = kMaxWr;
  a->max_sge = kMaxSge;
  a->max_cq = kMaxCqs;
  a->max_cqe = kMaxCqe;
  a->max_mr = kMaxMrs;
  a->max_pd = kMaxQps;
  a->max_qp_rd_atom = 16;
  a->max_qp_init_rd_atom = 16;
  a->max_pkeys = 1;
  a->phys_port_cnt = 1;
  a->atomic_cap = IBV_ATOMIC_NONE;
  return 0;
}

// Exported with rdma-core's compat signature; callers (NCCL, verbs.cc, the header's
// inline) pass a whole ibv_port_attr, which this fills.
int ibv_query_port(ibv_context* ctx, uint8_t port, struct _compat_ibv_port_attr* compat) {
  if (port != 1) return setErr(EINVAL);
  auto* a = reinterpret_cast<ibv_port_attr*>(compat);
  memset(a, 0, sizeof(*a));
  bool eth = linkIsEthernet();
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = eth ? IBV_MTU_1024 : IBV_MTU_4096;
  a->gid_tbl_len = gidTableLen();
  a->max_msg_sz = 1u << 30;
  a->pkey_tbl_len = 1;
  a->lid = deviceLid(emuCtx(ctx)->dev);
  a->sm_lid = eth ? 0 : 1;
  a->lmc = 0;
  a->active_width = 2;   // 4x
  a->active_speed = 32;  // EDR
  a->phys_state = 5;     // LinkUp
  a->link_layer = eth ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index < 0 || index >= gidTableLen()) {
    errno = EINVAL;
    return -1;
  }
  *gid = deviceGid(emuCtx(ctx)->dev, index);
  return 0;
}

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  auto* pd = new (std::nothrow) EmuPd{};
  if (!pd) return nullWith<ibv_pd>(ENOMEM);
  Fabric* f = emuCtx(ctx)->fabric;
  FabricLock lock(f);
  pd->pd.context = ctx;
  pd->id = f->nextPd++;
  pd->pd.handle = pd->id;
  return &pd->pd;
}

int ibv_dealloc_pd(ibv_pd* ibpd) {
  auto* pd = reinterpret_cast<EmuPd*>(ibpd);
  FabricLock lock(emuCtx(ibpd->context)->fabric);
  if (pd->users > 0) return setErr(EBUSY);
  delete pd;
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* ibpd, void* addr, size_t len, int access) {
  if (!accessOk(len, access)) return nullWith<ibv_mr>(EINVAL);
  if (!mapped(addr, len)) return nullWith<ibv_mr>(EFAULT);
  return registerMr(ibpd, addr, len, access);
}

// What the kernel checks of a dma-buf registration (ib_umem_dmabuf_get): the fd must be
// open (EBADF) and [offset, offset + len) inside the buffer (EINVAL); then it is an MR
// like any other, addressed by `iova` in work requests and rkeys.
ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* ibpd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
  const char* dmabuf = getenv("COLL_VERBS_EMU_DMABUF");
  if (dmabuf && strcmp(dmabuf, "0") == 0) return nullWith<ibv_mr>(EOPNOTSUPP);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return nullWith<ibv_mr>(EBADF);
  const auto fileSize = static_cast<uint64_t>(st.st_size);
  if (offset > fileSize || len > fileSize - offset) return nullWith<ibv_mr>(EINVAL);
  if (!accessOk(len, access)) return nullWith<ibv_mr>(EINVAL);
  void* addr = reinterpret_cast<void*>(static_cast<uintptr_t>(iova));
  if (!mapped(addr, len)) return nullWith<ibv_mr>(EFAULT);  // the emulation's limit (top of the file)
  return registerMr(ibpd, addr, len, access);
}

int ibv_dereg_mr(ibv_mr* ibmr) {
  auto* mr = reinterpret_cast<EmuMr*>(ibmr);
  FabricLock lock(emuCtx(ibmr->context)->fabric);
  emuCtx(ibmr->context)->fabric->mrs[mr->slot].inUse = 0;
  reinterpret_cast<EmuPd*>(ibmr->pd)->users--;
  delete mr;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cqContext, ibv_comp_channel* channel, int /*vector*/) {
  if (channel) return nullWith<ibv_cq>(EOPNOTSUPP);  // completion events are not emulated
  if (cqe < 1 || cqe > kMaxCqe) return nullWith<ibv_cq>(EINVAL);
  Fabric* f = emuCtx(ctx)->fabric;
  FabricLock lock(f);
  int i = freeSlot(f->cqs);
  if (i < 0) return nullWith<ibv_cq>(ENOMEM);
  auto* cq = new (std::nothrow) EmuCq{};
  if (!cq) return nullWith<ibv_cq>(ENOMEM);
  CqSlot& s = f->cqs[i];
  s.inUse = 1;
  s.owner = selfProc();
  s.capacity = cqe;  // exactly what was asked (mlx5 rounds up to a power of two)
  cq->slot = i;
  cq->cq.context = ctx;
  cq->cq.cq_context = cqContext;
  cq->cq.cqe = cqe;
  pthread_mutex_init(&cq->cq.mutex, nullptr);
  pthread_cond_init(&cq->cq.cond, nullptr);
  return &cq->cq;
}

int ibv_destroy_cq(ibv_cq* ibcq) {
  auto* cq = emuCq(ibcq);
  Fabric* f = emuCtx(ibcq->context)->fabric;
  FabricLock lock(f);
  if (f->cqs[cq->slot].users > 0) return setErr(EBUSY);
  f->cqs[cq->slot].inUse = 0;
  pthread_mutex_destroy(&ibcq->mutex);
  pthread_cond_destroy(&ibcq->cond);
  delete cq;
  return 0;
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_GENERAL_ERR: return "general error";
    default: return "unknown";
  }
}

const char* ibv_event_type_str(ibv_event_type event) {
  switch (event) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "local work queue catastrophic error";
    case IBV_EVENT_QP_REQ_ERR: return "invalid request local work queue error";
    case IBV_EVENT_QP_ACCESS_ERR: return "local access violation work queue error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_DEVICE_FATAL: return "local catastrophic error";
    default: return "unknown";
  }
}

}  // extern "C"

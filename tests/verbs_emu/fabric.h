// The verbs emulation's shared state: one POSIX shm segment per emulated fabric, mapped
// by every process (and every ibv_open_device) that uses it.
//
// Test-only (libcoll_verbs_emu.so, tests/CMakeLists.txt). It exports the ibv_* symbols
// src/transport/net/ib/verbs.cc loads, so the ib backend's protocol runs between
// processes of one machine without an RDMA device. COLL_VERBS_EMU_FABRIC names the
// segment (default "/coll_verbs_emu_<uid>"), so each test can use a private fabric and
// shm_unlink it afterwards.
//
// What lives here, and why in shared memory: whatever a peer process must see or change.
//   - QP slots: state, the connection's attributes (for the checks a responder makes) and
//     the receive queue, because a remote sender consumes posted receives.
//   - CQ slots: the completion ring, because a remote sender completes our receives.
//   - MR slots: keys, range, access and owner, because a remote sender (or reader) checks
//     our rkeys.
// A QP's send queue is process-local (emu.h): only its owner executes it.
//
// Concurrency: one robust, process-shared mutex (Fabric::lock) guards every slot; a
// process that dies holding it leaves it consistent (EOWNERDEAD is recovered). Objects are
// small and operations short, so one lock is simpler than finer ones and fast enough.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include <infiniband/verbs.h>

namespace verbs_emu {

constexpr int kMaxDevices = 2;
constexpr int kMaxQps = 512;
constexpr int kMaxCqs = 512;
constexpr int kMaxMrs = 1024;
constexpr int kMaxWr = 1024;  // per queue (send and receive); query_device's max_qp_wr
constexpr int kMaxSge = 4;
constexpr int kMaxCqe = 4096;
constexpr int kMaxInline = 256;
constexpr uint32_t kRkeyBit = 0x40000000;  // rkey = lkey | kRkeyBit (mlx5 gives them equal)

// A process, told apart from a later one that reuses its pid by its start time.
struct ProcId {
  int32_t pid = 0;
  uint64_t start = 0;
};
ProcId selfProc();
bool procAlive(const ProcId& p);  // false for exited and zombie processes

struct ShmSge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

struct ShmRecv {
  uint64_t wrId;
  int32_t numSge;
  ShmSge sge[kMaxSge];
};

struct QpSlot {
  uint32_t inUse;
  ProcId owner;
  int32_t dev;
  uint32_t qpn;
  uint32_t pd;             // fabric-wide PD id
  int32_t state;           // enum ibv_qp_state
  int32_t sendCq, recvCq;  // CQ slot indices
  int32_t access;          // qp_access_flags
  uint8_t port, timeout, retryCnt, rnrRetry, minRnrTimer, mtu;
  uint8_t maxDestRdAtomic;  // RDMA READs this responder serves at once (0: refuses them)
  // The connection (RTR): the peer this QP accepts packets from and sends to.
  uint32_t destQpn, rqPsn, sqPsn;
  uint16_t dlid;
  uint8_t isGlobal;
  uint8_t dgid[16];
  uint32_t maxRecv;
  uint32_t rqHead, rqTail;  // ring of posted receives, indices mod kMaxWr
  ShmRecv rq[kMaxWr];
};

struct CqSlot {
  uint32_t inUse;
  ProcId owner;
  int32_t capacity;
  int32_t users;     // QPs using it (destroy_cq gives EBUSY while any)
  uint32_t overrun;  // a completion was lost: the CQ is in error
  uint32_t head, tail;
  ibv_wc wc[kMaxCqe];
};

struct MrSlot {
  uint32_t inUse;
  ProcId owner;
  uint32_t pd;
  uint32_t lkey, rkey;
  uint64_t addr, length;
  int32_t access;
};

constexpr uint32_t kFabricMagic = 0x56454d55;  // "VEMU"

struct Fabric {
  std::atomic<uint32_t> magic;  // set last by the creator
  uint32_t size;                // sizeof(Fabric) of the creator: a stale segment of another layout is refused
  pthread_mutex_t lock;
  uint32_t nextQpn, nextPd, keyVariant;
  QpSlot qps[kMaxQps];
  CqSlot cqs[kMaxCqs];
  MrSlot mrs[kMaxMrs];
};

// Maps the fabric named by COLL_VERBS_EMU_FABRIC (creating it if needed); nullptr with
// errno set on failure.
Fabric* mapFabric();
void unmapFabric(Fabric* f);

// Holds Fabric::lock; recovers it from a process that died holding it (also when that
// death cost a waiter its wake-up: fabric.cc).
class FabricLock {
 public:
  explicit FabricLock(Fabric* f);
  ~FabricLock() { pthread_mutex_unlock(&f_->lock); }
  FabricLock(const FabricLock&) = delete;
  FabricLock& operator=(const FabricLock&) = delete;

 private:
  Fabric* f_;
};

// Slot lookups (lock held). nullptr when absent.
QpSlot* findQp(Fabric* f, uint32_t qpn);
MrSlot* findMrByLkey(Fabric* f, uint32_t lkey);
MrSlot* findMrByRkey(Fabric* f, uint32_t rkey);

// Appends a completion to a CQ (lock held). A full CQ overruns: the completion is lost and
// the CQ reports the error from then on; returns false then.
bool pushCompletion(Fabric* f, int cq, const ibv_wc& wc);
// Moves a QP to ERR and flushes its posted receives into its receive CQ (lock held).
void moveToError(Fabric* f, QpSlot* qp);

// The emulated devices' addressing: LID (InfiniBand) and GID table (RoCE).
bool linkIsEthernet();
uint16_t deviceLid(int dev);
int gidTableLen();
ibv_gid deviceGid(int dev, int index);

}  // namespace verbs_emu

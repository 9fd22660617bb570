// The shared segment of the verbs emulation (fabric.h): mapping, the lock, slot lookups,
// completions, and the devices' addressing.
#include "fabric.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace verbs_emu {

namespace {

// Field 22 of /proc/<pid>/stat (start time in clock ticks) and the state (field 3).
bool readStat(int pid, char* state, uint64_t* start) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');  // the command name may hold spaces
  if (!p) return false;
  unsigned long long st = 0;
  // After ") ": state, then fields 4..21 (18 of them), then starttime.
  if (sscanf(p + 2, "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %llu", state, &st) != 2)
    return false;
  *start = st;
  return true;
}

std::string fabricName() {
  const char* env = getenv("COLL_VERBS_EMU_FABRIC");
  if (env && *env) return env[0] == '/' ? env : std::string("/") + env;
  return "/coll_verbs_emu_" + std::to_string(getuid());
}

void initFabric(Fabric* f) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&f->lock, &a);
  pthread_mutexattr_destroy(&a);
  f->size = sizeof(Fabric);
  f->nextQpn = 0x100;
  f->nextPd = 1;
  f->keyVariant = 1;
  f->magic.store(kFabricMagic, std::memory_order_release);
}

// Waits (bounded) for the creator of the segment to size and initialise it.
Fabric* attach(int fd) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  struct stat st {};
  while (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) < sizeof(Fabric)) {
    if (std::chrono::steady_clock::now() > deadline) {
      errno = ETIMEDOUT;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void* p = mmap(nullptr, sizeof(Fabric), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  auto* f = static_cast<Fabric*>(p);
  while (f->magic.load(std::memory_order_acquire) != kFabricMagic) {
    if (std::chrono::steady_clock::now() > deadline) {
      munmap(p, sizeof(Fabric));
      errno = ETIMEDOUT;
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (f->size != sizeof(Fabric)) {  // a segment left by a build of another layout
    munmap(p, sizeof(Fabric));
    errno = EPROTO;
    return nullptr;
  }
  return f;
}

}  // namespace

ProcId selfProc() {
  static thread_local ProcId cached;
  int pid = getpid();
  if (cached.pid != pid) {  // first call, or after fork()
    char state = 0;
    cached.pid = pid;
    cached.start = 0;
    readStat(pid, &state, &cached.start);
  }
  return cached;
}

bool procAlive(const ProcId& p) {
  if (p.pid == getpid()) return true;
  char state = 0;
  uint64_t start = 0;
  if (!readStat(p.pid, &state, &start)) return false;
  return start == p.start && state != 'Z' && state != 'X';
}

Fabric* mapFabric() {
  std::string name = fabricName();
  int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd >= 0) {
    if (ftruncate(fd, sizeof(Fabric)) != 0) {
      int e = errno;
      close(fd);
      shm_unlink(name.c_str());
      errno = e;
      return nullptr;
    }
    void* p = mmap(nullptr, sizeof(Fabric), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return nullptr;
    initFabric(static_cast<Fabric*>(p));
    return static_cast<Fabric*>(p);
  }
  if (errno != EEXIST) return nullptr;
  fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return nullptr;
  Fabric* f = attach(fd);
  int e = errno;
  close(fd);
  errno = e;
  return f;
}

void unmapFabric(Fabric* f) { munmap(f, sizeof(Fabric)); }

// Waits in slices: a process killed while it held the lock has been seen (1 kill test in
// ~100, the lock word free, a waiter asleep in pthread_mutex_lock until the test's timeout)
// to leave a waiter without its wake-up. A slice that ends looks at the lock again.
// pthread_mutex_timedlock (a CLOCK_REALTIME deadline; a clock step only changes one
// slice's length), not pthread_mutex_clocklock: ThreadSanitizer (gcc 12) does not
// intercept the latter, so it saw every unlock as one of an unlocked mutex.
FabricLock::FabricLock(Fabric* f) : f_(f) {
  for (;;) {
    timespec until{};
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 20 * 1000 * 1000;
    if (until.tv_nsec >= 1000 * 1000 * 1000) {
      until.tv_nsec -= 1000 * 1000 * 1000;
      ++until.tv_sec;
    }
    const int rc = pthread_mutex_timedlock(&f->lock, &until);
    if (rc == EOWNERDEAD) {
      pthread_mutex_consistent(&f->lock);
#if defined(__SANITIZE_THREAD__)
      // Held now, but ThreadSanitizer's timedlock records only a return of 0: tell it.
      __tsan_mutex_pre_lock(&f->lock, __tsan_mutex_try_lock);
      __tsan_mutex_post_lock(&f->lock, __tsan_mutex_try_lock, 0);
#endif
    }
    if (rc != ETIMEDOUT) return;
  }
}

QpSlot* findQp(Fabric* f, uint32_t qpn) {
  for (QpSlot& q : f->qps)
    if (q.inUse && q.qpn == qpn) return &q;
  return nullptr;
}

// Keys are (slot index << 8 | variant); the variant changes at each registration, so a
// stale key of a deregistered MR does not name its slot's next MR.
MrSlot* findMrByLkey(Fabric* f, uint32_t lkey) {
  uint32_t idx = (lkey & ~kRkeyBit) >> 8;
  if (idx >= kMaxMrs || !f->mrs[idx].inUse || f->mrs[idx].lkey != lkey) return nullptr;
  return &f->mrs[idx];
}

MrSlot* findMrByRkey(Fabric* f, uint32_t rkey) {
  uint32_t idx = (rkey & ~kRkeyBit) >> 8;
  if (idx >= kMaxMrs || !f->mrs[idx].inUse || f->mrs[idx].rkey != rkey) return nullptr;
  return &f->mrs[idx];
}

bool pushCompletion(Fabric* f, int cq, const ibv_wc& wc) {
  CqSlot& c = f->cqs[cq];
  if (c.overrun || c.tail - c.head >= static_cast<uint32_t>(c.capacity)) {
    c.overrun = 1;
    return false;
  }
  c.wc[c.tail % kMaxCqe] = wc;
  c.tail++;
  return true;
}

void moveToError(Fabric* f, QpSlot* qp) {
  qp->state = IBV_QPS_ERR;
  for (; qp->rqHead != qp->rqTail; qp->rqHead++) {
    ibv_wc wc{};
    wc.wr_id = qp->rq[qp->rqHead % kMaxWr].wrId;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qp->qpn;
    pushCompletion(f, qp->recvCq, wc);
  }
}

bool linkIsEthernet() {
  const char* env = getenv("COLL_VERBS_EMU_LINK");
  return env && (strcmp(env, "eth") == 0 || strcmp(env, "roce") == 0);
}

uint16_t deviceLid(int dev) { return linkIsEthernet() ? 0 : static_cast<uint16_t>(dev + 1); }

int gidTableLen() { return linkIsEthernet() ? 2 : 1; }

// InfiniBand: the default GID prefix fe80:: and a port GUID. RoCE: index 0 the link-local
// GID of the port's MAC, index 1 an IPv4-mapped GID (RoCE v2) of 10.99.0.<dev+1>.
ibv_gid deviceGid(int dev, int index) {
  ibv_gid g{};
  if (index == 1) {
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    g.raw[12] = 10;
    g.raw[13] = 99;
    g.raw[15] = static_cast<uint8_t>(dev + 1);
    return g;
  }
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  g.raw[8] = 0x02;
  g.raw[13] = 0xe3;  // "emu" in the interface id
  g.raw[14] = 0x30;
  g.raw[15] = static_cast<uint8_t>(dev + 1);
  return g;
}

}  // namespace verbs_emu

#include "transport/shm/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <string_view>

#include "base/log.h"
#include "base/param.h"
#include "base/wait.h"
#include "cuda/gpu.h"

namespace coll {

// Owns the memory of one FIFO: an mmap of a shm segment or an aligned heap block.
class ShmRegion {
 public:
  ShmRegion(void* base, size_t bytes, bool mapped) : base_(base), bytes_(bytes), mapped_(mapped) {}
  ~ShmRegion() {
    gpu::unmapHost(base_);
    if (mapped_) munmap(base_, bytes_);
    else ::operator delete(base_, std::align_val_t(4096));
  }
  FifoView view(size_t slotBytes) const {
    return {static_cast<FifoCtrl*>(base_), static_cast<char*>(base_) + sizeof(FifoCtrl), slotBytes};
  }

 private:
  void* base_;
  size_t bytes_;
  bool mapped_;
};

namespace {

// In-process FIFOs waiting for their sender to pick them up.
std::mutex gRegistryMu;
std::map<uint64_t, std::shared_ptr<ShmRegion>> gRegistry;

class ShmSend : public SendConnector {
 public:
  ShmSend(int peer, std::shared_ptr<ShmRegion> r, size_t slotBytes, bool shared)
      : region_(std::move(r)), f_(region_->view(slotBytes)), shared_(shared) {
    slotBytes_ = slotBytes;
    peer_ = peer;
    kind_ = "shm";
  }
  bool ready() override {
    return tail() - f_.ctrl->head.load(std::memory_order_acquire) < static_cast<uint32_t>(kFifoSlots);
  }
  char* slot() override { return f_.slotAt(tail()); }
  void post(size_t bytes) override {
    const uint32_t t = tail() + 1;
    f_.ctrl->sizes[(t - 1) % kFifoSlots] = static_cast<uint32_t>(bytes);
    f_.ctrl->tail.store(t, std::memory_order_release);
    futexWakeIfWaiting(&f_.ctrl->tail, &f_.ctrl->tailWaiters, shared_);
  }
  WaitTarget waitTarget() override {
    WaitTarget t;
    t.word = &f_.ctrl->head;
    t.waiters = &f_.ctrl->headWaiters;
    t.seen = f_.ctrl->head.load(std::memory_order_relaxed);
    t.shared = shared_;
    return t;
  }
  const FifoView* fifo() const override { return &f_; }

 private:
  // The counter this side writes, read back from the shared control block (not cached:
  // a device kernel may have advanced it since, device/device_exec.h).
  uint32_t tail() const { return f_.ctrl->tail.load(std::memory_order_relaxed); }
  std::shared_ptr<ShmRegion> region_;
  FifoView f_;
  bool shared_;
};

class ShmRecv : public RecvConnector {
 public:
  ShmRecv(int peer, std::shared_ptr<ShmRegion> r, size_t slotBytes, bool shared)
      : region_(std::move(r)), f_(region_->view(slotBytes)), shared_(shared) {
    slotBytes_ = slotBytes;
    peer_ = peer;
    kind_ = "shm";
  }
  bool ready() override { return f_.ctrl->tail.load(std::memory_order_acquire) != head(); }
  const char* slot() override { return f_.slotAt(head()); }
  size_t size() override { return f_.ctrl->sizes[head() % kFifoSlots]; }
  void release() override {
    f_.ctrl->head.store(head() + 1, std::memory_order_release);
    futexWakeIfWaiting(&f_.ctrl->head, &f_.ctrl->headWaiters, shared_);
  }
  WaitTarget waitTarget() override {
    WaitTarget t;
    t.word = &f_.ctrl->tail;
    t.waiters = &f_.ctrl->tailWaiters;
    t.seen = head();
    t.shared = shared_;
    return t;
  }
  const FifoView* fifo() const override { return &f_; }

 private:
  uint32_t head() const { return f_.ctrl->head.load(std::memory_order_relaxed); }
  std::shared_ptr<ShmRegion> region_;
  FifoView f_;
  bool shared_;
};

class ShmPendingRecv : public PendingRecv {
 public:
  ShmPendingRecv(int peer, std::shared_ptr<ShmRegion> r, ShmHandle h) : peer_(peer), region_(std::move(r)), h_(h) {}
  ~ShmPendingRecv() override { cleanup(); }
  std::span<const std::byte> handle() const override { return handleBytes(h_); }
  // After the sender mapped the FIFO: unlinks the segment, yields the connector.
  Result<std::unique_ptr<RecvConnector>> finish() override {
    cleanup();
    return std::unique_ptr<RecvConnector>(new ShmRecv(peer_, region_, h_.slotBytes, h_.name[0] != 0));
  }

 private:
  void cleanup() {
    if (h_.name[0]) shm_unlink(h_.name);
    else {
      std::lock_guard<std::mutex> lock(gRegistryMu);
      gRegistry.erase(h_.localId);
    }
  }
  int peer_;
  std::shared_ptr<ShmRegion> region_;
  ShmHandle h_;
};

}  // namespace

uint64_t shmRandomId() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return rng();
}

int shmSweepDeadCreators(int64_t olderThanS) {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return 0;
  int removed = 0;
  while (dirent* e = readdir(dir)) {
    int pid = 0;
    char kind[8] = {};
    if (std::sscanf(e->d_name, "coll-%7[a-z]-%d-", kind, &pid) != 2 || pid <= 0) continue;
    if (std::strcmp(kind, "fifo") != 0 && std::strcmp(kind, "mbox") != 0) continue;
    struct stat st {};
    const std::string path = std::string("/dev/shm/") + e->d_name;
    // Only old ones: a creator in another pid namespace sharing this /dev/shm (containers
    // with the host's IPC) looks gone from here, but connects within seconds.
    if (stat(path.c_str(), &st) != 0 || st.st_uid != geteuid() || time(nullptr) - st.st_mtime < olderThanS) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    if (shm_unlink((std::string("/") + e->d_name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  if (removed)
    COLL_INFO(SHM, "removed %d shared-memory segment(s) left by processes that died while connecting", removed);
  return removed;
}

Result<void*> shmCreateSegment(char* name, size_t nameLen, const char* what, size_t bytes) {
  static std::once_flag swept;
  std::call_once(swept, [] { (void)shmSweepDeadCreators(); });
  std::snprintf(name, nameLen, "/coll-%s-%d-%016llx", what, getpid(), static_cast<unsigned long long>(shmRandomId()));
  int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return systemError(std::string("shm_open(") + name + ")", errno);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    close(fd);
    shm_unlink(name);
    return systemError(std::string("ftruncate(") + name + ", " + std::to_string(bytes) +
                           ") — is /dev/shm large enough?",
                       err);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    int err = errno;
    shm_unlink(name);
    return systemError(std::string("mmap(") + name + ")", err);
  }
  return p;
}

Status checkShmName(const char* name, size_t cap, const std::string& what) {
  const size_t len = strnlen(name, cap);
  if (len == cap)
    return remoteError(what + ": segment name not NUL-terminated within " + std::to_string(cap) + " bytes");
  const std::string_view v(name, len);
  if (!v.starts_with("/coll-") || v.find('/', 1) != std::string_view::npos)
    return remoteError(what + ": segment name \"" + std::string(v) + "\" is not one this library makes");
  return okStatus();
}

ShmUnlinkGuard::~ShmUnlinkGuard() {
  if (name[0]) shm_unlink(name);
}

Result<void*> shmMapSegment(const char* name, size_t bytes, const std::string& what) {
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0) return systemError(std::string("shm_open(") + name + ") of " + what, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) {
    close(fd);
    return remoteError(std::string("segment ") + name + " of " + what + " has " + std::to_string(st.st_size) +
                       " bytes, expected " + std::to_string(bytes));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return systemError(std::string("mmap(") + name + ") of " + what, errno);
  return p;
}

Result<std::unique_ptr<PendingRecv>> shmSetupRecv(int peer, size_t slotBytes, bool sameProcess) {
  ShmHandle h{};
  h.pid = getpid();
  h.slotBytes = slotBytes;
  size_t bytes = fifoBytes(slotBytes);
  std::shared_ptr<ShmRegion> region;
  if (sameProcess) {
    void* p = ::operator new(bytes, std::align_val_t(4096));
    new (p) FifoCtrl();
    region = std::make_shared<ShmRegion>(p, bytes, false);
    h.localId = shmRandomId();
    std::lock_guard<std::mutex> lock(gRegistryMu);
    gRegistry[h.localId] = region;
  } else {
    COLL_ASSIGN(void* p, shmCreateSegment(h.name, sizeof(h.name), "fifo", bytes));
    new (p) FifoCtrl();
    region = std::make_shared<ShmRegion>(p, bytes, true);
  }
  COLL_TRACE(SHM, "recv FIFO from rank %d: %s, %zu-byte slots", peer, sameProcess ? "in-process" : h.name, slotBytes);
  return std::unique_ptr<PendingRecv>(new ShmPendingRecv(peer, std::move(region), h));
}

Result<std::unique_ptr<SendConnector>> shmConnectSend(int peer, std::span<const std::byte> handle) {
  COLL_ASSIGN(const ShmHandle h, handleAs<ShmHandle>(handle, "shm"));
  const std::string who = "rank " + std::to_string(peer) + "'s shm handle";
  if (h.slotBytes == 0 || h.slotBytes > kMaxShmSlotBytes)
    return remoteError(who + ": slots of " + std::to_string(h.slotBytes) + " bytes, expected 1.." +
                       std::to_string(kMaxShmSlotBytes));
  size_t bytes = fifoBytes(h.slotBytes);
  if (!h.name[0]) {  // in-process: no segment
    if (h.pid != getpid())
      return internalError("in-process shm handle from another process (pid " + std::to_string(h.pid) + ")");
    std::lock_guard<std::mutex> lock(gRegistryMu);
    auto it = gRegistry.find(h.localId);
    if (it == gRegistry.end()) return internalError("in-process FIFO vanished before connect");
    return std::unique_ptr<SendConnector>(new ShmSend(peer, it->second, h.slotBytes, false));
  }
  COLL_CHECK(checkShmName(h.name, sizeof(h.name), who));
  COLL_ASSIGN(void* p, shmMapSegment(h.name, bytes, "rank " + std::to_string(peer) + "'s FIFO"));
  auto region = std::make_shared<ShmRegion>(p, bytes, true);
  return std::unique_ptr<SendConnector>(new ShmSend(peer, std::move(region), h.slotBytes, true));
}

namespace {

bool canConnect(const PeerInfo& self, const PeerInfo& peer, const TransportOptions&) {
  if (param(IntParam::SHM_DISABLE) != 0) return false;
  return sameHost(self, peer);
}

Result<std::unique_ptr<PendingRecv>> setupRecv(const Link& l, size_t slotBytes) {
  // Same host already established (canConnect).
  return shmSetupRecv(l.peerRank, slotBytes, l.peer.pid == l.self.pid);
}

Result<std::unique_ptr<SendConnector>> connectSend(const Link& l, std::span<const std::byte> handle) {
  return shmConnectSend(l.peerRank, handle);
}

}  // namespace

const Transport kShmTransport = {
    .name = "shm", .canConnect = canConnect, .setupRecv = setupRecv, .connectSend = connectSend};

}  // namespace coll

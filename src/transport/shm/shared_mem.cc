#include "transport/shm/shared_mem.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace coll {

namespace {

struct Allocation {
  size_t bytes;
  int fd;
};

// This process's shareable allocations by start address.
struct Allocations {
  std::mutex mu;
  std::map<uintptr_t, Allocation> live;
};
Allocations& allocations() {
  static auto* a = new Allocations();  // never freed: used until exit
  return *a;
}

constexpr size_t kPage = 4096;

}  // namespace

Result<void*> sharedAlloc(size_t bytes) {
  if (bytes == 0 || bytes > SIZE_MAX - kPage)
    return invalidArgument("size " + std::to_string(bytes) + " is not allocatable");
  const size_t len = (bytes + kPage - 1) / kPage * kPage;
  const int fd = memfd_create("collectives-buffer", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(len)) == 0) {
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      Allocations& a = allocations();
      std::lock_guard<std::mutex> lock(a.mu);
      a.live[reinterpret_cast<uintptr_t>(p)] = {len, fd};
      return p;
    }
  }
  if (fd >= 0) close(fd);
  // No memory file (an old kernel, a seccomp filter, or tmpfs full): heap memory, which
  // windows read by the other routes.
  void* p = std::aligned_alloc(kPage, len);
  if (!p) return Status(Code::kSystem, "out of host memory for " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, len);
  return p;
}

bool sharedFree(void* p) {
  Allocation gone{};
  {
    Allocations& a = allocations();
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.live.find(reinterpret_cast<uintptr_t>(p));
    if (it == a.live.end()) return false;
    gone = it->second;
    a.live.erase(it);
  }
  munmap(p, gone.bytes);
  close(gone.fd);
  return true;
}

std::optional<SharedSpan> sharedSpanOf(const void* p, size_t bytes) {
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.live.upper_bound(b);
  if (it == a.live.begin()) return std::nullopt;
  --it;
  const uint64_t off = b - it->first;
  if (off > it->second.bytes || bytes > it->second.bytes - off) return std::nullopt;
  return SharedSpan{it->second.fd, off, it->second.bytes};
}

Result<std::shared_ptr<const PeerMapping>> PeerMapping::map(pid_t pid, int fd, size_t allocBytes) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  const int f = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f < 0) return systemError("open(" + path + ")", errno);
  struct stat st {};
  if (fstat(f, &st) != 0 || static_cast<uint64_t>(st.st_size) < allocBytes) {
    close(f);
    return invalidUsage(path + " holds fewer than the " + std::to_string(allocBytes) + " bytes announced");
  }
  void* p = mmap(nullptr, allocBytes, PROT_READ, MAP_SHARED, f, 0);
  const int err = errno;
  close(f);
  if (p == MAP_FAILED) return systemError("mmap(" + path + ")", err);
  return std::shared_ptr<const PeerMapping>(new PeerMapping(static_cast<const char*>(p), allocBytes));
}

PeerMapping::~PeerMapping() { munmap(const_cast<char*>(base_), bytes_); }

void SharedWindows::add(std::shared_ptr<const SharedWindow> w) {
  std::lock_guard<std::mutex> lock(mu_);
  windows_.push_back(std::move(w));
  count_.store(windows_.size(), std::memory_order_relaxed);
}

void SharedWindows::remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(windows_, [id](const auto& w) { return w->id == id; });
  count_.store(windows_.size(), std::memory_order_relaxed);
}

uint64_t SharedWindows::idOf(int myRank, const void* p, size_t bytes) const {
  const uint64_t b = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& w : windows_) {
    if (w->parts[static_cast<size_t>(myRank)].find(b, bytes)) return w->id;
  }
  return 0;
}

std::shared_ptr<const SharedWindow> SharedWindows::find(uint64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& w : windows_)
    if (w->id == id) return w;
  return nullptr;
}

}  // namespace coll

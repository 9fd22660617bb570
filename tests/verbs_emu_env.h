// For tests of the verbs layer and the ib backend: the verbs emulation
// (tests/verbs_emu) as the verbs library on a fabric of the case's own, and `must`, which
// turns a failed Status/Result into an exception (Catch2 reports it in the test
// process; a forked child sends its text).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "base/status.h"

namespace coll::test {

class EmuEnv {
 public:
  // `link`: "ib" (LIDs) or "eth" (RoCE: GIDs, the GRH required). The ib backend's side
  // channel runs on loopback.
  explicit EmuEnv(const char* link = "ib") {
    static int counter = 0;
    name_ = "/coll_verbs_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    setenv("COLL_VERBS_EMU_FABRIC", name_.c_str(), 1);
    setenv("COLL_VERBS_EMU_DEVICES", "emu0,emu1", 1);
    setenv("COLL_VERBS_EMU_LINK", link, 1);
    setenv("COLL_IB_VERBS_LIB", COLL_VERBS_EMU_PATH, 1);
    setenv("COLL_SOCKET_IFNAME", "lo", 1);
  }
  ~EmuEnv() {
    shm_unlink(name_.c_str());
    for (const char* v : {"COLL_VERBS_EMU_FABRIC", "COLL_VERBS_EMU_DEVICES", "COLL_VERBS_EMU_LINK", "COLL_IB_VERBS_LIB",
                          "COLL_SOCKET_IFNAME", "COLL_IB_QPS_PER_CONNECTION", "COLL_IB_HCA", "COLL_IB_TIMEOUT",
                          "COLL_VERBS_EMU_DMABUF"})
      unsetenv(v);
  }
  EmuEnv(const EmuEnv&) = delete;
  EmuEnv& operator=(const EmuEnv&) = delete;

 private:
  std::string name_;
};

// A memfd standing for a GPU buffer's dma-buf (the emulation takes any file for one):
// `bytes` long, with [offset, offset + mapped) mapped at `p`, the iova it registers at.
class MemFd {
 public:
  MemFd(size_t bytes, size_t offset, size_t mapped) : mapped_(mapped) {
    fd_ = memfd_create("coll-test-dmabuf", MFD_CLOEXEC);
    if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(bytes)) != 0) throw std::runtime_error("memfd_create/ftruncate");
    void* m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(offset));
    if (m == MAP_FAILED) throw std::runtime_error("mmap of the memfd");
    p_ = static_cast<char*>(m);
  }
  ~MemFd() {
    unmap();
    close(fd_);
  }
  MemFd(const MemFd&) = delete;
  MemFd& operator=(const MemFd&) = delete;
  int fd() const { return fd_; }
  char* p() const { return p_; }
  // Unmaps the range now (p() keeps its address, a registration of it stays): memory a
  // NIC could still reach through the pinned pages and the emulation cannot.
  void unmap() {
    if (mapped_) munmap(p_, mapped_);
    mapped_ = 0;
  }

 private:
  int fd_ = -1;
  char* p_ = nullptr;
  size_t mapped_;
};

template <typename T>
T must(Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return r.take();
}
inline void must(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.message());
}

}  // namespace coll::test

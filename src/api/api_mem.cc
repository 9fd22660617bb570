// Entry points for memory: allocation for buffers (collMemAlloc/Free), registration
// (collCommRegister/Deregister) and windows (collCommWindowRegister/Deregister).
//
// Registration records a range on the communicator; its handle is the record's address,
// looked up before use, so a stale or foreign handle is an error and never dereferenced.
// What a registration buys: point-to-point sends from registered memory leave from the
// caller's buffer over the network instead of through a FIFO copy (executor.cc
// inPlaceSource); collectives already do so wherever their schedule allows.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/guard.h"
#include "bootstrap/bootstrap.h"
#include "comm/one_sided.h"
#include "transport/shm/shared_mem.h"

using coll::Status;
using namespace coll::api;

namespace {

// What collMemAlloc handed out, so collMemFree refuses anything else.
struct Allocations {
  std::mutex mu;
  std::map<void*, bool> live;  // pointer -> device memory
};
Allocations& allocations() {
  static auto* a = new Allocations();  // never freed: used until exit
  return *a;
}

// Whether this thread would get a device-bound rank (collCommInitRank's rule).
bool deviceThread() {
#if COLL_HAVE_CUDA
  const int dev = coll::gpu::currentDevice();
  return dev >= 0 && coll::gpu::started(dev);
#else
  return false;
#endif
}

// Handles: numbers from a process-wide counter, never 0 and never reused.
uintptr_t nextHandle() {
  static std::atomic<uintptr_t> next{0x1000};
  return next.fetch_add(0x10);
}

// The checks of a registration that need no peer.
std::string checkRange(const void* buff, size_t size) {
  if (!buff) return "buff is NULL";
  if (size == 0) return "size is 0";
  if (reinterpret_cast<uintptr_t>(buff) + size < reinterpret_cast<uintptr_t>(buff))
    return "buff " + ptrStr(buff) + " + size " + std::to_string(size) + " wraps around";
  return "";
}

uintptr_t addRegistration(collComm* comm, void* buff, size_t size, bool window) {
  const uintptr_t h = nextHandle();
  comm->registrations.emplace(h, coll::Registration{static_cast<const char*>(buff), size, window,
                                                    window ? comm->windowsMade++ : 0});
  return h;
}

// The window registration of handle win, or an error naming it.
coll::Result<const coll::Registration*> windowOf(const collComm* comm, collWindow_t win, const char* arg) {
  auto it = comm->registrations.find(reinterpret_cast<uintptr_t>(win));
  if (it == comm->registrations.end() || !it->second.window)
    return coll::invalidArgument(std::string(arg) + " " + ptrStr(win) +
                                 " is not a window of this communicator (already deregistered, or made elsewhere)");
  return &it->second;
}

// The checks every one-sided call shares.
Status checkOneSided(const collComm* comm, int peer, int sigIdx, int ctx, unsigned flags) {
  if (comm->dev.cudaDev >= 0)
    return coll::invalidUsage("one-sided operations are implemented for host-memory ranks only; rank " +
                              std::to_string(comm->rank) + " is bound to CUDA device " +
                              std::to_string(comm->dev.cudaDev));
  COLL_CHECK(checkRank("peer", peer, comm->nranks));
  if (sigIdx != 0) return coll::invalidArgument("sigIdx " + std::to_string(sigIdx) + ": only signal index 0 exists");
  if (ctx != 0) return coll::invalidArgument("ctx " + std::to_string(ctx) + ": only context 0 exists");
  if (flags != 0) return coll::invalidArgument("flags " + std::to_string(flags) + " must be 0");
  return coll::okStatus();
}

// A symmetric window's agreement; the shared window it made is recorded on registration
// h, or let go where h is gone meanwhile (deregistered inside the group that made it).
Status agreeWindow(collComm* comm, uintptr_t h, const void* buff, size_t size, const std::string& bad) {
  COLL_ASSIGN(const uint64_t shared, coll::commAgreeWindow(comm, buff, size, bad));
  if (shared == 0) return coll::okStatus();
  auto it = comm->registrations.find(h);
  if (it == comm->registrations.end()) comm->oneShot.windows.remove(shared);
  else it->second.sharedId = shared;
  return coll::okStatus();
}

Status dropRegistration(collComm* comm, const void* handle, bool window, const char* arg) {
  auto it = comm->registrations.find(reinterpret_cast<uintptr_t>(handle));
  if (it == comm->registrations.end() || it->second.window != window)
    return coll::invalidArgument(std::string(arg) + " " + ptrStr(handle) + " is not a " +
                                 (window ? "window" : "registration") +
                                 " of this communicator (already deregistered, or made elsewhere)");
  if (it->second.sharedId) comm->oneShot.windows.remove(it->second.sharedId);
  comm->registrations.erase(it);
  return coll::okStatus();
}

}  // namespace

namespace coll::api {

bool isRegistered(const collComm* comm, const void* p, size_t bytes) {
  if (comm->registrations.empty() || !p || bytes == 0) return false;
  const char* b = static_cast<const char*>(p);
  for (const auto& [handle, r] : comm->registrations)
    if (b >= r.base && b + bytes <= r.base + r.bytes) return true;
  return false;
}

}  // namespace coll::api

#pragma GCC visibility push(default)
extern "C" {

collResult_t collMemAlloc(void** ptr, size_t size) {
  return guarded("collMemAlloc", nullptr, [&]() -> Status {
    if (!ptr) return coll::invalidArgument("ptr is NULL");
    *ptr = nullptr;
    if (size == 0) return coll::okStatus();
    const bool device = deviceThread();
    void* p = nullptr;
#if COLL_HAVE_CUDA
    if (device) {
      COLL_ASSIGN(p, coll::gpu::allocate(size));
    }
#endif
    if (!device) {
      if (size > SIZE_MAX - 4096) return coll::invalidArgument("size " + std::to_string(size) + " is too large");
      // Memory the other processes of this host can map (shared_mem.h), so symmetric
      // windows on it are read with plain loads.
      COLL_ASSIGN(p, coll::sharedAlloc(size));
    }
    Allocations& a = allocations();
    std::lock_guard<std::mutex> lock(a.mu);
    a.live[p] = device;
    *ptr = p;
    return coll::okStatus();
  });
}

collResult_t collMemFree(void* ptr) {
  return guarded("collMemFree", nullptr, [&]() -> Status {
    if (!ptr) return coll::okStatus();  // as free(NULL)
    [[maybe_unused]] bool device = false;
    {
      Allocations& a = allocations();
      std::lock_guard<std::mutex> lock(a.mu);
      auto it = a.live.find(ptr);
      if (it == a.live.end())
        return coll::invalidArgument("ptr " + ptrStr(ptr) + " was not returned by collMemAlloc (or is freed already)");
      device = it->second;
      a.live.erase(it);
    }
#if COLL_HAVE_CUDA
    if (device) return coll::gpu::release(ptr);
#endif
    if (!coll::sharedFree(ptr)) std::free(ptr);
    return coll::okStatus();
  });
}

collResult_t collCommRegister(const collComm_t comm, void* buff, size_t size, void** handle) {
  CommUse use(comm);
  return guarded("collCommRegister", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (!handle) return coll::invalidArgument("handle is NULL");
    const std::string bad = checkRange(buff, size);
    if (!bad.empty()) return coll::invalidArgument(bad);
    *handle = reinterpret_cast<void*>(addRegistration(comm, buff, size, false));
    return coll::okStatus();
  });
}

collResult_t collCommDeregister(const collComm_t comm, void* handle) {
  CommUse use(comm);
  return guarded("collCommDeregister", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    return dropRegistration(comm, handle, false, "handle");
  });
}

collResult_t collCommWindowRegister(collComm_t comm, void* buff, size_t size, collWindow_t* win, int winFlags) {
  CommUse use(comm);
  return guarded("collCommWindowRegister", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (!win) return coll::invalidArgument("win is NULL");
    *win = nullptr;
    constexpr int kKnown = COLL_WIN_COLL_SYMMETRIC | COLL_WIN_STRICT_ORDERING | COLL_WIN_GIN_ONLY |
                           COLL_WIN_CFT_COUNTED;
    if ((winFlags & ~kKnown) != 0)
      return coll::invalidArgument("winFlags " + std::to_string(winFlags) +
                                   " is not a mask of COLL_WIN_COLL_SYMMETRIC (1), STRICT_ORDERING (2), GIN_ONLY (4) "
                                   "and CFT_COUNTED (8)");
    std::string bad = checkRange(buff, size);
    if (bad.empty() && reinterpret_cast<uintptr_t>(buff) % COLL_WIN_REQUIRED_ALIGNMENT != 0)
      bad = "buff " + ptrStr(buff) + " is not aligned to COLL_WIN_REQUIRED_ALIGNMENT (" +
            std::to_string(COLL_WIN_REQUIRED_ALIGNMENT) + " bytes; collMemAlloc's are)";
    if ((winFlags & COLL_WIN_COLL_SYMMETRIC) == 0) {
      if (!bad.empty()) return coll::invalidArgument(bad);
      *win = reinterpret_cast<collWindow_t>(addRegistration(comm, buff, size, true));
      return coll::okStatus();
    }
    if (coll::inGroup()) {
      // Collective, and one thread may register every rank's window in a group (nccl-tests
      // -R 2): the ranks agree at the outermost collGroupEnd, which fails if they do not.
      const uintptr_t h = bad.empty() ? addRegistration(comm, buff, size, true) : 0;
      deferOnComm(
          comm, [comm, h, buff, size, bad] { return agreeWindow(comm, h, buff, size, bad); }, [] {});
      if (!bad.empty()) return coll::invalidArgument(bad);  // the other ranks fail at the group end
      *win = reinterpret_cast<collWindow_t>(h);
      return coll::okStatus();
    }
    // Every rank takes part even when its own checks failed, so all fail alike.
    COLL_ASSIGN(const uint64_t shared, coll::commAgreeWindow(comm, buff, size, bad));
    const uintptr_t h = addRegistration(comm, buff, size, true);
    comm->registrations.at(h).sharedId = shared;
    *win = reinterpret_cast<collWindow_t>(h);
    return coll::okStatus();
  });
}

collResult_t collWinGetUserPtr(collComm_t comm, collWindow_t win, void** outUserPtr) {
  CommUse use(comm);
  return guarded("collWinGetUserPtr", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!outUserPtr) return coll::invalidArgument("outUserPtr is NULL");
    *outUserPtr = nullptr;
    COLL_ASSIGN(const coll::Registration* w, windowOf(comm, win, "win"));
    *outUserPtr = const_cast<char*>(w->base);
    return coll::okStatus();
  });
}

collResult_t collCommWindowDeregister(collComm_t comm, collWindow_t win) {
  CommUse use(comm);
  return guarded("collCommWindowDeregister", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    return dropRegistration(comm, win, true, "win");
  });
}

collResult_t collPutSignal(const void* localbuff, size_t count, collDataType_t datatype, int peer, collWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, collComm_t comm,
                           collStream_t) {
  CommUse use(comm);
  return guarded("collPutSignal", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    COLL_CHECK(checkOneSided(comm, peer, sigIdx, ctx, flags));
    const int dtype = rawArg(datatype);
    COLL_CHECK(checkType(dtype));
    COLL_CHECK(checkBytes("count", count, 1, datatype));
    if (!localbuff && count > 0) return coll::invalidArgument("localbuff is NULL with count " + std::to_string(count));
    COLL_ASSIGN(const coll::Registration* w, windowOf(comm, peerWin, "peerWin"));
    const size_t bytes = count * coll::dataTypeSize(datatype);
    // Windows of one order have one size on every rank where registered symmetric; the
    // target checks the others.
    if (peerWinOffset > w->bytes || bytes > w->bytes - peerWinOffset)
      return coll::invalidArgument("peerWinOffset " + std::to_string(peerWinOffset) + " + " + std::to_string(bytes) +
                                   " bytes goes past the window's " + std::to_string(w->bytes) + " bytes");
    return coll::putSignal(comm, localbuff, bytes, peer, w->ordinal, peerWinOffset, sigIdx);
  });
}

collResult_t collSignal(int peer, int sigIdx, int ctx, unsigned int flags, collComm_t comm, collStream_t) {
  CommUse use(comm);
  return guarded("collSignal", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    COLL_CHECK(checkOneSided(comm, peer, sigIdx, ctx, flags));
    return coll::putSignal(comm, nullptr, 0, peer, 0, 0, sigIdx);
  });
}

collResult_t collWaitSignal(int nDesc, collWaitSignalDesc_t* signalDescs, collComm_t comm, collStream_t) {
  CommUse use(comm);
  return guarded("collWaitSignal", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (nDesc <= 0) return coll::invalidArgument("nDesc " + std::to_string(nDesc) + " must be positive");
    if (!signalDescs) return coll::invalidArgument("signalDescs is NULL");
    std::vector<coll::SignalWait> waits;
    for (int i = 0; i < nDesc; ++i) {
      const collWaitSignalDesc_t& d = signalDescs[i];
      const std::string at = "signalDescs[" + std::to_string(i) + "].";
      COLL_CHECK(checkOneSided(comm, d.peer, d.sigIdx, d.ctx, 0).prefix(at));
      if (d.opCnt <= 0) return coll::invalidArgument(at + "opCnt " + std::to_string(d.opCnt) + " must be positive");
      waits.push_back({d.opCnt, d.peer, d.sigIdx, d.ctx});
    }
    return coll::waitSignals(comm, waits);
  });
}

}  // extern "C"
#pragma GCC visibility pop

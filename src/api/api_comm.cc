// Entry points that make and unmake communicators from options: init with a config
// (blocking or not), scalable init, shrink, revoke; and the process-wide calls that go
// with them (debug reset, CUDA device count).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api/guard.h"
#include "api/options.h"
#include "bootstrap/bootstrap.h"

using coll::Status;
using namespace coll::api;

namespace {

Status checkId(const collUniqueId& commId, const char* arg, coll::UniqueIdData* id) {
  Status st = coll::parseUniqueId(commId.internal, sizeof(commId.internal), id);
  if (!st.ok()) return st.prefix(std::string(arg) + ": ");
  return coll::okStatus();
}

// NCCL's rule: the rank is bound to the calling thread's current device, once the
// application has started CUDA there (cudaSetDevice, an allocation). A process that never
// used CUDA, or has no usable device, gets a host-memory rank (-1): CPU jobs on GPU
// machines pay no CUDA context, GPU memory or pinned memory for a device path they do
// not use.
int deviceOfThisThread(int rank) {
  int dev = -1;
#if COLL_HAVE_CUDA
  dev = coll::gpu::currentDevice();
  if (dev >= 0 && !coll::gpu::started(dev)) {
    COLL_INFO(INIT,
              "rank %d: host-memory rank: this process has not used CUDA device %d (call cudaSetDevice "
              "before collCommInitRank to bind it)",
              rank, dev);
    dev = -1;
  }
#else
  (void)rank;
#endif
  return dev;
}

// Init from a checked id and options: blocking, or returning collInProgress with the
// communicator joining in the background.
Status initRank(collComm_t* comm, int nranks, const coll::UniqueIdData& id, int rank, const collConfig_t* config) {
  COLL_ASSIGN(coll::CommOptions opts, optionsFromConfig(config, nullptr));
  const int dev = deviceOfThisThread(rank);
  if (!opts.blocking) {
    *comm = coll::commInitAsync(id, nranks, rank, dev, opts);
    return Status(coll::Code::kInProgress, "");
  }
  if (coll::inGroup()) {
    // One thread may init several ranks inside a group: they join together at its end.
    *comm = coll::commInitAsync(id, nranks, rank, dev, opts);
    coll::groupDeferInit(*comm);
    return coll::okStatus();
  }
  COLL_ASSIGN(*comm, coll::commInit(id, nranks, rank, dev, opts));
  return coll::okStatus();
}

Status checkInitArgs(collComm_t* comm, int nranks, int rank) {
  if (!comm) return coll::invalidArgument("comm is NULL");
  *comm = nullptr;
  if (nranks < 1) return coll::invalidArgument("nranks " + std::to_string(nranks) + " is < 1");
  if (nranks > coll::kMaxRanks)
    return coll::invalidArgument("nranks " + std::to_string(nranks) + " is above the limit " +
                                 std::to_string(coll::kMaxRanks));
  return checkRank("rank", rank, nranks);
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

collResult_t collCommInitRankConfig(collComm_t* comm, int nranks, collUniqueId commId, int rank, collConfig_t* config) {
  return guarded("collCommInitRankConfig", nullptr, [&]() -> Status {
    COLL_CHECK(checkInitArgs(comm, nranks, rank));
    coll::UniqueIdData id;
    COLL_CHECK(checkId(commId, "commId", &id));
    return initRank(comm, nranks, id, rank, config);
  });
}

collResult_t collCommInitRankScalable(collComm_t* newcomm, int nranks, int myrank, int nId, collUniqueId* commIds,
                                      collConfig_t* config) {
  return guarded("collCommInitRankScalable", nullptr, [&]() -> Status {
    COLL_CHECK(checkInitArgs(newcomm, nranks, myrank));
    if (!commIds) return coll::invalidArgument("commIds is NULL");
    if (nId < 1 || nId > nranks)
      return coll::invalidArgument("nId " + std::to_string(nId) + " is outside 1..nranks (" + std::to_string(nranks) +
                                   ")");
    coll::UniqueIdData id, other;
    for (int i = nId - 1; i >= 0; --i)
      COLL_CHECK(checkId(commIds[i], ("commIds[" + std::to_string(i) + "]").c_str(), i == 0 ? &id : &other));
    return initRank(newcomm, nranks, id, myrank, config);
  });
}

collResult_t collCommShrink(collComm_t comm, int* excludeRanksList, int excludeRanksCount, collComm_t* newcomm,
                            collConfig_t* config, int shrinkFlags) {
  CommUse use(comm);
  return guarded("collCommShrink", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!newcomm) return coll::invalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    if (shrinkFlags != COLL_SHRINK_DEFAULT && shrinkFlags != COLL_SHRINK_ABORT)
      return coll::invalidArgument("shrinkFlags " + std::to_string(shrinkFlags) +
                                   " is not COLL_SHRINK_DEFAULT (0) or COLL_SHRINK_ABORT (1)");
    if (excludeRanksCount < 0 || excludeRanksCount >= comm->nranks)
      return coll::invalidArgument("excludeRanksCount " + std::to_string(excludeRanksCount) +
                                   " must leave at least one of the " + std::to_string(comm->nranks) + " ranks");
    if (excludeRanksCount > 0 && !excludeRanksList)
      return coll::invalidArgument("excludeRanksList is NULL with excludeRanksCount " +
                                   std::to_string(excludeRanksCount));
    std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    for (size_t i = 0; i < exclude.size(); ++i) {
      const std::string arg = "excludeRanksList[" + std::to_string(i) + "]";
      COLL_CHECK(checkRank(arg.c_str(), exclude[i], comm->nranks));
      if (std::find(exclude.begin(), exclude.begin() + static_cast<long>(i), exclude[i]) !=
          exclude.begin() + static_cast<long>(i))
        return coll::invalidArgument(arg + " " + std::to_string(exclude[i]) + " is listed twice");
      if (exclude[i] == comm->rank)
        return coll::invalidUsage(arg + " " + std::to_string(exclude[i]) +
                                  " is the calling rank: only the ranks that stay call collCommShrink");
    }
    const int state = comm->initState.load(std::memory_order_acquire);
    if (state != collSuccess)
      return coll::invalidUsage("comm did not complete its init (state " + std::to_string(state) +
                                "): nothing to shrink");
    COLL_ASSIGN(coll::CommOptions opts, optionsFromConfig(config, &comm->options));
    if (shrinkFlags == COLL_SHRINK_ABORT) {
      comm->abort->set(coll::Code::kInvalidUsage, "communicator revoked by collCommShrink(COLL_SHRINK_ABORT) on rank " +
                                                      std::to_string(comm->rank));
      coll::deviceQuiesce(comm->dev, true);
    }
    if (coll::inGroup()) {  // as collCommSplit in a group
      deferToGroupEnd(comm, newcomm, [comm, exclude, opts] { return coll::commShrink(comm, exclude, opts); });
      return coll::okStatus();
    }
    COLL_ASSIGN(*newcomm, coll::commShrink(comm, exclude, opts));
    return coll::okStatus();
  });
}

collResult_t collCommRevoke(collComm_t comm, int revokeFlags) {
  CommUse use(comm);
  return guarded("collCommRevoke", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (revokeFlags != COLL_REVOKE_DEFAULT)
      return coll::invalidArgument("revokeFlags " + std::to_string(revokeFlags) + " is not COLL_REVOKE_DEFAULT (0)");
    // Every wait watches the abort state: operations in flight end, later ones are refused.
    // A communicator that failed before keeps its error; one revoked while healthy reports
    // collSuccess from collCommGetAsyncError once quiet, as NCCL's does.
    // Marked revoked before the flag rises, so a watchdog never sees the revoke as an
    // error; if another failure won the race to raise it, that failure stands.
    const bool already = comm->revoked.exchange(true);
    if (!comm->abort->set(coll::Code::kInvalidUsage,
                          "communicator revoked by collCommRevoke on rank " + std::to_string(comm->rank)) &&
        !already)
      comm->revoked.store(false);
    coll::deviceQuiesce(comm->dev, true);
    return coll::okStatus();
  });
}

collResult_t collCommSetTimeout(collComm_t comm, double seconds) {
  CommUse use(comm);
  return guarded("collCommSetTimeout", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!std::isfinite(seconds) || seconds < 0)
      return coll::invalidArgument("seconds " + std::to_string(seconds) + " is not a finite number >= 0");
    comm->opTimeoutS.store(seconds, std::memory_order_relaxed);
    return coll::okStatus();
  });
}

void collResetDebugInit(void) {
  try {
    coll::logReset();
  } catch (...) {
  }
}

collResult_t collCudaDeviceCount(int* count) {
  return guarded("collCudaDeviceCount", nullptr, [&]() -> Status {
    if (!count) return coll::invalidArgument("count is NULL");
    *count = 0;
#if COLL_HAVE_CUDA
    std::string why;
    if (coll::gpu::usable(&why)) *count = coll::gpu::deviceCount();
#endif
    return coll::okStatus();
  });
}

}  // extern "C"
#pragma GCC visibility pop

// Entry points that make and unmake communicators from options: init with a config
// (blocking or not), scalable init, shrink, grow, revoke; and the process-wide calls that go
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

collResult_t collCommGetUniqueId(collComm_t comm, collUniqueId* uniqueId) {
  CommUse use(comm);
  return guarded("collCommGetUniqueId", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (!uniqueId) return coll::invalidArgument("uniqueId is NULL");
    COLL_ASSIGN(coll::UniqueIdData id, coll::commGrowId(comm));
    std::memset(uniqueId, 0, sizeof(*uniqueId));
    std::memcpy(uniqueId->internal, &id, sizeof(id));
    return coll::okStatus();
  });
}

collResult_t collCommGrow(collComm_t comm, int nRanks, const collUniqueId* uniqueId, int rank, collComm_t* newcomm,
                          collConfig_t* config) {
  if (!comm) {  // a new rank: an init on the grow's id
    return guarded("collCommGrow", nullptr, [&]() -> Status {
      COLL_CHECK(checkInitArgs(newcomm, nRanks, rank));
      if (!uniqueId) return coll::invalidArgument("uniqueId is NULL for a new rank (comm NULL)");
      coll::UniqueIdData id;
      COLL_CHECK(checkId(*uniqueId, "uniqueId", &id));
      return initRank(newcomm, nRanks, id, rank, config);
    });
  }
  CommUse use(comm);
  return guarded("collCommGrow", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (!newcomm) return coll::invalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    if (rank != -1)
      return coll::invalidArgument("rank " + std::to_string(rank) +
                                   " is not -1: the communicator's ranks keep their ranks (new ranks pass comm NULL)");
    if (nRanks <= comm->nranks || nRanks > coll::kMaxRanks)
      return coll::invalidArgument("nRanks " + std::to_string(nRanks) + " is not above the communicator's " +
                                   std::to_string(comm->nranks) + " ranks (and at most " +
                                   std::to_string(coll::kMaxRanks) + ")");
    coll::UniqueIdData parsed;
    if (uniqueId) COLL_CHECK(checkId(*uniqueId, "uniqueId", &parsed));
    const coll::UniqueIdData* id = uniqueId ? &parsed : nullptr;
    COLL_ASSIGN(coll::CommOptions opts, optionsFromConfig(config, &comm->options));
    opts.blocking = true;
    if (coll::inGroup()) {
      deferToGroupEnd(comm, newcomm, [comm, nRanks, parsed, held = id != nullptr, opts] {
        return coll::commGrow(comm, nRanks, held ? &parsed : nullptr, opts);
      });
      return coll::okStatus();
    }
    COLL_ASSIGN(*newcomm, coll::commGrow(comm, nRanks, id, opts));
    return coll::okStatus();
  });
}

collResult_t collCommSuspend(collComm_t comm, int flags) {
  CommUse use(comm);
  return guarded("collCommSuspend", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (flags != COLL_SUSPEND_MEM)
      return coll::invalidArgument("flags " + std::to_string(flags) + " is not COLL_SUSPEND_MEM (1)");
    if (comm->dev.cudaDev >= 0)
      return coll::invalidUsage("rank " + std::to_string(comm->rank) + " is bound to CUDA device " +
                                std::to_string(comm->dev.cudaDev) +
                                ": releasing a device rank's memory is not supported by this library");
    comm->suspended.store(true);  // a host-memory rank holds no GPU memory: nothing to release
    return coll::okStatus();
  });
}

collResult_t collCommResume(collComm_t comm) {
  CommUse use(comm);
  return guarded("collCommResume", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!comm->suspended.exchange(false)) return coll::invalidUsage("comm is not suspended");
    return coll::okStatus();
  });
}

collResult_t collCommMemStats(collComm_t comm, collCommMemStat_t stat, uint64_t* value) {
  CommUse use(comm);
  return guarded("collCommMemStats", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!value) return coll::invalidArgument("value is NULL");
    const int which = rawArg(stat);
    if (which < collStatGpuMemSuspend || which > collStatGpuMemTotal)
      return coll::invalidArgument("stat " + std::to_string(which) + " is not a collCommMemStat_t (0..3)");
    if (comm->dev.cudaDev >= 0)
      return coll::invalidUsage("rank " + std::to_string(comm->rank) +
                                " is a device rank, whose GPU memory this library does not count yet");
    *value = which == collStatGpuMemSuspended && comm->suspended.load() ? 1 : 0;  // no GPU memory held
    return coll::okStatus();
  });
}

collResult_t collRecordError(collComm_t comm, collResult_t code, const char* text) {
  try {
    std::string what = text ? text : "";
    if (comm && coll::isLiveComm(comm)) comm->lastError = what;
    lastErrorText() = what;
  } catch (...) {
  }
  return code;
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

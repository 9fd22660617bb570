// The C ABI: extern "C" entry points. Each validates its arguments, runs the call inside
// a wrapper that catches everything (no exception ever reaches a C caller), turns the
// internal Status into a collResult_t, and records the error text for collGetLastError.
#include <arpa/inet.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "api/guard.h"
#include "api/options.h"
#include "bootstrap/bootstrap.h"

using coll::Status;
using namespace coll::api;

namespace coll::api {
std::string& lastErrorText() {
  thread_local std::string text;
  return text;
}
}  // namespace coll::api

namespace coll::api {

// The refusals of guard.h's checks, out of line: only a failed check builds its message.
Status CommUse::notLive(const char* arg) const {
  if (!c_) return invalidArgument(std::string(arg) + " is NULL");
  return invalidArgument(std::string(arg) + " " + ptrStr(c_) +
                         " is not a live communicator (destroyed, aborted or never initialized)");
}

Status CommUse::notReady(const char* arg) const {
  COLL_CHECK(check(arg));
  const int state = c_->initState.load(std::memory_order_acquire);
  if (state == collInProgress)
    return invalidUsage(std::string(arg) + " " + ptrStr(c_) +
                        " is still initializing (a non-blocking init: poll collCommGetAsyncError until it no "
                        "longer returns collInProgress; or an init inside a group that has not ended)");
  if (state != collSuccess) return c_->abort->status().prefix(std::string(arg) + " failed its init: ");
  if (c_->suspended.load(std::memory_order_relaxed))
    return invalidUsage(std::string(arg) + " " + ptrStr(c_) + " is suspended (collCommSuspend): collCommResume first");
  return okStatus();
}

Status badType(int t) {
  return invalidArgument("datatype " + std::to_string(t) + " is not a collDataType_t (0.." +
                         std::to_string(collNumTypes - 1) + ")");
}

Status bytesOverflow(const char* arg, size_t count, size_t mult, collDataType_t t) {
  return invalidArgument(std::string(arg) + " " + std::to_string(count) + " of " + dataTypeName(t) +
                         (mult > 1 ? " x nranks " + std::to_string(mult) : "") + " overflows size_t bytes");
}

Status nullBuffer(const char* arg, size_t count) {
  return invalidArgument(std::string(arg) + " is NULL with count " + std::to_string(count));
}

Status rankOutOfRange(const char* arg, int r, int nranks) {
  return invalidArgument(std::string(arg) + " " + std::to_string(r) + " is out of range for a communicator of " +
                         std::to_string(nranks) + " ranks");
}

// The arguments of collective call (not send/recv) as the caller named them.
Status checkArgs(const OpCall& call, collComm* c, BufKinds* k) {
  const OpDesc& od = call.od;
  const bool perRank = spansRanks(od.kind);
  const char* countArg = od.kind == CollKind::kAllGather ? "sendcount" : perRank ? "recvcount" : "count";
  if (combines(od.kind)) COLL_CHECK(checkOp(call.op, call.type(), c));
  if (rooted(od.kind)) COLL_CHECK(checkRank("root", od.root, c->nranks));
  COLL_CHECK(checkBytes(countArg, od.count, perRank ? static_cast<size_t>(c->nranks) : 1, call.type()));
  if (od.touchesSend(c->rank)) COLL_CHECK(checkBuf("sendbuff", od.sendbuff, od.count, c, k));
  if (od.touchesRecv(c->rank)) COLL_CHECK(checkBuf("recvbuff", od.recvbuff, od.count, c, k));
  return okStatus();
}

namespace {

// The arguments of a collSend or collRecv, its datatype checked.
Status checkP2p(const OpCall& call, collComm* c, BufKinds* k) {
  const OpDesc& od = call.od;
  const bool send = od.kind == CollKind::kPeerSend;
  COLL_CHECK(checkRank("peer", od.root, c->nranks));
  COLL_CHECK(checkBytes("count", od.count, 1, call.type()));
  COLL_CHECK(send ? checkBuf("sendbuff", od.sendbuff, od.count, c, k)
                  : checkBuf("recvbuff", od.recvbuff, od.count, c, k));
  if (od.root == c->rank && !inGroup())
    return invalidUsage(std::string(send ? "collSend to" : "collRecv from") + " oneself (peer " +
                        std::to_string(od.root) + ") outside a group would never complete; pair it with a " +
                        (send ? "collRecv" : "collSend") + " inside collGroupStart/End");
  return okStatus();
}

}  // namespace

}  // namespace coll::api

// The library is built with hidden visibility; the C ABI is its only export.
#pragma GCC visibility push(default)
extern "C" {

collResult_t collGetVersion(int* version) {
  return guarded("collGetVersion", nullptr, [&]() -> Status {
    if (!version) return coll::invalidArgument("version is NULL");
    *version = COLL_VERSION_CODE;
    return coll::okStatus();
  });
}

collResult_t collGetUniqueId(collUniqueId* uniqueId) {
  return guarded("collGetUniqueId", nullptr, [&]() -> Status {
    if (!uniqueId) return coll::invalidArgument("uniqueId is NULL");
    COLL_ASSIGN(coll::UniqueIdData id, coll::makeUniqueId());
    std::memset(uniqueId, 0, sizeof(*uniqueId));
    std::memcpy(uniqueId->internal, &id, sizeof(id));
    return coll::okStatus();
  });
}

collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank) {
  return collCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

collResult_t collCommInitAll(collComm_t* comms, int ndev, const int* devlist) {
  return guarded("collCommInitAll", nullptr, [&]() -> Status {
    if (!comms) return coll::invalidArgument("comms is NULL");
    if (ndev < 1) return coll::invalidArgument("ndev " + std::to_string(ndev) + " is < 1");
    if (devlist) {
#if COLL_HAVE_CUDA
      std::string why;
      if (!coll::gpu::usable(&why))
        return coll::invalidArgument("devlist[0]=" + std::to_string(devlist[0]) + ": no CUDA device is usable (" + why +
                                     "); pass devlist NULL for host-memory ranks");
      const int count = coll::gpu::deviceCount();
      for (int i = 0; i < ndev; ++i)
        if (devlist[i] < 0 || devlist[i] >= count)
          return coll::invalidArgument("devlist[" + std::to_string(i) + "]=" + std::to_string(devlist[i]) +
                                       " is not a CUDA device (this process sees " + std::to_string(count) + ")");
#else
      return coll::invalidArgument("devlist[0]=" + std::to_string(devlist[0]) +
                                   ": this build has no CUDA support; pass devlist NULL for host-memory ranks");
#endif
    }
    for (int i = 0; i < ndev; ++i) comms[i] = nullptr;
    // An in-process root on loopback: these ranks never leave this host.
    coll::SockAddr lo{};
    lo.u.in4.sin_family = AF_INET;
    lo.u.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    COLL_ASSIGN(coll::UniqueIdData id, coll::startRootAt(lo));
    std::vector<Status> results(ndev);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i)
      threads.emplace_back([&, i] {
        // Rank i on devlist[i] (several ranks may share a device).
        int dev = devlist ? devlist[i] : -1;
#if COLL_HAVE_CUDA
        if (devlist) {
          Status bound = coll::gpu::setDevice(dev);
          if (!bound.ok()) {
            results[i] = bound;
            return;
          }
        }
#endif
        auto r = coll::commInit(id, ndev, i, dev);
        if (r.ok()) comms[i] = r.value();
        else results[i] = r.takeStatus();
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[i].ok()) continue;
      for (int j = 0; j < ndev; ++j)
        if (comms[j]) coll::commFree(comms[j], false);
      for (int j = 0; j < ndev; ++j) comms[j] = nullptr;
      return results[i];
    }
    return coll::okStatus();
  });
}

collResult_t collCommFinalize(collComm_t comm) {
  CommUse use(comm);
  return guarded("collCommFinalize", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    // Host operations complete before their call returns; device work queued on streams
    // is waited for here.
    coll::deviceQuiesce(comm->dev, false);
    return comm->abort->raised() && !comm->revoked.load() ? comm->abort->status() : coll::okStatus();
  });
}

collResult_t collCommDestroy(collComm_t comm) {
  return guarded("collCommDestroy", nullptr, [&]() -> Status {
    if (!comm) return coll::okStatus();  // NCCL's rule: destroying NULL does nothing
    if (!coll::isLiveComm(comm))
      return coll::invalidArgument("comm " + ptrStr(comm) + " is not a live communicator (already destroyed?)");
    forgetOps(comm);
    coll::commFree(comm, true);  // a normal leave, even after an error
    return coll::okStatus();
  });
}

collResult_t collCommAbort(collComm_t comm) {
  return guarded("collCommAbort", nullptr, [&]() -> Status {
    if (!comm) return coll::okStatus();  // as collCommDestroy
    if (!coll::isLiveComm(comm)) return coll::invalidArgument("comm " + ptrStr(comm) + " is not a live communicator");
    const std::string why = "communicator aborted by collCommAbort on rank " + std::to_string(comm->rank);
    comm->abort->set(coll::Code::kRemote, why);
    // Peers learn why through the root (a wait of theirs that stays stuck on this rank
    // ends with it), then the rank leaves cleanly: an abort is not a crash, and the root
    // need not warn of one.
    const bool joined = comm->initState.load() == collSuccess && comm->bootstrap;
    if (joined) comm->bootstrap->announceLeaving(why);
    forgetOps(comm);
    coll::commFree(comm, joined);  // waits for calls in flight to return
    return coll::okStatus();
  });
}

collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config) {
  CommUse use(comm);
  return guarded("collCommSplit", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (!newcomm) return coll::invalidArgument("newcomm is NULL");
    *newcomm = nullptr;
    COLL_ASSIGN(coll::CommOptions opts, optionsFromConfig(config, &comm->options));
    if (color < COLL_SPLIT_NOCOLOR)
      return coll::invalidArgument("color " + std::to_string(color) + " is negative and not COLL_SPLIT_NOCOLOR");
    if (coll::inGroup()) {
      // One thread may split several ranks in a group: each split runs on its own thread
      // and *newcomm is written at the outermost collGroupEnd.
      deferToGroupEnd(comm, newcomm, [comm, color, key, opts] { return coll::commSplit(comm, color, key, opts); });
      return coll::okStatus();
    }
    COLL_ASSIGN(*newcomm, coll::commSplit(comm, color, key, opts));
    return coll::okStatus();
  });
}

collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError) {
  CommUse use(comm);
  return guarded("collCommGetAsyncError", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!asyncError) return coll::invalidArgument("asyncError is NULL");
    const int state = comm->initState.load(std::memory_order_acquire);
    if (state == collInProgress) {
      *asyncError = collInProgress;
    } else {
      *asyncError = comm->abort->raised() && !comm->revoked.load() ? comm->abort->status().result() : collSuccess;
    }
    return coll::okStatus();
  });
}

collResult_t collCommCount(const collComm_t comm, int* count) {
  CommUse use(comm);
  return guarded("collCommCount", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!count) return coll::invalidArgument("count is NULL");
    *count = comm->nranks;
    return coll::okStatus();
  });
}

collResult_t collCommCuDevice(const collComm_t comm, int* device) {
  CommUse use(comm);
  return guarded("collCommCuDevice", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!device) return coll::invalidArgument("device is NULL");
    *device = comm->dev.cudaDev;
    return coll::okStatus();
  });
}

collResult_t collCommUserRank(const collComm_t comm, int* rank) {
  CommUse use(comm);
  return guarded("collCommUserRank", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    if (!rank) return coll::invalidArgument("rank is NULL");
    *rank = comm->rank;
    return coll::okStatus();
  });
}

const char* collGetErrorString(collResult_t result) {
  switch (rawArg(result)) {
    case collSuccess: return "no error";
    case collUnhandledCudaError: return "unhandled cuda error";
    case collSystemError: return "unhandled system error (run with COLL_DEBUG=INFO for details)";
    case collInternalError: return "internal error - please report this issue";
    case collInvalidArgument: return "invalid argument (see collGetLastError for details)";
    case collInvalidUsage: return "invalid usage (see collGetLastError for details)";
    case collRemoteError: return "remote process exited or there was a network error";
    case collInProgress: return "operation in progress";
    case collTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

const char* collGetLastError(collComm_t comm) {
  try {
    if (comm && coll::isLiveComm(comm)) {
      // A communicator that failed without a failed call on this thread (a non-blocking
      // init, a peer's death seen by collCommGetAsyncError) explains itself by its error.
      if (comm->lastError.empty() && comm->abort->raised()) {
        thread_local std::string reason;
        reason = comm->abort->status().message();
        return reason.c_str();
      }
      return comm->lastError.c_str();
    }
    return lastErrorText().c_str();
  } catch (...) {
    return "";
  }
}

collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                           collComm_t comm, collStream_t stream) {
  return runOp("collAllReduce", comm,
               opCall(coll::CollKind::kAllReduce, sendbuff, recvbuff, count, rawArg(datatype), rawArg(op), -1), stream,
               checkArgs);
}

collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                           collComm_t comm, collStream_t stream) {
  return runOp("collBroadcast", comm,
               opCall(coll::CollKind::kBroadcast, sendbuff, recvbuff, count, rawArg(datatype), collSum, root), stream,
               checkArgs);
}

collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                        int root, collComm_t comm, collStream_t stream) {
  return runOp("collReduce", comm,
               opCall(coll::CollKind::kReduce, sendbuff, recvbuff, count, rawArg(datatype), rawArg(op), root), stream,
               checkArgs);
}

collResult_t collAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                           collComm_t comm, collStream_t stream) {
  return runOp("collAllGather", comm,
               opCall(coll::CollKind::kAllGather, sendbuff, recvbuff, sendcount, rawArg(datatype), collSum, -1), stream,
               checkArgs);
}

collResult_t collReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                               collRedOp_t op, collComm_t comm, collStream_t stream) {
  return runOp("collReduceScatter", comm,
               opCall(coll::CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, rawArg(datatype), rawArg(op), -1),
               stream, checkArgs);
}

collResult_t collAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                 collRedOp_t op, collComm_t comm, collStream_t stream, const collCollConfig_t* config) {
  return runOp("collAllReduceConfig", comm,
               opCall(coll::CollKind::kAllReduce, sendbuff, recvbuff, count, rawArg(datatype), rawArg(op), -1), stream,
               checkArgs, config);
}

collResult_t collBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                                 collComm_t comm, collStream_t stream, const collCollConfig_t* config) {
  return runOp("collBroadcastConfig", comm,
               opCall(coll::CollKind::kBroadcast, sendbuff, recvbuff, count, rawArg(datatype), collSum, root), stream,
               checkArgs, config);
}

collResult_t collReduceConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                              collRedOp_t op, int root, collComm_t comm, collStream_t stream,
                              const collCollConfig_t* config) {
  return runOp("collReduceConfig", comm,
               opCall(coll::CollKind::kReduce, sendbuff, recvbuff, count, rawArg(datatype), rawArg(op), root), stream,
               checkArgs, config);
}

collResult_t collAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                                 collComm_t comm, collStream_t stream, const collCollConfig_t* config) {
  return runOp("collAllGatherConfig", comm,
               opCall(coll::CollKind::kAllGather, sendbuff, recvbuff, sendcount, rawArg(datatype), collSum, -1), stream,
               checkArgs, config);
}

collResult_t collReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                                     collRedOp_t op, collComm_t comm, collStream_t stream,
                                     const collCollConfig_t* config) {
  return runOp("collReduceScatterConfig", comm,
               opCall(coll::CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, rawArg(datatype), rawArg(op), -1),
               stream, checkArgs, config);
}

collResult_t collSend(const void* sendbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream) {
  return runOp("collSend", comm,
               opCall(coll::CollKind::kPeerSend, sendbuff, nullptr, count, rawArg(datatype), collSum, peer), stream,
               checkP2p);
}

collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream) {
  return runOp("collRecv", comm,
               opCall(coll::CollKind::kPeerRecv, nullptr, recvbuff, count, rawArg(datatype), collSum, peer), stream,
               checkP2p);
}

collResult_t collGroupStart(void) {
  return guarded("collGroupStart", nullptr, [&]() -> Status { return coll::groupStart(); });
}

collResult_t collGroupEnd(void) {
  collComm* failed = nullptr;
  return guarded("collGroupEnd", nullptr, [&]() -> Status {
    Status st = coll::groupEnd(&failed);
    if (!st.ok() && failed && coll::isLiveComm(failed)) failed->lastError = "collGroupEnd: " + st.message();
    return st;
  });
}

}  // extern "C"
#pragma GCC visibility pop

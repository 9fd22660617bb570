// Entry points for operations built from others: PreMulSum ops (a sum over inputs the
// library first multiplies by the scalar), alltoall, gather and scatter (groups of
// sends and receives, so they take the send/recv paths of every transport), and the
// simulated end of a group.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/guard.h"

using coll::OpDesc;
using coll::Status;
using namespace coll::api;

namespace {

// Op values made by collRedOpCreatePreMulSum, over all communicators of the process: a
// value is never given out twice, so an op of another communicator, or one destroyed,
// is told apart from a bogus value.
struct OpRegistry {
  std::mutex mu;
  int next = collNumOps;
  std::map<int, const collComm*> owner;  // live ops
};
OpRegistry& ops() {
  static auto* r = new OpRegistry();  // never freed: used until exit
  return *r;
}

std::string opOwnerText(int op, const collComm* comm) {
  OpRegistry& r = ops();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.owner.find(op);
  if (it != r.owner.end() && it->second != comm)
    return "op " + std::to_string(op) + " was made by another communicator (" + ptrStr(it->second) +
           "); PreMulSum ops work only on the communicator that made them";
  if (op >= collNumOps && op < r.next) return "op " + std::to_string(op) + " was destroyed by collRedOpDestroy";
  return "op " + std::to_string(op) + " is not a collRedOp_t (0.." + std::to_string(collNumOps - 1) +
         ") nor an op made by collRedOpCreatePreMulSum";
}

// Runs a set of sends and receives as one group (nested in the caller's, if open).
Status runP2p(const char* fn, collComm* comm, const std::vector<OpDesc>& parts) {
  COLL_CHECK(coll::groupStart());
  for (OpDesc od : parts) {
    if (od.kind == coll::CollKind::kPeerSend) od.registered = isRegistered(comm, od.sendbuff, od.bytes());
    collComm* failed = nullptr;
    Status st = coll::enqueue(comm, std::move(od), &failed);  // inside a group: only queued
    if (!st.ok()) {
      // Not reached today; were it, the group must not run half of the operation.
      coll::groupNoteError(st);
      (void)coll::groupEnd(&failed);
      return st;
    }
  }
  collComm* failed = nullptr;
  Status st = coll::groupEnd(&failed);
  if (!st.ok() && failed && failed != comm && coll::isLiveComm(failed))
    failed->lastError = std::string(fn) + ": " + st.message();
  return st;
}

OpDesc p2pPart(const OpDesc& base, coll::CollKind kind, const char* buf, int peer, size_t bytesOff) {
  OpDesc od = base;
  od.kind = kind;
  od.root = peer;
  if (kind == coll::CollKind::kPeerSend) {
    od.sendbuff = buf ? buf + bytesOff : nullptr;
    od.recvbuff = nullptr;
  } else {
    od.recvbuff = buf ? const_cast<char*>(buf) + bytesOff : nullptr;
    od.sendbuff = nullptr;
  }
  return od;
}

// The common checks of alltoall, gather and scatter (t: the datatype passed, rawArg);
// `base` gets type and count.
Status checkSpread(collComm* c, const CommUse& use, int t, size_t count, OpDesc* base) {
  COLL_CHECK(use.ready());
  COLL_CHECK(checkType(t));
  base->dtype = static_cast<collDataType_t>(t);
  COLL_CHECK(checkBytes("count", count, static_cast<size_t>(c->nranks), base->dtype));
  base->count = count;
  return coll::okStatus();
}

// A buffer of nranks blocks of count elements (alltoall's, the root's of gather/scatter).
Status checkBlocks(const char* arg, const void* p, size_t count, collComm* c, BufKinds* kinds) {
  const size_t n = static_cast<size_t>(c->nranks);
  if (!p && count > 0)
    return coll::invalidArgument(std::string(arg) + " is NULL with count " + std::to_string(count) + " (x " +
                                 std::to_string(n) + " ranks)");
  return checkBuf(arg, p, count * n, c, kinds);
}

// A gather's or scatter's arguments.
struct Rooted {
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int dtype;  // rawArg
  int root;
  collStream_t stream;
  const collCollConfig_t* config;
};

// Gather (every rank's one block to the root's n blocks) or scatter (the reverse), as
// one group of sends and receives. In place, the root's own block stays where it is.
Status runRooted(const char* fn, collComm* comm, const CommUse& use, const Rooted& a, bool gather) {
  OpDesc base{};  // its parts' kinds, buffers and peers are set by p2pPart
  COLL_CHECK(checkSpread(comm, use, a.dtype, a.count, &base));
  COLL_CHECK(checkRank("root", a.root, comm->nranks));
  const bool isRoot = comm->rank == a.root;
  const char* manyArg = gather ? "recvbuff" : "sendbuff";
  const char* oneArg = gather ? "sendbuff" : "recvbuff";
  const char* many = static_cast<const char*>(gather ? a.recvbuff : a.sendbuff);
  const char* one = static_cast<const char*>(gather ? a.sendbuff : a.recvbuff);
  BufKinds kinds;
  if (isRoot) COLL_CHECK(checkBlocks(manyArg, many, a.count, comm, &kinds));
  COLL_CHECK(checkBuf(oneArg, one, a.count, comm, &kinds));
  COLL_CHECK(placeOp(&base, kinds, a.stream));
  COLL_CHECK(applyCollConfig(a.config, comm, &base));
  base.via = fn;
  const size_t block = a.count * coll::dataTypeSize(base.dtype);
  const bool inPlace = isRoot && one == many + block * static_cast<size_t>(a.root);
  const auto toRoot = gather ? coll::CollKind::kPeerSend : coll::CollKind::kPeerRecv;
  const auto atRoot = gather ? coll::CollKind::kPeerRecv : coll::CollKind::kPeerSend;
  std::vector<OpDesc> parts;
  if (!inPlace) parts.push_back(p2pPart(base, toRoot, one, a.root, 0));
  for (int p = 0; isRoot && p < comm->nranks; ++p)
    if (!(inPlace && p == a.root)) parts.push_back(p2pPart(base, atRoot, many, p, block * static_cast<size_t>(p)));
  return runP2p(fn, comm, parts);
}

// Alltoall as one group of sends and receives, under the name fn (the plain call or its
// per-call config variant).
collResult_t runAlltoAll(const char* fn, const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                         collComm* comm, collStream_t stream, const collCollConfig_t* config) {
  CommUse use(comm);
  return guarded(fn, comm, [&]() -> Status {
    OpDesc base{};  // its parts' kinds, buffers and peers are set by p2pPart
    COLL_CHECK(checkSpread(comm, use, rawArg(datatype), count, &base));
    const size_t n = static_cast<size_t>(comm->nranks), total = count * n;
    BufKinds kinds;
    COLL_CHECK(checkBlocks("sendbuff", sendbuff, count, comm, &kinds));
    COLL_CHECK(checkBlocks("recvbuff", recvbuff, count, comm, &kinds));
    COLL_CHECK(placeOp(&base, kinds, stream));
    COLL_CHECK(applyCollConfig(config, comm, &base));
    base.via = fn;
    const size_t block = count * coll::dataTypeSize(base.dtype);
    const char* src = static_cast<const char*>(sendbuff);
    if (sendbuff == recvbuff && total > 0) {
      // In place: every block is read after others may have landed on it, so the input
      // is copied first (host memory; device buffers are not copied here).
      if (base.device && !comm->dev.emulate)
        return coll::invalidArgument("sendbuff == recvbuff: in-place alltoall is supported on host buffers "
                                     "only; pass separate device buffers");
      std::shared_ptr<char> inputCopy = comm->scratch->take(block * n);
      std::memcpy(inputCopy.get(), sendbuff, block * n);
      src = inputCopy.get();
      base.keep = std::move(inputCopy);
    }
    std::vector<OpDesc> parts;
    for (int p = 0; p < comm->nranks; ++p) {
      parts.push_back(p2pPart(base, coll::CollKind::kPeerSend, src, p, block * static_cast<size_t>(p)));
      parts.push_back(p2pPart(base, coll::CollKind::kPeerRecv, static_cast<const char*>(recvbuff), p,
                              block * static_cast<size_t>(p)));
    }
    return runP2p(fn, comm, parts);
  });
}

collResult_t runRootedCall(const char* fn, collComm* comm, const Rooted& a, bool gather) {
  CommUse use(comm);
  return guarded(fn, comm, [&]() -> Status { return runRooted(fn, comm, use, a, gather); });
}

}  // namespace

namespace coll::api {

Status checkOp(int v, collDataType_t t, const collComm* comm) {
  if (validRedOp(v)) return okStatus();
  auto it = comm->redOps.find(v);
  if (it == comm->redOps.end()) return invalidArgument(opOwnerText(v, comm));
  if (it->second.dtype != t)
    return invalidArgument("op " + std::to_string(v) + " is a PreMulSum op for " + dataTypeName(it->second.dtype) +
                           ", used with datatype " + dataTypeName(t));
  return okStatus();
}

void forgetOps(const collComm* comm) {
  OpRegistry& r = ops();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& [v, p] : comm->redOps) r.owner.erase(v);
}

}  // namespace coll::api

#pragma GCC visibility push(default)
extern "C" {

collResult_t collRedOpCreatePreMulSum(collRedOp_t* op, void* scalar, collDataType_t datatype,
                                      collScalarResidence_t residence, collComm_t comm) {
  CommUse use(comm);
  return guarded("collRedOpCreatePreMulSum", comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    if (!op) return coll::invalidArgument("op is NULL");
    if (!scalar) return coll::invalidArgument("scalar is NULL");
    const int type = rawArg(datatype), where = rawArg(residence);
    COLL_CHECK(checkType(type));
    if (where != collScalarDevice && where != collScalarHostImmediate)
      return coll::invalidArgument("residence " + std::to_string(where) +
                                   " is not collScalarDevice (0) or collScalarHostImmediate (1)");
    coll::PreMulSumOp p{static_cast<collDataType_t>(type), where == collScalarHostImmediate};
    if (p.immediate) {
#if COLL_HAVE_CUDA
      if (coll::gpu::isDeviceMemory(scalar))
        return coll::invalidArgument("scalar " + ptrStr(scalar) +
                                     " is CUDA device memory, but residence collScalarHostImmediate reads host memory "
                                     "now; pass collScalarDevice");
#endif
      std::memcpy(p.value, scalar, coll::dataTypeSize(p.dtype));
    } else {
      p.scalar = scalar;
    }
    OpRegistry& r = ops();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.next == collMaxRedOp) return coll::Status(coll::Code::kSystem, "every op value has been used");
    const int v = r.next++;
    comm->redOps.emplace(v, p);
    r.owner.emplace(v, comm);
    *op = static_cast<collRedOp_t>(v);
    return coll::okStatus();
  });
}

collResult_t collRedOpDestroy(collRedOp_t op, collComm_t comm) {
  CommUse use(comm);
  return guarded("collRedOpDestroy", comm, [&]() -> Status {
    COLL_CHECK(use.check());
    const int v = rawArg(op);
    if (coll::validRedOp(v))
      return coll::invalidArgument("op " + std::to_string(v) +
                                   " is a built-in op: only ops made by "
                                   "collRedOpCreatePreMulSum are destroyed");
    if (!comm->redOps.erase(v)) return coll::invalidArgument(opOwnerText(v, comm));
    OpRegistry& r = ops();
    std::lock_guard<std::mutex> lock(r.mu);
    r.owner.erase(v);
    return coll::okStatus();
  });
}

collResult_t collAlltoAll(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collComm_t comm,
                          collStream_t stream) {
  return runAlltoAll("collAlltoAll", sendbuff, recvbuff, count, datatype, comm, stream, nullptr);
}

collResult_t collAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                collComm_t comm, collStream_t stream, const collCollConfig_t* config) {
  return runAlltoAll("collAlltoAllConfig", sendbuff, recvbuff, count, datatype, comm, stream, config);
}

collResult_t collGather(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                        collComm_t comm, collStream_t stream) {
  return runRootedCall("collGather", comm, {sendbuff, recvbuff, count, rawArg(datatype), root, stream, nullptr}, true);
}

collResult_t collGatherConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                              collComm_t comm, collStream_t stream, const collCollConfig_t* config) {
  return runRootedCall("collGatherConfig", comm, {sendbuff, recvbuff, count, rawArg(datatype), root, stream, config},
                       true);
}

collResult_t collScatter(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                         collComm_t comm, collStream_t stream) {
  return runRootedCall("collScatter", comm, {sendbuff, recvbuff, count, rawArg(datatype), root, stream, nullptr},
                       false);
}

collResult_t collScatterConfig(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                               collComm_t comm, collStream_t stream, const collCollConfig_t* config) {
  return runRootedCall("collScatterConfig", comm, {sendbuff, recvbuff, count, rawArg(datatype), root, stream, config},
                       false);
}

collResult_t collGroupSimulateEnd(collSimInfo_t* simInfo) {
  return guarded("collGroupSimulateEnd", nullptr, [&]() -> Status {
    // The group closes whatever simInfo holds, so a bad one does not leave it open.
    double us = 0;
    Status closed = coll::groupSimulateEnd(&us);
    if (!simInfo) return coll::invalidArgument("simInfo is NULL");
    const size_t need = offsetof(collSimInfo_t, estimatedTime) + sizeof(float);
    // Later headers keep this layout (its name still says 2.22), so any version from 2.22 on.
    if (simInfo->size < need || simInfo->size > sizeof(collSimInfo_t) || simInfo->magic != COLL_SIM_INFO_MAGIC ||
        simInfo->version < 22200)
      return coll::invalidArgument("simInfo (size " + std::to_string(simInfo->size) + ", magic " +
                                   std::to_string(simInfo->magic) + ", version " + std::to_string(simInfo->version) +
                                   ") was not made from COLL_SIM_INFO_INITIALIZER / NCCL_SIM_INFO_INITIALIZER");
    COLL_CHECK(closed);
    simInfo->estimatedTime = static_cast<float>(us);
    return coll::okStatus();
  });
}

}  // extern "C"
#pragma GCC visibility pop

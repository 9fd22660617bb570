// Compressed collectives (collectives.h collAllReduceCompressed; kernels/compress.h): the
// uncompressed calls' arguments and paths, with the wire type set on the operation.
#include "api/guard.h"
#include "kernels/compress.h"

using coll::Status;
using namespace coll::api;

namespace coll::api {

uint8_t wireOf(collDataType_t wiretype) {
  if (wiretype == collFloat16) return kWireFp16;
  if (wiretype == collBfloat16) return kWireBf16;
  return kWireNone;
}

Status checkCompressed(const OpDesc& od, collDataType_t wiretype) {
  if (od.dtype != collFloat32)
    return invalidArgument("datatype " + std::string(dataTypeName(od.dtype)) +
                           ": compressed collectives take float32 buffers (collFloat32)");
  if (wireOf(wiretype) == kWireNone)
    return invalidArgument("wiretype " +
                           (validDataType(static_cast<int>(wiretype)) ? std::string(dataTypeName(wiretype))
                                                                      : std::to_string(static_cast<int>(wiretype))) +
                           " is not a wire type: collFloat16 or collBfloat16");
  const bool reduces = od.kind == CollKind::kAllReduce || od.kind == CollKind::kReduce ||
                       od.kind == CollKind::kReduceScatter;
  if (reduces && od.op == collProd)
    return invalidArgument("op collProd: compressed collectives reduce with collSum, collAvg, collMax or collMin "
                           "(a product of rounded values has no useful error bound)");
  if (reduces && !validRedOp(static_cast<int>(od.op)))
    return invalidArgument("op " + std::to_string(static_cast<int>(od.op)) +
                           ": compressed collectives take the built-in collSum, collAvg, collMax or collMin only");
  return okStatus();
}

uint8_t defaultWire(const collComm* comm, const OpDesc& od) {
  if (comm->compress == kWireNone || od.dtype != collFloat32) return kWireNone;
  switch (od.kind) {
    case CollKind::kAllReduce:
    case CollKind::kReduceScatter: return od.op == collSum || od.op == collAvg ? comm->compress : uint8_t{kWireNone};
    case CollKind::kAllGather:
    case CollKind::kBroadcast: return comm->compress;
    default: return kWireNone;
  }
}

}  // namespace coll::api

namespace {

// Runs od, named fn, compressed to wiretype.
collResult_t runCompressed(const char* fn, collComm_t comm, coll::OpDesc od, collDataType_t wiretype,
                           collStream_t stream) {
  od.wire = wireOf(wiretype);
  return runOp(fn, comm, od, stream, [&](collComm* c, BufKinds* k) -> Status {
    COLL_CHECK(checkCompressed(od, wiretype));
    return checkArgs(od, c, k);
  });
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

collResult_t collAllReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                     collDataType_t wiretype, collRedOp_t op, collComm_t comm, collStream_t stream) {
  return runCompressed("collAllReduceCompressed", comm,
                       {coll::CollKind::kAllReduce, sendbuff, recvbuff, count, datatype, op, -1, 0}, wiretype, stream);
}

collResult_t collReduceScatterCompressed(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         collDataType_t datatype, collDataType_t wiretype, collRedOp_t op,
                                         collComm_t comm, collStream_t stream) {
  return runCompressed("collReduceScatterCompressed", comm,
                       {coll::CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, -1, 0}, wiretype,
                       stream);
}

collResult_t collAllGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                                     collDataType_t wiretype, collComm_t comm, collStream_t stream) {
  return runCompressed("collAllGatherCompressed", comm,
                       {coll::CollKind::kAllGather, sendbuff, recvbuff, sendcount, datatype, collSum, -1, 0}, wiretype,
                       stream);
}

collResult_t collBroadcastCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                     collDataType_t wiretype, int root, collComm_t comm, collStream_t stream) {
  return runCompressed("collBroadcastCompressed", comm,
                       {coll::CollKind::kBroadcast, sendbuff, recvbuff, count, datatype, collSum, root, 0}, wiretype,
                       stream);
}

collResult_t collReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                  collDataType_t wiretype, collRedOp_t op, int root, collComm_t comm,
                                  collStream_t stream) {
  return runCompressed("collReduceCompressed", comm,
                       {coll::CollKind::kReduce, sendbuff, recvbuff, count, datatype, op, root, 0}, wiretype, stream);
}

}  // extern "C"
#pragma GCC visibility pop

// Compressed collectives (collectives.h collAllReduceCompressed; kernels/compress.h): the
// uncompressed calls' arguments and paths, with the encoding set on the operation.
#include "api/guard.h"
#include "kernels/compress.h"

using coll::Status;
using namespace coll::api;

namespace coll::api {

uint8_t encodingOf(int wiretype) {
  if (wiretype == collFloat16) return kEncodingFp16;
  if (wiretype == collBfloat16) return kEncodingBf16;
  return kEncodingNone;
}

Status checkCompressed(const OpCall& call, int wiretype) {
  const OpDesc& od = call.od;
  if (call.dtype != collFloat32)
    return invalidArgument("datatype " + std::string(dataTypeName(call.type())) +
                           ": compressed collectives take float32 buffers (collFloat32)");
  if (encodingOf(wiretype) == kEncodingNone)
    return invalidArgument("wiretype " +
                           (validDataType(wiretype) ? std::string(dataTypeName(static_cast<collDataType_t>(wiretype)))
                                                    : std::to_string(wiretype)) +
                           " is not a wire type: collFloat16 or collBfloat16");
  const bool reduces = combines(od.kind);
  if (reduces && call.op == collProd)
    return invalidArgument("op collProd: compressed collectives reduce with collSum, collAvg, collMax or collMin "
                           "(a product of rounded values has no useful error bound)");
  if (reduces && !validRedOp(call.op))
    return invalidArgument("op " + std::to_string(call.op) +
                           ": compressed collectives take the built-in collSum, collAvg, collMax or collMin only");
  return okStatus();
}

uint8_t defaultEncoding(const collComm* comm, const OpDesc& od) {
  if (comm->compress == kEncodingNone || od.dtype != collFloat32) return kEncodingNone;
  switch (od.kind) {
    case CollKind::kAllReduce:
    case CollKind::kReduceScatter:
      return od.op == collSum || od.op == collAvg ? comm->compress : uint8_t{kEncodingNone};
    case CollKind::kAllGather:
    case CollKind::kBroadcast: return comm->compress;
    default: return kEncodingNone;
  }
}

}  // namespace coll::api

namespace {

// Runs call, named fn, compressed to wiretype (rawArg).
collResult_t runCompressed(const char* fn, collComm_t comm, OpCall call, int wiretype, collStream_t stream) {
  call.od.encoding = encodingOf(wiretype);
  return runOp(fn, comm, std::move(call), stream,
               [wiretype](const OpCall& checked, collComm* c, BufKinds* k) -> Status {
                 COLL_CHECK(checkCompressed(checked, wiretype));
                 return checkArgs(checked, c, k);
               });
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

collResult_t collAllReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                     collDataType_t wiretype, collRedOp_t op, collComm_t comm, collStream_t stream) {
  return runCompressed("collAllReduceCompressed", comm,
                       opCall(coll::CollKind::kAllReduce, sendbuff, recvbuff, count, rawArg(datatype), rawArg(op), -1),
                       rawArg(wiretype), stream);
}

collResult_t collReduceScatterCompressed(const void* sendbuff, void* recvbuff, size_t recvcount,
                                         collDataType_t datatype, collDataType_t wiretype, collRedOp_t op,
                                         collComm_t comm, collStream_t stream) {
  return runCompressed("collReduceScatterCompressed", comm,
                       opCall(coll::CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, rawArg(datatype),
                              rawArg(op), -1),
                       rawArg(wiretype), stream);
}

collResult_t collAllGatherCompressed(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                                     collDataType_t wiretype, collComm_t comm, collStream_t stream) {
  return runCompressed("collAllGatherCompressed", comm,
                       opCall(coll::CollKind::kAllGather, sendbuff, recvbuff, sendcount, rawArg(datatype), collSum, -1),
                       rawArg(wiretype), stream);
}

collResult_t collBroadcastCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                     collDataType_t wiretype, int root, collComm_t comm, collStream_t stream) {
  return runCompressed("collBroadcastCompressed", comm,
                       opCall(coll::CollKind::kBroadcast, sendbuff, recvbuff, count, rawArg(datatype), collSum, root),
                       rawArg(wiretype), stream);
}

collResult_t collReduceCompressed(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                  collDataType_t wiretype, collRedOp_t op, int root, collComm_t comm,
                                  collStream_t stream) {
  return runCompressed("collReduceCompressed", comm,
                       opCall(coll::CollKind::kReduce, sendbuff, recvbuff, count, rawArg(datatype), rawArg(op), root),
                       rawArg(wiretype), stream);
}

}  // extern "C"
#pragma GCC visibility pop

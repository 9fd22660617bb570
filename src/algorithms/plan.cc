#include "algorithms/plan.h"

#include <algorithm>

#include "base/datatype.h"
#include "kernels/compress.h"

namespace coll {

std::string OpDesc::describe() const {
  std::string s = std::string(collKindName(kind)) + " #" + std::to_string(seq) + " (count " + std::to_string(count) +
                  ", " + dataTypeName(dtype);
  if (combines(kind)) s += std::string(", ") + redOpName(op);
  if (rooted(kind)) s += ", root " + std::to_string(root);
  if (isPeerOp(kind)) s += ", peer " + std::to_string(root);
  if (via) s += std::string(", part of ") + via;
  return s + ")";
}

const char* awaitingName(Awaiting a) {
  switch (a) {
    case Awaiting::kData: return "data from";
    case Awaiting::kRoom: return "room at";
    case Awaiting::kDelivery: return "delivery to";
  }
  return "?";
}

void Program::add(uint8_t flags, const OpDesc& od, uint16_t opIndex, const char* src, char* dst, size_t bytes,
                  SendConnector* send, RecvConnector* recv) {
  if (bytes == 0) return;
  Step s{};
  s.flags = flags;
  if ((flags & kDst) && streamMinBytes > 0 && od.bytes() >= streamMinBytes) s.flags |= kStream;
  s.elemSize = static_cast<uint8_t>(dataTypeSize(od.dtype));
  s.encoding = (flags & (kSend | kRecv)) ? od.encoding : uint8_t{kEncodingNone};
  s.op = opIndex;
  s.kernels = &hostReduceKernels(od.dtype, od.op);
  s.src = src;
  s.dst = dst;
  s.bytes = bytes;
  s.send = (flags & kSend) ? send : nullptr;
  s.recv = (flags & kRecv) ? recv : nullptr;
  steps.push_back(s);
  if (s.send && std::find(flushTargets.begin(), flushTargets.end(), s.send) == flushTargets.end())
    flushTargets.push_back(s.send);
}

size_t Program::sliceFor(const Step& s) const { return sliceBytesFor(s.encoding, sliceBytes); }

void Program::addToken(uint16_t opIndex, SendConnector* send, RecvConnector* recv) {
  // Send first, then receive: every rank of the ring does both, so none waits on another.
  Step s{};
  s.flags = kToken | kSend;
  s.elemSize = 1;
  s.op = opIndex;
  s.send = send;
  steps.push_back(s);
  s.flags = kToken | kRecv;
  s.send = nullptr;
  s.recv = recv;
  steps.push_back(s);
  if (std::find(flushTargets.begin(), flushTargets.end(), send) == flushTargets.end()) flushTargets.push_back(send);
}

}  // namespace coll

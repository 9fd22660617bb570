#include "calls.h"

#include <algorithm>
#include <cstring>

#include "base/datatype.h"

namespace soak {
namespace {

unsigned char canaryByte(size_t i) { return static_cast<unsigned char>(0xa5 ^ (i * 131)); }

void writeCanary(unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = canaryByte(i);
}

// Index of the first byte that lost its canary, or bytes.
size_t brokenCanary(const unsigned char* p, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != canaryByte(i)) return i;
  return bytes;
}

Kind drawKind(Rng& rng) {
  static const int kWeights[] = {20, 10, 10, 10, 10, 8, 5, 5, 12, 10};
  int total = 0;
  for (int w : kWeights) total += w;
  int u = static_cast<int>(rng.below(static_cast<uint64_t>(total)));
  int k = 0;
  while (u >= kWeights[k]) u -= kWeights[k++];
  return static_cast<Kind>(k);
}

}  // namespace

OpSpec drawOp(Rng& rng, int worldSize, size_t capacity) {
  OpSpec s;
  s.kind = drawKind(rng);
  s.type = static_cast<collDataType_t>(rng.below(collNumTypes));
  s.op = static_cast<int>(rng.below(kPreMulSum + 1));
  s.inPlace = rng.chance(0.3) && s.kind != Kind::kSendRecv && s.kind != Kind::kAlltoAllv;
  s.scalarImmediate = rng.chance(0.5);
  s.rootDraw = rng.next();
  s.shift = rng.next();
  s.dataSeed = rng.next();
  size_t es = coll::dataTypeSize(s.type);
  size_t maxCount = capacity / (es * (perRankBlocks(s.kind) ? static_cast<size_t>(worldSize) : 1));
  if (rng.chance(0.03)) return s;  // count 0
  uint64_t e = rng.below(23);      // bytes 1 .. 8 MiB, as many of each power of two
  uint64_t bytes = (uint64_t{1} << e) + rng.below(uint64_t{1} << e);
  s.count = std::min<size_t>(std::max<size_t>(1, bytes / es), maxCount);
  return s;
}

Call::Call(const OpSpec& spec, View* view, Buffers* buffers)
    : spec_(spec), view_(view), buf_(buffers), in_(spec, view->size()) {
  n_ = view->size();
  me_ = view->rank;
  root_ = static_cast<int>(spec.rootDraw % static_cast<uint64_t>(n_));
  es_ = coll::dataTypeSize(spec.type);
  if (isReduction(spec.kind) && spec.op != kPreMulSum) redOp_ = static_cast<collRedOp_t>(spec.op);
}

std::string Call::prepare() {
  layOut();
  if (!isReduction(spec_.kind) || spec_.op != kPreMulSum) return "";
  in_.scalar(scalar_, view_->members[me_]);
  auto residence = spec_.scalarImmediate ? collScalarHostImmediate : collScalarDevice;
  collResult_t rc = collRedOpCreatePreMulSum(&redOp_, scalar_, spec_.type, residence, view_->comm);
  if (rc != collSuccess) return std::string("collRedOpCreatePreMulSum: ") + collGetLastError(view_->comm);
  madeOp_ = true;
  // An immediate scalar was read already: what the buffer holds now must not matter.
  if (spec_.scalarImmediate) std::memset(scalar_, 0x7b, sizeof(scalar_));
  return "";
}

std::string Call::release() {
  if (!madeOp_) return "";
  madeOp_ = false;
  if (collRedOpDestroy(redOp_, view_->comm) != collSuccess)
    return std::string("collRedOpDestroy: ") + collGetLastError(view_->comm);
  return "";
}

size_t Call::pairCount(int srcRank, int dstRank) const {
  uint64_t h = mix(spec_.dataSeed ^ mix(static_cast<uint64_t>(view_->members[srcRank]) * 4099u +
                                        static_cast<uint64_t>(view_->members[dstRank])));
  return static_cast<size_t>(h % (spec_.count + 1));
}

size_t Call::sendOffset(int srcRank, int dstRank) const {
  size_t off = 0;
  for (int j = 0; j < dstRank; ++j) off += pairCount(srcRank, j);
  return off;
}

size_t Call::recvOffset(int srcRank) const {
  size_t off = 0;
  for (int i = 0; i < srcRank; ++i) off += pairCount(i, me_);
  return off;
}

bool Call::corrupt() {
  if (outElems_ == 0 || es_ == 0) return false;
  out_[outElems_ * es_ / 2] ^= 0x10;
  return true;
}

size_t Call::payloadBytes() const {
  size_t c = spec_.count * es_;
  switch (spec_.kind) {
    case Kind::kAllGather:
    case Kind::kReduceScatter:
    case Kind::kAlltoAll:
    case Kind::kGather:
    case Kind::kScatter: return c * static_cast<size_t>(n_);
    case Kind::kAlltoAllv: return sendOffset(me_, n_) * es_;
    default: return c;
  }
}

// One buffer of count elements in, one out: allreduce, reduce, broadcast, send/recv. In
// place, the input is copied into the receive buffer, which is both arguments.
void Call::layOutFlat() {
  unsigned char* send = buf_->send.data();
  unsigned char* recv = buf_->recv.data();
  const size_t c = spec_.count;
  const bool isRoot = me_ == root_;
  const bool hasInput = spec_.kind != Kind::kBroadcast || isRoot;
  const int src = spec_.kind == Kind::kBroadcast ? view_->members[root_] : view_->members[me_];
  if (hasInput) in_.fill(send, src, 0, c);
  writeCanary(recv, c * es_);
  if (spec_.inPlace && hasInput) std::memcpy(recv, send, c * es_);
  sendArg_ = spec_.inPlace ? recv : send;
  keptElems_ = spec_.inPlace || !hasInput ? 0 : c;
  outUntouched_ = spec_.kind == Kind::kReduce && !isRoot && !spec_.inPlace;
  outElems_ = c;
  guard_ = recv + c * es_;
}

// One block per rank on one side at least: allgather, reduce-scatter, alltoall(v),
// gather, scatter.
void Call::layOutBlocks() {
  unsigned char* send = buf_->send.data();
  unsigned char* recv = buf_->recv.data();
  const int self = view_->members[me_], rootWorld = view_->members[root_];
  const bool isRoot = me_ == root_, place = spec_.inPlace;
  const size_t c = spec_.count, nc = c * static_cast<size_t>(n_), block = c * es_;
  switch (spec_.kind) {
    case Kind::kAllGather:
    case Kind::kGather:
      writeCanary(recv, nc * es_);
      sendArg_ = place && (spec_.kind == Kind::kAllGather || isRoot) ? recv + me_ * block : send;
      in_.fill(sendArg_, self, 0, c);
      keptElems_ = sendArg_ == send ? c : 0;
      outElems_ = nc;
      outUntouched_ = spec_.kind == Kind::kGather && !isRoot;
      break;
    case Kind::kReduceScatter:
    case Kind::kAlltoAll:
      in_.fill(send, self, 0, nc);
      writeCanary(recv, nc * es_);
      outElems_ = spec_.kind == Kind::kAlltoAll ? nc : c;
      if (place && spec_.kind == Kind::kAlltoAll) std::memcpy(recv, send, nc * es_);
      if (place) recvArg_ = out_ = spec_.kind == Kind::kAlltoAll ? recv : send + me_ * block;
      if (place && spec_.kind == Kind::kAlltoAll) sendArg_ = recv;
      keptElems_ = place ? 0 : nc;
      break;
    case Kind::kScatter:
      if (isRoot) in_.fill(send, rootWorld, 0, nc);
      writeCanary(recv, block);
      if (place && isRoot) recvArg_ = out_ = send + me_ * block;
      keptElems_ = isRoot && !place ? nc : 0;
      break;
    default:  // alltoallv
      in_.fill(send, self, 0, sendOffset(me_, n_));
      keptElems_ = sendOffset(me_, n_);
      outElems_ = recvOffset(n_);
      writeCanary(recv, outElems_ * es_);
      break;
  }
  guard_ = out_ >= recv && out_ < recv + buf_->recv.size() ? recv + outElems_ * es_ : send + nc * es_;
}

void Call::layOut() {
  sendArg_ = buf_->send.data();
  recvArg_ = out_ = buf_->recv.data();
  outElems_ = spec_.count;
  outUntouched_ = false;
  keptElems_ = 0;
  bool flat = spec_.kind == Kind::kAllReduce || spec_.kind == Kind::kReduce || spec_.kind == Kind::kBroadcast ||
              spec_.kind == Kind::kSendRecv;
  if (flat) layOutFlat();
  else layOutBlocks();
  writeCanary(guard_, kGuard);
}

void Call::expected(unsigned char* out) const {
  const auto& m = view_->members;
  const size_t c = spec_.count, block = c * es_;
  switch (spec_.kind) {
    case Kind::kAllReduce:
    case Kind::kReduce:
      if (spec_.kind == Kind::kReduce && me_ != root_) return in_.fill(out, m[me_], 0, c);  // in place
      for (size_t e = 0; e < c; ++e) in_.expect(out, e, m, e);
      return;
    case Kind::kReduceScatter:
      for (size_t e = 0; e < c; ++e) in_.expect(out, e, m, me_ * c + e);
      return;
    case Kind::kBroadcast: return in_.fill(out, m[root_], 0, c);
    case Kind::kScatter: return in_.fill(out, m[root_], me_ * c, c);
    case Kind::kSendRecv: {
      int shift = static_cast<int>(spec_.shift % static_cast<uint64_t>(n_));
      return in_.fill(out, m[(me_ - shift + n_) % n_], 0, c);
    }
    case Kind::kAllGather:
    case Kind::kGather:
      for (int j = 0; j < n_; ++j) in_.fill(out + j * block, m[j], 0, c);
      return;
    case Kind::kAlltoAll:
      for (int j = 0; j < n_; ++j) in_.fill(out + j * block, m[j], me_ * c, c);
      return;
    default:
      for (int i = 0; i < n_; ++i) in_.fill(out + recvOffset(i) * es_, m[i], sendOffset(i, me_), pairCount(i, me_));
  }
}

std::string Call::compare(const unsigned char* got, const unsigned char* want, size_t elems, const char* what) const {
  if (std::memcmp(got, want, elems * es_) == 0) return "";
  size_t i = 0;
  while (std::memcmp(got + i * es_, want + i * es_, es_) == 0) ++i;
  size_t wrong = 0;
  for (size_t j = i; j < elems; ++j) wrong += std::memcmp(got + j * es_, want + j * es_, es_) != 0;
  return std::string(what) + ": element " + std::to_string(i) + " of " + std::to_string(elems) + " is " +
         elementText(got, i, spec_.type) + ", expected " + elementText(want, i, spec_.type) + " (" +
         std::to_string(wrong) + " wrong)";
}

std::string Call::verify(std::vector<unsigned char>& scratch) const {
  if (outUntouched_) {
    size_t at = brokenCanary(out_, outElems_ * es_);
    if (at != outElems_ * es_) return "receive buffer of a non-root written at byte " + std::to_string(at);
  } else {
    expected(scratch.data());
    std::string bad = compare(out_, scratch.data(), outElems_, "result");
    if (!bad.empty()) return bad;
  }
  size_t at = brokenCanary(guard_, kGuard);
  if (at != kGuard) return "written past the end of its output: guard byte " + std::to_string(at);
  if (keptElems_ == 0) return "";
  in_.fill(scratch.data(), view_->members[me_], 0, keptElems_);
  return compare(buf_->send.data(), scratch.data(), keptElems_, "send buffer changed");
}

collResult_t Call::issueP2p() {
  collComm_t comm = view_->comm;
  collDataType_t t = spec_.type;
  collResult_t rc = collGroupStart();
  if (rc != collSuccess) return rc;
  collResult_t first = collSuccess;
  auto note = [&](collResult_t r) { first = first == collSuccess ? r : first; };
  if (spec_.kind == Kind::kSendRecv) {
    int shift = static_cast<int>(spec_.shift % static_cast<uint64_t>(n_));
    note(collSend(sendArg_, spec_.count, t, (me_ + shift) % n_, comm, nullptr));
    note(collRecv(recvArg_, spec_.count, t, (me_ - shift + n_) % n_, comm, nullptr));
  } else {
    for (int j = 0; j < n_; ++j) {
      note(collSend(sendArg_ + sendOffset(me_, j) * es_, pairCount(me_, j), t, j, comm, nullptr));
      note(collRecv(recvArg_ + recvOffset(j) * es_, pairCount(j, me_), t, j, comm, nullptr));
    }
  }
  rc = collGroupEnd();
  return first != collSuccess ? first : rc;
}

collResult_t Call::issue() {
  collComm_t comm = view_->comm;
  const void* s = sendArg_;
  void* r = recvArg_;
  size_t c = spec_.count;
  collDataType_t t = spec_.type;
  switch (spec_.kind) {
    case Kind::kAllReduce: return collAllReduce(s, r, c, t, redOp_, comm, nullptr);
    case Kind::kBroadcast: return collBroadcast(s, r, c, t, root_, comm, nullptr);
    case Kind::kReduce: return collReduce(s, r, c, t, redOp_, root_, comm, nullptr);
    case Kind::kAllGather: return collAllGather(s, r, c, t, comm, nullptr);
    case Kind::kReduceScatter: return collReduceScatter(s, r, c, t, redOp_, comm, nullptr);
    case Kind::kAlltoAll: return collAlltoAll(s, r, c, t, comm, nullptr);
    case Kind::kGather: return collGather(s, r, c, t, root_, comm, nullptr);
    case Kind::kScatter: return collScatter(s, r, c, t, root_, comm, nullptr);
    default: return issueP2p();
  }
}

}  // namespace soak

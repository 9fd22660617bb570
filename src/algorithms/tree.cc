// Tree allreduce: reduce up a tree, broadcast the result down it, slice by slice.
//
// The trees are NCCL's double binary trees over hosts (graph.h: treesOverNodes), with a
// chain through the ranks of each host; the chain's head talks to the other hosts. A
// ring needs 2(n-1) hops per slice; a tree needs 2 x depth, depth ~ log2(hosts) + ranks
// per host - 1, which is what makes it win for small and middle sizes across many hosts.
//
// Each channel's piece of the buffer is cut into slices. Slice i travels on
// tree i % 2 when the two trees differ (two hosts or more), so every rank is inner in one
// tree and a leaf in the other and the work evens out. Per slice and rank:
//   up   (children c1..ck, combined in that order, the partial kept in the output):
//          leaf: send(src); one child: recvReduceSend; several: recvReduceCopy for the
//          first, recv(partial)ReduceCopy for the middle, recvReduceSend for the last;
//          the root ends with recvReduceCopy plus the final step (Avg's division)
//   down  non-root: recvCopySend to c1 (recv only for a leaf), then send to c2..ck;
//         root: send to every child.
// One lane runs both phases, so they are software-pipelined: the ups of the first
// kTreeDepth slices go first, then each slice's down is followed by the up of the slice
// kTreeDepth later. Every rank emits the same sequence, data flows up then down along
// tree edges and each FIFO is drained in order, so no rank can wait on a step that
// another rank has not got to without that rank waiting on something earlier: no
// deadlock, and kTreeDepth slices are in flight per lane.
//
// Floating-point sums combine in tree order, so results can differ from the ring's in
// the last bits (NCCL's trees do the same); every rank receives the root's one result.
#include "algorithms/algorithms.h"
#include "base/datatype.h"

namespace coll {

namespace {

constexpr size_t kTreeDepth = 4;

void upSteps(const OpDesc& od, uint16_t opIndex, Program& p, const ConnectorSet::TreeEdges& e, const char* src,
             char* dst, size_t bytes) {
  const size_t k = e.children.size();
  const bool root = e.parent < 0;
  auto add = [&](uint8_t flags, const char* from, SendConnector* s, RecvConnector* r, bool keepCached) {
    p.add(flags, od, opIndex, from, dst, bytes, s, r);
    if (keepCached && !p.steps.empty()) p.steps.back().flags &= static_cast<uint8_t>(~kStream);
  };
  if (k == 0) {  // a leaf (never the root: nranks >= 2)
    add(kSrc | kSend, src, e.up.get(), nullptr, false);
    return;
  }
  for (size_t j = 0; j < k; ++j) {
    const char* from = j == 0 ? src : dst;
    RecvConnector* r = e.fromChild[j].get();
    bool last = j + 1 == k;
    if (!last) add(kRecv | kSrc | kDst, from, nullptr, r, true);
    else if (root) add(kRecv | kSrc | kDst | kFinal, from, nullptr, r, false);
    else add(kRecv | kSrc | kSend, from, e.up.get(), r, false);
  }
}

void downSteps(const OpDesc& od, uint16_t opIndex, Program& p, const ConnectorSet::TreeEdges& e, char* dst,
               size_t bytes) {
  const size_t k = e.children.size();
  size_t first = 0;
  if (e.parent >= 0) {
    if (k == 0) {
      p.add(kRecv | kDst, od, opIndex, nullptr, dst, bytes, nullptr, e.down.get());
      return;
    }
    p.add(kRecv | kDst | kSend, od, opIndex, nullptr, dst, bytes, e.toChild[0].get(), e.down.get());
    first = 1;
  }
  // Compressed (od.encoding): the root keeps what its first send decodes to, the result every
  // other rank gets; later sends encode those values again, to the same bits
  // (kernels/compress.h).
  for (size_t j = first; j < k; ++j) {
    const uint8_t keep = first == 0 && j == 0 && od.encoding ? kDst : 0;
    p.add(kSrc | kSend | keep, od, opIndex, dst, keep ? dst : nullptr, bytes, e.toChild[j].get(), nullptr);
  }
}

}  // namespace

void buildTreeAllReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& progs) {
  const size_t es = dataTypeSize(od.dtype);
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  // Trees exist per host channel; the device set may have more channels than trees.
  const int nch = std::min(channelsFor(in, od, od.count * es), static_cast<int>(in.conns->trees.size()));
  for (int ch = 0; ch < nch; ++ch) {
    size_t b = partBegin(od.count, nch, ch) * es, e = partBegin(od.count, nch, ch + 1) * es;
    if (e == b) continue;
    Program& p = progs[static_cast<size_t>(ch)];
    const size_t slice = in.sliceBytes;
    const size_t nslices = (e - b + slice - 1) / slice;
    auto edges = [&](size_t i) -> const ConnectorSet::TreeEdges& {
      return in.conns->trees[static_cast<size_t>(ch)][in.twoTrees ? i % 2 : 0];
    };
    auto up = [&](size_t i) {
      size_t off = b + i * slice, len = std::min(slice, e - off);
      upSteps(od, opIndex, p, edges(i), src + off, dst + off, len);
    };
    auto down = [&](size_t i) {
      size_t off = b + i * slice, len = std::min(slice, e - off);
      downSteps(od, opIndex, p, edges(i), dst + off, len);
    };
    for (size_t i = 0; i < std::min(kTreeDepth, nslices); ++i) up(i);
    for (size_t i = 0; i < nslices; ++i) {
      down(i);
      if (i + kTreeDepth < nslices) up(i + kTreeDepth);
    }
  }
}

}  // namespace coll

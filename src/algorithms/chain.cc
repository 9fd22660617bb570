// Chain algorithms: broadcast and reduce, rooted anywhere.
//
// Both walk the ring. Broadcast starts at the root: the root sends (and copies into its
// own output when out of place), each following rank keeps and forwards, the last rank
// only keeps. Reduce ends at the root: the rank after the root sends its contribution,
// each following rank adds its own and forwards, and the root adds its own last and
// keeps the result (applying Avg's division). The buffer is split over channels and each
// channel's piece streams through the FIFO in slices, so a long chain is a pipeline:
// its time is one traversal of the buffer plus (n-1) slice latencies.
#include "algorithms/algorithms.h"
#include "base/datatype.h"

namespace coll {

namespace {

template <typename F>
void forEachPiece(const BuildInput& in, const OpDesc& od, F f) {
  const size_t es = dataTypeSize(od.dtype);
  const int nch = channelsFor(in, od, od.count * es);
  for (int ch = 0; ch < nch; ++ch) {
    size_t b = partBegin(od.count, nch, ch), e = partBegin(od.count, nch, ch + 1);
    f(ch, b * es, (e - b) * es);
  }
}

}  // namespace

void buildChainBroadcast(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& progs) {
  const int n = in.nranks;
  const int rootPos = in.ring->posOf[static_cast<size_t>(od.root)];
  const int pos = (in.ring->pos - rootPos + n) % n;  // distance from the root along the ring
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  forEachPiece(in, od, [&](int ch, size_t off, size_t bytes) {
    SendConnector* s = n > 1 ? in.conns->channels[static_cast<size_t>(ch)].send.get() : nullptr;
    RecvConnector* rv = n > 1 ? in.conns->channels[static_cast<size_t>(ch)].recv.get() : nullptr;
    uint8_t flags;
    if (pos == 0) flags = (n > 1 ? kSend : 0) | kSrc | (src != dst ? kDst : 0);
    else if (pos == n - 1) flags = kRecv | kDst;
    else flags = kRecv | kDst | kSend;
    if (flags == kSrc) return;  // single rank, in place: nothing to do
    progs[ch].add(flags, od, opIndex, src + off, dst + off, bytes, s, rv);
  });
}

void buildChainReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& progs) {
  const int n = in.nranks;
  const int rootPos = in.ring->posOf[static_cast<size_t>(od.root)];
  const int pos = (in.ring->pos - rootPos - 1 + 2 * n) % n;  // root is last (pos n-1)
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  forEachPiece(in, od, [&](int ch, size_t off, size_t bytes) {
    SendConnector* s = n > 1 ? in.conns->channels[static_cast<size_t>(ch)].send.get() : nullptr;
    RecvConnector* rv = n > 1 ? in.conns->channels[static_cast<size_t>(ch)].recv.get() : nullptr;
    uint8_t flags;
    if (n == 1) flags = kSrc | kDst | kFinal;
    else if (pos == 0) flags = kSrc | kSend;
    else if (pos == n - 1) flags = kRecv | kSrc | kDst | kFinal;
    else flags = kRecv | kSrc | kSend;
    progs[ch].add(flags, od, opIndex, src + off, dst + off, bytes, s, rv);
  });
}

}  // namespace coll

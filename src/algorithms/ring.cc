// Ring algorithms: allreduce, reduce-scatter and allgather.
//
// Data flows around the ring rank -> ring next on every channel. The buffer is cut into
// nranks blocks (the user's blocks for allgather and reduce-scatter), and every block
// into one piece per channel; channel ch handles piece ch of every block, so channels
// never share a connector and run concurrently.
//
// Positions, not ranks: the rank at ring position p (ring_layout.h ringOrder; p = r when ranks
// are placed contiguously) plays the part described here for rank r. Allreduce blocks
// are numbered by position; reduce-scatter and allgather blocks are the user's, so block
// k below is the block of the rank at position k.
//
// Reduce-scatter: in step j (0 <= j < n) rank r handles block r-1-j. Step 0 sends its own
// contribution; steps 1..n-2 receive the partial sum of that block from the left, add
// their own and pass it right; step n-1 receives block r, adds its own and keeps the
// result (applying Avg's division). Because rank r+1's step j consumes what rank r
// produces in its step j, all ranks work on the same step at once and the FIFO slices
// pipeline the blocks through the ring.
//
// Allreduce is that reduce-scatter whose last step also sends the finished block on,
// followed by an allgather: n-2 steps that receive a finished block, keep it and pass
// it on, and a last step that only keeps it. Every block is reduced along one chain and
// then copied, so all ranks end with identical bits.
//
// Allgather: step 0 copies the rank's own block into place and sends it; steps 1..n-2
// receive block r-j, keep it and forward it; step n-1 only keeps it.
//
// Exchange (2 ranks, BuildInput::exchangeMaxBytes: small device allreduces): each rank
// sends its contributions to both blocks and combines the peer's with its own, the
// peer's first as the ring does for the rank's own block. The ring's other block is
// combined the other way round on the peer, so only ops whose bits do not depend on the
// order take it: sums, products and averages (IEEE addition and multiplication commute
// exactly, a NaN is made canonical; min and max may not, for -0 and +0). One wait for the
// peer instead of the ring's two in a row (its reduced block comes back), for the same
// bytes on the wire. The slots are the ring's blocks, so that ranks that called other
// counts meet a size they did not expect (exchanges()).
//
// Loops: a step that only sends (step 0) must leave room in the FIFO, or every rank
// fills its successor's FIFO and then waits for room while holding the slot its
// predecessor waits for: a cycle. So each channel's piece of a block is cut into loops
// of at most kFifoSlots/2 slices (BuildInput::loopSlices: 2 where the ring crosses the network,
// faster there), and the whole step sequence runs once per loop, as NCCL does with its
// chunk steps.
#include <algorithm>

#include "algorithms/algorithms.h"
#include "base/datatype.h"
#include "kernels/compress.h"

namespace coll {

int channelsFor(const BuildInput& in, const OpDesc& od, size_t bytes) {
  const int64_t have = static_cast<int64_t>(in.conns->channels.size());
  const int64_t hi = od.maxChannels > 0 ? std::min<int64_t>(od.maxChannels, have) : have;
  const int64_t lo = std::min<int64_t>(od.minChannels > 0 ? od.minChannels : in.minChannels, hi);
  const int64_t want = static_cast<int64_t>(bytes) / in.channelMinBytes;
  return static_cast<int>(std::clamp<int64_t>(want, lo, hi));
}

namespace {

struct Piece {
  size_t offset;  // bytes from the start of the buffer
  size_t bytes;
};

// Piece `ch` of block k, blocks being given by (blockOffset, blockCount) in elements.
// Cuts inside the block fall on 16 bytes from the buffer's start (alignedCut), so every
// piece but a block's first starts where the vector path of a slice can take it; the
// block's own bounds stay (they decide each element's order of combination).
Piece piece(size_t blockOffsetElems, size_t blockCount, size_t elemSize, int nch, int ch) {
  const size_t b = blockOffsetElems, e = blockOffsetElems + blockCount;
  const size_t pb = alignedCut(b, e, nch, ch, elemSize), pe = alignedCut(b, e, nch, ch + 1, elemSize);
  return {pb * elemSize, (pe - pb) * elemSize};
}

// Piece `ch` of ring block k of an operation of `count` elements over n ranks.
Piece blockPiece(size_t count, int n, int k, size_t elemSize, int nch, int ch) {
  const size_t b = partBegin(count, n, static_cast<size_t>(k)), e = partBegin(count, n, static_cast<size_t>(k) + 1);
  return piece(b, e - b, elemSize, nch, ch);
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// Number of loops so that no piece of a block of at most `maxBlockCount` elements, cut
// in nch pieces and each piece in loops (cuts rounded up to 16 bytes, so a part may
// exceed an even share by alignedCutSlack elements), exceeds in.loopSlices slices in a loop:
// at most half a FIFO (the half-FIFO rule above).
size_t loopsFor(const BuildInput& in, size_t maxBlockCount, int nch, size_t elemSize) {
  const size_t slack = alignedCutSlack(elemSize);
  const size_t maxPiece = (maxBlockCount + static_cast<size_t>(nch) - 1) / static_cast<size_t>(nch) + slack;
  // Slots are multiples of 64 bytes (comm.cc), so a loop holds more than the slack.
  const size_t loopElems = in.sliceBytes * in.loopSlices / elemSize;
  const size_t room = loopElems > slack ? loopElems - slack : 1;
  return std::max<size_t>(1, (maxPiece + room - 1) / room);
}

// Sub-piece `loop` of `nloops` of a piece, cut on 16 bytes from the buffer's start.
Piece subPiece(Piece p, size_t elemSize, size_t nloops, size_t loop) {
  const size_t b = p.offset / elemSize, e = b + p.bytes / elemSize;
  const int n = static_cast<int>(nloops), i = static_cast<int>(loop);
  const size_t sb = alignedCut(b, e, n, i, elemSize), se = alignedCut(b, e, n, i + 1, elemSize);
  return {sb * elemSize, (se - sb) * elemSize};
}

// Channel 0's piece of a block starts where the block does, and the blocks keep the
// ring's bounds (they decide each element's order of combination): with a count that is
// not a multiple of 16 bytes x ranks, most start mid-vector, and that piece would run
// element by element in every step, holding its channel and so the operation back (the
// H100: 25000003 floats on 2 ranks at 19-35 GB/s, 25000000 at 219-230). From this many
// bytes per block, such a piece's head, up to the next 16 bytes, goes round the ring in a
// pass of its own and the rest starts on a vector; below it, the extra steps would cost
// more than they save. The bits are the same: every element stays in its block.
constexpr size_t kHeadPassMinBytes = 64 << 10;

// A piece's head, up to its first element on 16 bytes, and the rest.
Piece headOf(Piece p, size_t es) {
  const size_t b = p.offset / es;
  return {p.offset, (vectorStart(b, b + p.bytes / es, es) - b) * es};
}
Piece bodyOf(Piece p, size_t es) {
  const Piece h = headOf(p, es);
  return {p.offset + h.bytes, p.bytes - h.bytes};
}

// Only where both of a channel's block pieces fit half a loop (with the cuts' slack), so
// that an exchange is one loop: then no ring of another count sends slices of its sizes
// on as many channels (a ring slice of a larger count that equalled a block piece here
// would need a block of k loops of that size, more than a loop's half each), and ranks
// that called counts on either side of the limit fail on a size, as two rings do.
bool exchanges(const BuildInput& in, const OpDesc& od, int nch) {
  const bool commutes = od.op == collSum || od.op == collProd || od.op == collAvg;
  const size_t es = dataTypeSize(od.dtype), bytes = od.count * es;
  if (in.nranks != 2 || !commutes || od.encoding != kEncodingNone || bytes > in.exchangeMaxBytes) return false;
  const auto pieces = static_cast<size_t>(nch);
  const size_t maxPiece = (partBegin(od.count, 2, 1) + pieces - 1) / pieces * es + 16;
  return maxPiece <= in.sliceBytes * in.loopSlices / 2;
}

// Per channel: this rank's contributions to both blocks sent (the ring's first block,
// then the rank's own), then the peer's, as they come, combined with this rank's into the
// output: four steps, one wait. At most a FIFO's half in flight each way (exchanges()).
void buildExchange(const BuildInput& in, const OpDesc& od, uint16_t opIndex, int nch, std::vector<Program>& progs) {
  const int r = in.ring->pos;
  const size_t es = dataTypeSize(od.dtype);
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  for (int ch = 0; ch < nch; ++ch) {
    SendConnector* s = in.conns->channels[static_cast<size_t>(ch)].send.get();
    RecvConnector* rv = in.conns->channels[static_cast<size_t>(ch)].recv.get();
    auto step = [&](uint8_t flags, int k) {
      const Piece p = blockPiece(od.count, 2, k, es, nch, ch);
      progs[ch].add(flags, od, opIndex, src + p.offset, dst + p.offset, p.bytes, s, rv);
    };
    step(kSrc | kSend, 1 - r);
    step(kSrc | kSend, r);
    step(kRecv | kSrc | kDst | kFinal, r);  // the peer sends block r first
    step(kRecv | kSrc | kDst | kFinal, 1 - r);
  }
}

}  // namespace

void buildRingAllReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& progs) {
  const int n = in.nranks, r = in.ring->pos;
  const size_t es = dataTypeSize(od.dtype);
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  const int nch = channelsFor(in, od, od.count * es);
  if (n == 1) {
    for (int ch = 0; ch < nch; ++ch) {
      Piece p = piece(0, od.count, es, nch, ch);
      progs[ch].add(kSrc | kDst | kFinal, od, opIndex, src + p.offset, dst + p.offset, p.bytes, nullptr, nullptr);
    }
    return;
  }
  if (exchanges(in, od, nch)) return buildExchange(in, od, opIndex, nch, progs);
  auto block = [&](int k, int ch) { return blockPiece(od.count, n, k, es, nch, ch); };
  bool headPass = false;
  for (int k = 1; k < n && od.count / n * es >= kHeadPassMinBytes; ++k)
    headPass |= partBegin(od.count, n, k) * es % 16 != 0;
  const size_t nloops = loopsFor(in, partBegin(od.count, n, 1), nch, es);  // block 0 is largest
  for (int ch = 0; ch < nch; ++ch) {
    Program& pg = progs[ch];
    SendConnector* s = in.conns->channels[static_cast<size_t>(ch)].send.get();
    RecvConnector* rv = in.conns->channels[static_cast<size_t>(ch)].recv.get();
    // One pass round the ring: block k's part pieceOf(k) reduced, then gathered.
    auto pass = [&](auto pieceOf) {
      auto step = [&](uint8_t flags, int k) {
        Piece p = pieceOf(mod(k, n));
        pg.add(flags, od, opIndex, src + p.offset, dst + p.offset, p.bytes, s, rv);
      };
      step(kSrc | kSend, r - 1);
      for (int j = 1; j < n - 1; ++j) step(kRecv | kSrc | kSend, r - 1 - j);
      step(kRecv | kSrc | kDst | kSend | kFinal, r);
      for (int j = 1; j < n - 1; ++j) step(kRecv | kDst | kSend, r - j);
      step(kRecv | kDst, r - (n - 1));
    };
    const bool heads = headPass && ch == 0;
    if (heads) pass([&](int k) { return headOf(block(k, 0), es); });
    for (size_t loop = 0; loop < nloops; ++loop)
      pass([&](int k) { return subPiece(heads ? bodyOf(block(k, 0), es) : block(k, ch), es, nloops, loop); });
  }
}

// Calls f(program, send, recv, piece) for every channel and loop of an operation whose
// buffer is nranks user blocks of od.count elements (reduce-scatter, allgather); the
// piece is a byte range within a block, the same in every block.
template <typename F>
void forEachBlockPiece(const BuildInput& in, const OpDesc& od, std::vector<Program>& progs, F f) {
  const int n = in.nranks;
  const size_t es = dataTypeSize(od.dtype);
  const int nch = channelsFor(in, od, od.count * es * n);
  const size_t nloops = n > 1 ? loopsFor(in, od.count, nch, es) : 1;
  for (int ch = 0; ch < nch; ++ch) {
    SendConnector* s = n > 1 ? in.conns->channels[static_cast<size_t>(ch)].send.get() : nullptr;
    RecvConnector* rv = n > 1 ? in.conns->channels[static_cast<size_t>(ch)].recv.get() : nullptr;
    const Piece whole = piece(0, od.count, es, nch, ch);
    for (size_t loop = 0; loop < nloops; ++loop) f(progs[ch], s, rv, subPiece(whole, es, nloops, loop));
  }
}

// The user's block of the rank at ring position k (mod n).
size_t userBlock(const BuildInput& in, int k) { return static_cast<size_t>(in.ring->rankAt(k)); }

void buildRingReduceScatter(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& progs) {
  const int n = in.nranks, r = in.ring->pos;
  const size_t blockBytes = od.bytes();
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  forEachBlockPiece(in, od, progs, [&](Program& pg, SendConnector* s, RecvConnector* rv, Piece mine) {
    auto srcOf = [&](int k) { return src + userBlock(in, k) * blockBytes + mine.offset; };
    if (n == 1) {
      pg.add(kSrc | kDst | kFinal, od, opIndex, srcOf(0), dst + mine.offset, mine.bytes, s, rv);
      return;
    }
    pg.add(kSrc | kSend, od, opIndex, srcOf(r - 1), nullptr, mine.bytes, s, rv);
    for (int j = 1; j < n - 1; ++j)
      pg.add(kRecv | kSrc | kSend, od, opIndex, srcOf(r - 1 - j), nullptr, mine.bytes, s, rv);
    pg.add(kRecv | kSrc | kDst | kFinal, od, opIndex, srcOf(r), dst + mine.offset, mine.bytes, s, rv);
  });
}

void buildRingAllGather(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& progs) {
  const int n = in.nranks, r = in.ring->pos;
  const size_t blockBytes = od.bytes();
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  forEachBlockPiece(in, od, progs, [&](Program& pg, SendConnector* s, RecvConnector* rv, Piece mine) {
    auto dstOf = [&](int k) { return dst + userBlock(in, k) * blockBytes + mine.offset; };
    uint8_t first = n > 1 ? (kSrc | kDst | kSend) : (kSrc | kDst);
    pg.add(first, od, opIndex, src + mine.offset, dstOf(r), mine.bytes, s, rv);
    for (int j = 1; j < n - 1; ++j) pg.add(kRecv | kDst | kSend, od, opIndex, nullptr, dstOf(r - j), mine.bytes, s, rv);
    if (n > 1) pg.add(kRecv | kDst, od, opIndex, nullptr, dstOf(r - (n - 1)), mine.bytes, s, rv);
  });
}

}  // namespace coll

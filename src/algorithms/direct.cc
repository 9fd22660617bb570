// Direct allreduce, for device ranks that share one address space and one GPU: each rank
// reduces its own block straight from every rank's input into every rank's output, with
// no FIFO slot in between. A ring allreduce of S bytes on two ranks of one GPU moves 8S
// through memory (input, slots and output on both sides); this moves 4S, the least an
// allreduce can (docs/PERFORMANCE.md, the device path's targets). Beyond two ranks,
// sums and averages of float, fp16 and bf16 read each element of every input and write
// every output in one pass (device_slice.h deviceSliceDirect): 2nS in all, 16S at 8 ranks
// against the ring's 44S; other types and ops pass partial sums through memory (~31S
// at 8 ranks).
//
// Unlike the ring, a rank writes into its peers' buffers: a rank whose call failed or
// was aborted may still be written to by peers in the operation until their
// communicators fail or are aborted too (their lanes look at the abort word once per
// slice of a direct reduction, 8 FIFO slices long), as with NCCL's direct peer writes.
//
// Per channel, three parts, all over the channel's ring connectors:
//   1. addresses: n - 1 rounds of "send an entry, receive one" pass every rank's buffer
//      addresses and byte count around the ring (kDirect|kSend, kDirect|kRecv; entry j of
//      a lane's table is the rank j ring positions on). The kernel of a peer that sent its
//      entry has started, so everything its stream held before the operation is done.
//   2. reduce: piece `ch` of this rank's block (blocks numbered by ring position, as the
//      ring's), combined in the ring's order so the bits equal the ring's (device_lane.h
//      deviceDirect), written to every rank's output (kDirect|kSrc|kDst|kFinal).
//   3. barrier: n - 1 rounds of a token sent and one received, after which every rank
//      has finished writing into this rank's output and reading its input, so the
//      operation may end.
// Which operations take it: group.cc routeFor (COLL_DEVICE_DIRECT_MIN_BYTES).
#include "algorithms/algorithms.h"
#include "base/datatype.h"

namespace coll {

namespace {

// An address step of round `round`: sends the entry received the round before (this
// rank's own in round 0), or keeps the entry of the rank round + 1 positions back.
void addAddressRound(Program& pg, const OpDesc& od, uint16_t opIndex, int n, int round, SendConnector* s,
                     RecvConnector* rv) {
  const size_t bytes = od.bytes();
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  pg.add(kDirect | kSend, od, opIndex, src, dst, bytes, s, rv);
  pg.steps.back().addrEntry = static_cast<uint8_t>((n - round) % n);
  pg.add(kDirect | kRecv, od, opIndex, src, dst, bytes, s, rv);
  pg.steps.back().addrEntry = static_cast<uint8_t>(n - 1 - round);
}

}  // namespace

bool directFits(int nranks) { return nranks >= 2 && nranks <= kMaxDirectRanks; }

void buildDirectAllReduce(const BuildInput& in, const OpDesc& od, uint16_t opIndex, std::vector<Program>& progs) {
  const int n = in.nranks, r = in.ring->pos;
  const size_t es = dataTypeSize(od.dtype);
  const char* src = static_cast<const char*>(od.sendbuff);
  char* dst = static_cast<char*>(od.recvbuff);
  const int nch = channelsFor(in, od, od.count * es);
  const size_t b = partBegin(od.count, static_cast<size_t>(n), static_cast<size_t>(r));
  const size_t e = partBegin(od.count, static_cast<size_t>(n), static_cast<size_t>(r) + 1);
  for (int ch = 0; ch < nch; ++ch) {
    Program& pg = progs[static_cast<size_t>(ch)];
    SendConnector* s = in.conns->channels[static_cast<size_t>(ch)].send.get();
    RecvConnector* rv = in.conns->channels[static_cast<size_t>(ch)].recv.get();
    for (int round = 0; round < n - 1; ++round) addAddressRound(pg, od, opIndex, n, round, s, rv);
    // Channel 0's piece starts with the block, maybe mid-vector: its head goes first, alone
    // (no step where the piece is aligned), as the ring's does (ring.cc kHeadPassMinBytes).
    const size_t pb = alignedCut(b, e, nch, ch, es), pe = alignedCut(b, e, nch, ch + 1, es);
    const size_t mid = vectorStart(pb, pe, es);
    pg.add(kDirect | kSrc | kDst | kFinal, od, opIndex, src + pb * es, dst + pb * es, (mid - pb) * es, nullptr,
           nullptr);
    pg.add(kDirect | kSrc | kDst | kFinal, od, opIndex, src + mid * es, dst + mid * es, (pe - mid) * es, nullptr,
           nullptr);
    for (int round = 0; round < n - 1; ++round) pg.addToken(opIndex, s, rv);
  }
}

}  // namespace coll

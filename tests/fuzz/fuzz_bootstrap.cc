// libFuzzer target: the bootstrap's wire messages (bootstrap/wire.h) as the root and the
// ranks receive them: a join, a root reply, the peer table, a hello, a frame header, a
// rank's operation state and collstat's report header (the hang report). The
// first byte picks the message; the rest is its bytes (zero-padded to its size, or as they
// are when bit 7 is set, to reach the size checks).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "fuzz_input.h"

using namespace coll;
using coll::fuzz::padded;
using coll::fuzz::require;

namespace {

template <typename T>
std::vector<char> bytesFor(const uint8_t* data, size_t n, bool raw) {
  return raw ? std::vector<char>(data, data + n) : padded(data, n, sizeof(T));
}

// A parsed message's strings are terminated: using them as C strings stays inside.
void useText(const char* s, size_t cap) { require(strnlen(s, cap) < cap, "text field not terminated"); }

void checkPeer(const PeerInfo& p) {
  useText(p.hostId, sizeof(p.hostId));
  useText(p.hostname, sizeof(p.hostname));
  useText(p.busId, sizeof(p.busId));
  (void)p.bootAddr.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t pick = data[0] & 0x7f, nranks = static_cast<uint8_t>(1 + (data[0] >> 4 & 7));
  const bool raw = data[0] & 0x80;
  ++data;
  --size;
  switch (pick % 8) {
    case 0: {
      JoinMsg j;
      auto b = bytesFor<JoinMsg>(data, size, raw);
      if (parseJoinMsg(b.data(), b.size(), &j).ok()) {
        require(j.nranks > 0 && j.nranks <= kMaxRanks && j.rank >= 0 && j.rank < j.nranks, "join ranks");
        useText(j.text, sizeof(j.text));
        useText(j.info.hostname, sizeof(j.info.hostname));
      }
      break;
    }
    case 1: {
      RootReply r;
      auto b = bytesFor<RootReply>(data, size, raw);
      if (parseRootReply(b.data(), b.size(), nranks, &r).ok()) {
        useText(r.text, sizeof(r.text));
        useText(r.rootHostId, sizeof(r.rootHostId));
        if (r.kind == RootMsg::kRankFailed) require(r.rank >= 0 && r.rank < nranks, "root reply rank");
      }
      break;
    }
    case 2: {
      std::vector<PeerInfo> table;
      auto b = raw ? std::vector<char>(data, data + size) : padded(data, size, sizeof(PeerInfo) * nranks);
      if (parsePeerTable(b.data(), b.size(), nranks, &table).ok()) {
        require(table.size() == nranks, "peer table size");
        for (const PeerInfo& p : table) checkPeer(p);
      }
      break;
    }
    case 3: {
      HelloMsg h;
      auto b = bytesFor<HelloMsg>(data, size, raw);
      if (parseHello(b.data(), b.size(), nranks, &h).ok()) require(h.fromRank >= 0 && h.fromRank < nranks, "hello");
      break;
    }
    case 4: {
      FrameHeader f;
      auto b = bytesFor<FrameHeader>(data, size, raw);
      if (parseFrameHeader(b.data(), b.size(), &f).ok()) {
        require(f.len <= kMaxFrameBytes, "frame length");
        std::vector<char> body(f.len);  // what readFrame allocates next
      }
      break;
    }
    case 5: {
      OpStateMsg m;
      auto b = bytesFor<OpStateMsg>(data, size, raw);
      if (parseOpState(b.data(), b.size(), nranks, &m).ok()) {
        useText(m.what, sizeof(m.what));
        useText(m.where, sizeof(m.where));
        require(m.waitPeer >= -1 && m.waitPeer < nranks && m.nOps <= kMaxReportOps, "operation state");
      }
      break;
    }
    case 6: {
      StatReplyHeader h;
      auto b = bytesFor<StatReplyHeader>(data, size, raw);
      if (parseStatReplyHeader(b.data(), b.size(), &h).ok()) {
        require(h.len <= kMaxReportBytes, "report length");
        std::string text(h.len, '\0');  // what queryHangReport allocates next
      }
      break;
    }
    default: {
      PeerInfo p;
      auto b = bytesFor<PeerInfo>(data, size, raw);
      if (parsePeerInfo(b.data(), b.size(), &p).ok()) checkPeer(p);
      break;
    }
  }
  return 0;
}

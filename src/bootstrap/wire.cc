#include "bootstrap/wire.h"

#include <cstring>
#include <string>

namespace coll {

namespace {

template <typename T>
Status copyExact(const void* bytes, size_t n, T* out, const char* what) {
  if (n != sizeof(T))
    return remoteError(std::string(what) + " of " + std::to_string(n) + " bytes, expected " +
                       std::to_string(sizeof(T)));
  std::memcpy(out, bytes, sizeof(T));
  return okStatus();
}

// A fixed-size text field must hold its terminating NUL: code after the parse uses it as a
// C string.
template <size_t N>
Status checkText(const char (&field)[N], const char* what) {
  if (std::memchr(field, 0, N) == nullptr)
    return remoteError(std::string(what) + " is not NUL-terminated within its " + std::to_string(N) + " bytes");
  return okStatus();
}

Status checkMagic(uint32_t magic, uint32_t want, const char* what) {
  if (magic == want) return okStatus();
  return remoteError(std::string(what) + " has magic " + std::to_string(magic) + ", expected " + std::to_string(want) +
                     " (not this library, or another version)");
}

Status checkRank(int32_t rank, int nranks, const char* what) {
  if (rank >= 0 && rank < nranks) return okStatus();
  return remoteError(std::string(what) + " " + std::to_string(rank) + " is not in 0.." + std::to_string(nranks - 1));
}

bool validKind(RootMsg k) { return static_cast<uint32_t>(k) >= 1 && static_cast<uint32_t>(k) <= 9; }

Status checkPeerInfo(const PeerInfo& p) {
  COLL_CHECK(checkSockAddr(p.bootAddr, "peer info: bootstrap address"));
  COLL_CHECK(checkText(p.hostId, "peer info: host id"));
  COLL_CHECK(checkText(p.hostname, "peer info: hostname"));
  COLL_CHECK(checkText(p.busId, "peer info: bus id"));
  if (p.cudaDev < -1) return remoteError("peer info: CUDA device " + std::to_string(p.cudaDev));
  if (p.ringPos < -1) return remoteError("peer info: ring position " + std::to_string(p.ringPos));
  return okStatus();
}

}  // namespace

Status checkSockAddr(const SockAddr& a, const char* what) {
  if (a.family() != AF_INET && a.family() != AF_INET6)
    return remoteError(std::string(what) + " has address family " + std::to_string(a.family()) +
                       ", expected IPv4 or IPv6");
  return okStatus();
}

Status parseUniqueId(const void* bytes, size_t n, UniqueIdData* out) {
  if (n < sizeof(UniqueIdData))
    return invalidArgument("unique id of " + std::to_string(n) + " bytes, expected " +
                           std::to_string(sizeof(UniqueIdData)));
  UniqueIdData id;
  std::memcpy(&id, bytes, sizeof(id));
  if (id.magic != kIdMagic) return invalidArgument("the unique id was not made by collGetUniqueId (bad magic)");
  if (id.flags & ~kIdFromEnv) return invalidArgument("the unique id has unknown flags " + std::to_string(id.flags));
  Status addr = checkSockAddr(id.root, "the unique id's root");
  if (!addr.ok()) return invalidArgument(addr.message());
  if (id.root.port() == 0) return invalidArgument("the unique id's root " + id.root.str() + " has port 0");
  *out = id;
  return okStatus();
}

Status parsePeerInfo(const void* bytes, size_t n, PeerInfo* out) {
  PeerInfo p;
  COLL_RETURN_IF_FAILED(copyExact(bytes, n, &p, "peer info"));
  COLL_RETURN_IF_FAILED(checkPeerInfo(p));
  *out = p;
  return okStatus();
}

Status parseJoinMsg(const void* bytes, size_t n, JoinMsg* out) {
  JoinMsg j;
  COLL_RETURN_IF_FAILED(copyExact(bytes, n, &j, "join message"));
  COLL_RETURN_IF_FAILED(checkMagic(j.magic, kWireMagic, "join message"));
  if (j.kind != RootMsg::kJoin && j.kind != RootMsg::kRankFailed)
    return remoteError("join message of kind " + std::to_string(static_cast<uint32_t>(j.kind)));
  if (j.nranks <= 0 || j.nranks > kMaxRanks)
    return remoteError("join message: nranks " + std::to_string(j.nranks) + " is not in 1.." +
                       std::to_string(kMaxRanks));
  COLL_RETURN_IF_FAILED(checkRank(j.rank, j.nranks, "join message: rank"));
  if (j.joinTimeoutMs < 0) return remoteError("join message: timeout " + std::to_string(j.joinTimeoutMs) + " ms");
  COLL_RETURN_IF_FAILED(checkText(j.text, "join message: text"));
  Status info = checkPeerInfo(j.info);
  // A rank that failed before it joined may have no listener address to tell.
  if (!info.ok() && !(j.kind == RootMsg::kRankFailed && j.info.bootAddr.family() == 0)) return info.prefix("join: ");
  if (j.kind == RootMsg::kRankFailed) COLL_RETURN_IF_FAILED(checkText(j.info.hostname, "join message: hostname"));
  *out = j;
  return okStatus();
}

Status parseRootReply(const void* bytes, size_t n, int nranks, RootReply* out) {
  RootReply r;
  COLL_RETURN_IF_FAILED(copyExact(bytes, n, &r, "root message"));
  COLL_RETURN_IF_FAILED(checkMagic(r.magic, kWireMagic, "root message"));
  if (!validKind(r.kind)) return remoteError("root message of kind " + std::to_string(static_cast<uint32_t>(r.kind)));
  if (r.kind == RootMsg::kRankFailed || r.kind == RootMsg::kRankLeft || r.kind == RootMsg::kTable ||
      (r.kind == RootMsg::kReport && r.flags != 0))
    COLL_RETURN_IF_FAILED(checkRank(r.rank, nranks, "root message: rank"));
  COLL_RETURN_IF_FAILED(checkText(r.rootHostId, "root message: host id"));
  COLL_RETURN_IF_FAILED(checkText(r.text, "root message: text"));
  if (r.flags & ~kReportTimedOut) return remoteError("root message with unknown flags " + std::to_string(r.flags));
  *out = r;
  return okStatus();
}

Status parsePeerTable(const void* bytes, size_t n, int nranks, std::vector<PeerInfo>* out) {
  if (nranks <= 0 || nranks > kMaxRanks) return remoteError("peer table for nranks " + std::to_string(nranks));
  if (n != sizeof(PeerInfo) * static_cast<size_t>(nranks))
    return remoteError("peer table of " + std::to_string(n) + " bytes for " + std::to_string(nranks) + " ranks");
  std::vector<PeerInfo> table(static_cast<size_t>(nranks));
  const char* p = static_cast<const char*>(bytes);
  for (int r = 0; r < nranks; ++r) {
    Status st = parsePeerInfo(p + sizeof(PeerInfo) * static_cast<size_t>(r), sizeof(PeerInfo), &table[r]);
    if (!st.ok()) return st.prefix("rank " + std::to_string(r) + "'s entry in the peer table: ");
  }
  *out = std::move(table);
  return okStatus();
}

Status parseHello(const void* bytes, size_t n, int nranks, HelloMsg* out) {
  HelloMsg h;
  COLL_RETURN_IF_FAILED(copyExact(bytes, n, &h, "hello"));
  COLL_RETURN_IF_FAILED(checkMagic(h.magic, kWireMagic, "hello"));
  COLL_RETURN_IF_FAILED(checkRank(h.fromRank, nranks, "hello: rank"));
  *out = h;
  return okStatus();
}

Status parseFrameHeader(const void* bytes, size_t n, FrameHeader* out) {
  FrameHeader h;
  COLL_RETURN_IF_FAILED(copyExact(bytes, n, &h, "frame header"));
  if (h.len > kMaxFrameBytes)
    return remoteError("frame of " + std::to_string(h.len) + " bytes (tag " + std::to_string(h.tag) +
                       ") exceeds the limit of " + std::to_string(kMaxFrameBytes));
  *out = h;
  return okStatus();
}

Status parseOpState(const void* bytes, size_t n, int nranks, OpStateMsg* out) {
  OpStateMsg m;
  COLL_RETURN_IF_FAILED(copyExact(bytes, n, &m, "operation state"));
  if (static_cast<uint32_t>(m.phase) > static_cast<uint32_t>(OpPhase::kTimedOut))
    return remoteError("operation state: phase " + std::to_string(static_cast<uint32_t>(m.phase)));
  if (static_cast<uint32_t>(m.why) > static_cast<uint32_t>(ReportWhy::kFailed))
    return remoteError("operation state: reason " + std::to_string(static_cast<uint32_t>(m.why)));
  if (m.p2p != 0 && m.p2p != 1) return remoteError("operation state: p2p " + std::to_string(m.p2p));
  if (m.nOps > kMaxReportOps) return remoteError("operation state: " + std::to_string(m.nOps) + " operations");
  if (m.waitPeer != -1) COLL_RETURN_IF_FAILED(checkRank(m.waitPeer, nranks, "operation state: waits for rank"));
  if (!(m.seconds >= 0 && m.seconds < 1e9)) return remoteError("operation state: " + std::to_string(m.seconds) + " s");
  COLL_RETURN_IF_FAILED(checkText(m.what, "operation state: operation"));
  COLL_RETURN_IF_FAILED(checkText(m.where, "operation state: where"));
  *out = m;
  return okStatus();
}

Status parseStatReplyHeader(const void* bytes, size_t n, StatReplyHeader* out) {
  StatReplyHeader h;
  COLL_RETURN_IF_FAILED(copyExact(bytes, n, &h, "report header"));
  COLL_RETURN_IF_FAILED(checkMagic(h.magic, kWireMagic, "report header"));
  if (h.len > kMaxReportBytes)
    return remoteError("report of " + std::to_string(h.len) + " bytes (at most " + std::to_string(kMaxReportBytes) +
                       ")");
  *out = h;
  return okStatus();
}

}  // namespace coll

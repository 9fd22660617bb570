// Wire formats of the bootstrap: the unique id's contents, what a rank tells the root
// when it joins, and the frames exchanged afterwards. All fixed-size PODs; every process
// of a job runs the same library build, so host byte order is used.
//
// Bytes from outside (a socket, the application's unique id) become one of these only
// through the parse* functions at the bottom: they check every length, count, index,
// enum and string against its limit, so the code after them may trust the fields. The
// fuzz targets (tests/fuzz/) call the same functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/socket.h"
#include "collectives/collectives.h"

namespace coll {

constexpr uint32_t kIdMagic = 0xC011EC71u;
constexpr uint32_t kWireMagic = 0xC011B008u;  // a new value for every change of a message's layout

struct UniqueIdData {
  uint32_t magic;
  uint32_t flags;  // kIdFromEnv: rank 0 hosts the root at `root`
  AuthKey key;     // every connection of the communicator proves it (auth.h)
  SockAddr root;
};
constexpr uint32_t kIdFromEnv = 1;
static_assert(sizeof(UniqueIdData) <= COLL_UNIQUE_ID_BYTES, "unique id too small");

// What every rank publishes about itself at init.
struct PeerInfo {
  SockAddr bootAddr;  // bootstrap listener
  char hostId[96];    // hostname + boot id, or COLL_HOSTID
  char hostname[64];
  int32_t pid;
  int32_t cudaDev;       // -1 for host ranks
  char busId[16];        // PCI bus id of that device ("" for host ranks): one GPU across processes
  int32_t ringPos = -1;  // that GPU's place in its host's best GPU ring (-1: unknown, host ranks)
};

// Whether two ranks run on one host; in one process of it; on one GPU of it (its bus id
// known and the same).
inline bool sameHost(const PeerInfo& a, const PeerInfo& b) {
  return std::strncmp(a.hostId, b.hostId, sizeof(a.hostId)) == 0;
}
inline bool sameProcess(const PeerInfo& a, const PeerInfo& b) { return sameHost(a, b) && a.pid == b.pid; }
inline bool sameGpu(const PeerInfo& a, const PeerInfo& b) {
  return sameHost(a, b) && a.busId[0] && std::strncmp(a.busId, b.busId, sizeof(a.busId)) == 0;
}

enum class RootMsg : uint32_t {
  kJoin = 1,
  kTable = 2,
  kError = 3,
  kRankFailed = 4,
  kBye = 5,
  kRankLeft = 6,
  kState = 7,       // rank -> root: this rank's OpStateMsg follows (the hang report)
  kStateQuery = 8,  // root -> rank: send your kState
  kReport = 9,      // root -> rank: the hang report's finding in text; flags kReportTimedOut
};
// kReport flags: the report was asked by a rank whose operation timed out (every rank's
// communicator fails with collTimeout). A failure's finding fails nobody: a rank's own
// refusal (a group that does not fit its GPU) must not turn the others' into an echo.
constexpr uint32_t kReportTimedOut = 1;

// Rank -> root, first on its connection after the handshake (auth.h): kJoin, or kRankFailed from a rank that failed
// before it could join (text says why), so the root fails the others' init at once.
struct JoinMsg {
  uint32_t magic;
  RootMsg kind;
  int32_t rank;
  int32_t nranks;
  int32_t joinTimeoutMs;  // kJoin: how long this rank waits for the others (0: COLL_BOOTSTRAP_TIMEOUT_S)
  PeerInfo info;
  char text[256];
};

// Root -> rank. kTable is followed by nranks PeerInfo.
struct RootReply {
  uint32_t magic;
  RootMsg kind;
  int32_t rank;     // kRankFailed, kRankLeft: who; kReport: the rank that asked for it
  int32_t rootPid;  // the process hosting the root
  char rootHostId[96];
  uint32_t flags;  // kReport: kReportTimedOut
  char text[512];  // kError / kRankFailed / kRankLeft: explanation; kReport: the finding
};

// Where a rank stands in its operations, for the job-wide hang report (hang_report.h).
enum class OpPhase : uint32_t { kIdle = 0, kRunning = 1, kFailed = 2, kTimedOut = 3 };
// Why a rank sends its state: asked by the root, or asking for a report itself.
enum class ReportWhy : uint32_t { kAnswer = 0, kStalled = 1, kTimedOut = 2, kFailed = 3 };
struct OpStateMsg {
  uint64_t seq;   // running or failed: the launch's first operation; idle: the next one it will call
  uint32_t nOps;  // operations in that launch (a group's)
  OpPhase phase;
  ReportWhy why;
  int32_t waitPeer;  // the rank a stalled lane waits for, or -1
  // The signature of operation `seq` (idle: of the last one completed; kind -1: none yet),
  // which every rank must call alike.
  int32_t kind, dtype, op, root;
  uint64_t count;
  int32_t p2p;  // 1: a send/receive launch (peers and counts differ by design)
  int32_t pad;
  double seconds;   // time in this phase
  char what[160];   // that operation as the user called it ("collAllReduce #3 (count ...)")
  char where[512];  // running: where its lanes wait; failed: the error
};
constexpr uint32_t kMaxReportOps = 1u << 20;  // operations of one launch the wire may claim

// Root -> collstat: the report's length, then its text.
struct StatReplyHeader {
  uint32_t magic;
  uint32_t len;
};
constexpr uint32_t kMaxReportBytes = 1u << 20;

// First bytes on a rank-to-rank bootstrap connection after the handshake (auth.h).
struct HelloMsg {
  uint32_t magic;
  int32_t fromRank;
};
// Then frames: header + len bytes.
struct FrameHeader {
  uint64_t tag;
  uint64_t len;
};

// Limits on what the wire may say.
constexpr int kMaxRanks = 1 << 20;            // nranks of a communicator
constexpr uint64_t kMaxFrameBytes = 1 << 20;  // one bootstrap frame (the library sends <= 4 KiB)

// Each returns an error saying which field is wrong and its value; the caller prefixes who
// sent it. n must be the struct's size (a short read is the caller's error to report).
Status parseUniqueId(const void* bytes, size_t n, UniqueIdData* out);
// A bootstrap address: IPv4 or IPv6 with a port.
Status checkSockAddr(const SockAddr& a, const char* what);
Status parsePeerInfo(const void* bytes, size_t n, PeerInfo* out);
Status parseJoinMsg(const void* bytes, size_t n, JoinMsg* out);
// nranks: the communicator's, to check the rank a kRankFailed names.
Status parseRootReply(const void* bytes, size_t n, int nranks, RootReply* out);
// The table after a kTable reply: exactly nranks PeerInfo.
Status parsePeerTable(const void* bytes, size_t n, int nranks, std::vector<PeerInfo>* out);
Status parseHello(const void* bytes, size_t n, int nranks, HelloMsg* out);
Status parseFrameHeader(const void* bytes, size_t n, FrameHeader* out);
// nranks: the communicator's, to check the rank it waits for.
Status parseOpState(const void* bytes, size_t n, int nranks, OpStateMsg* out);
Status parseStatReplyHeader(const void* bytes, size_t n, StatReplyHeader* out);

}  // namespace coll

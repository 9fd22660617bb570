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
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/socket.h"
#include "collectives/collectives.h"

namespace coll {

constexpr uint32_t kIdMagic = 0xC011EC71u;
constexpr uint32_t kWireMagic = 0xC011B007u;

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

enum class RootMsg : uint32_t { kJoin = 1, kTable = 2, kError = 3, kRankFailed = 4, kBye = 5, kRankLeft = 6 };

// Rank -> root, first on its connection after the handshake (auth.h): kJoin, or kRankFailed from a rank that failed
// before it could join (text says why), so the root fails the others' init at once.
struct JoinMsg {
  uint32_t magic;
  RootMsg kind;
  int32_t rank;
  int32_t nranks;
  PeerInfo info;
  char text[256];
};

// Root -> rank. kTable is followed by nranks PeerInfo.
struct RootReply {
  uint32_t magic;
  RootMsg kind;
  int32_t rank;     // kRankFailed: who
  int32_t rootPid;  // the process hosting the root
  char rootHostId[96];
  char text[256];  // kError / kRankFailed: explanation
};

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

}  // namespace coll

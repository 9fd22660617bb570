// Authentication of the connections a rank accepts: every one proves it knows the
// communicator's key before anything else is read from it (docs/SECURITY.md has the
// security model: what this protects, and what it does not).
//
// The key is 32 bytes. A unique id carries a random one (its holder is trusted, as
// NCCL's); with COLL_COMM_ID every process derives it from COLL_AUTH_KEY or the file
// named by COLL_AUTH_KEY_FILE, and without either from the address itself, which anyone
// can do: connections are then unauthenticated (a WARN says so once per process).
//
// Interactive handshake (bootstrap root and peer connections; the connector may wait):
//   connector -> acceptor  AuthHello      magic, purpose, nonceC (16 random bytes)
//   acceptor  -> connector AuthChallenge  magic, purpose, nonceA, HMAC(K, "acceptor"|purpose|nonceC|nonceA)
//   connector -> acceptor  AuthProof      HMAC(K, "connector"|purpose|nonceC|nonceA)
// Each side checks the other's MAC over its own fresh nonce, so both prove the key,
// the key never travels, and a recorded handshake replayed on a new connection fails
// (the acceptor's nonce differs). The role labels keep a MAC of one side from being
// reflected as the other's, the purpose keeps one kind of connection from standing in
// for another.
//
// Net data connections may not wait for the acceptor (net.h), so their challenge is a
// nonce the listener puts in its handle, which reaches the connector over the
// authenticated bootstrap: the connector's first bytes carry listenerProof() over that
// nonce and what it says about itself, checked before the listener reads anything else.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "base/sha256.h"
#include "bootstrap/socket.h"

namespace coll {

struct AuthKey {
  std::array<uint8_t, 32> bytes;
  std::span<const std::byte> view() const { return std::as_bytes(std::span(bytes)); }
};

constexpr size_t kNonceBytes = 16;
struct AuthNonce {
  std::array<uint8_t, kNonceBytes> bytes;
};

// What a connection is for; a MAC made for one purpose is refused for another.
// kStat: tools/collstat asking a running root for the hang report (hang_report.h).
enum class AuthPurpose : uint32_t { kRoot = 1, kPeer = 2, kSocketNet = 3, kIbNet = 4, kStat = 5 };

constexpr uint32_t kAuthMagic = 0xC011A071u;
struct AuthHello {
  uint32_t magic;
  AuthPurpose purpose;
  AuthNonce nonce;
};
struct AuthChallenge {
  uint32_t magic;
  AuthPurpose purpose;
  AuthNonce nonce;
  Digest mac;
};
struct AuthProof {
  Digest mac;
};

// How long an acceptor gives a connection to prove itself (COLL_AUTH_TIMEOUT_S, at least
// 1 s): a client that connects and stalls holds the accepting loop this long at most.
double authTimeoutS();

// n bytes from the kernel's random source (getrandom).
Status randomBytes(void* out, size_t n);
Result<AuthKey> randomAuthKey();
Result<AuthNonce> randomNonce();

// The key of a COLL_COMM_ID job at `commId`: from COLL_AUTH_KEY, or COLL_AUTH_KEY_FILE
// (a file only its owner may read), else derived from commId with a WARN, once per
// process, that connections are unauthenticated.
Result<AuthKey> commIdKey(const std::string& commId);

// HMAC-SHA-256 under key over a label (with its terminating NUL) then the parts.
Digest authMac(const AuthKey& key, const char* label, std::initializer_list<std::span<const std::byte>> parts);

template <typename T>
std::span<const std::byte> bytesOf(const T& v) {
  return std::as_bytes(std::span<const T, 1>(&v, 1));
}

// The proof a net connector sends a listener whose handle carried `listenerNonce`;
// `said` is what the connector's first message tells about itself (bound to the proof).
Digest listenerProof(const AuthKey& key, AuthPurpose purpose, const AuthNonce& listenerNonce,
                     std::span<const std::byte> said);
bool macEqual(const Digest& a, const Digest& b);

// The interactive handshake on a fresh connection, each side's half. A failure names the
// peer's address and why (wrong key, not a handshake, timed out); the caller closes.
Status authConnect(Socket& s, const AuthKey& key, AuthPurpose purpose, Deadline deadline,
                   const std::atomic<bool>* cancel = nullptr);
// `asked`, when given: the purpose the connector's hello named (set once it is read).
Status authAccept(Socket& s, const AuthKey& key, AuthPurpose purpose, Deadline deadline, AuthPurpose* asked = nullptr);
// In authConnect's error when the acceptor closed the connection without answering the
// hello (a root that no longer accepts joins: bootstrap.cc retries).
constexpr const char* kAuthNoAnswer = "no answer to the handshake";

}  // namespace coll

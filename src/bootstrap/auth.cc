#include "bootstrap/auth.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/param.h"

namespace coll {

Status randomBytes(void* out, size_t n) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return systemError("getrandom", errno);
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return okStatus();
}

double authTimeoutS() { return static_cast<double>(std::max<int64_t>(1, param(IntParam::AUTH_TIMEOUT_S))); }

Result<AuthKey> randomAuthKey() {
  AuthKey k;
  COLL_CHECK(randomBytes(k.bytes.data(), k.bytes.size()));
  return k;
}

Result<AuthNonce> randomNonce() {
  AuthNonce n;
  COLL_CHECK(randomBytes(n.bytes.data(), n.bytes.size()));
  return n;
}

namespace {

// The key made of a text of any length (a passphrase, a file's bytes).
AuthKey keyFrom(const std::string& material) {
  AuthKey k;
  k.bytes = hmacSha256(std::as_bytes(std::span(material)), std::as_bytes(std::span("collectives auth key v1")));
  return k;
}

constexpr size_t kMaxKeyFileBytes = 64 * 1024;

std::string octal(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%03o", mode);
  return buf;
}

Result<std::string> readKeyFile(const std::string& path) {
  const std::string what = "COLL_AUTH_KEY_FILE=" + path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return systemError(what + ": open", errno);
  struct stat st {};
  std::string out;
  Status s;
  if (::fstat(fd, &st) != 0) s = systemError(what + ": fstat", errno);
  else if (!S_ISREG(st.st_mode)) s = invalidArgument(what + ": not a regular file");
  else if (st.st_mode & 077)
    s = invalidArgument(what + ": others than its owner may read or write it (mode " + octal(st.st_mode & 0777) +
                        "); chmod 600 it");
  else if (st.st_size <= 0 || static_cast<size_t>(st.st_size) > kMaxKeyFileBytes)
    s = invalidArgument(what + ": " + std::to_string(st.st_size) + " bytes; a key file holds 1 to " +
                        std::to_string(kMaxKeyFileBytes));
  if (s.ok()) {
    out.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (s.ok() && got < out.size()) {
      ssize_t n = ::read(fd, out.data() + got, out.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) s = systemError(what + ": read", errno);
      else if (n == 0) s = invalidArgument(what + ": shorter than its size (being written?)");
      else got += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!s.ok()) return s;
  return out;
}

}  // namespace

Result<AuthKey> commIdKey(const std::string& commId) {
  const std::string text = param(StringParam::AUTH_KEY);
  const std::string file = param(StringParam::AUTH_KEY_FILE);
  if (!text.empty() && !file.empty())
    return invalidArgument("both COLL_AUTH_KEY and COLL_AUTH_KEY_FILE are set: set one");
  if (!text.empty()) return keyFrom(text);
  if (!file.empty()) {
    COLL_ASSIGN(std::string material, readKeyFile(file));
    return keyFrom(material);
  }
  static std::once_flag warned;
  std::call_once(warned, [&] {
    COLL_WARN(BOOTSTRAP,
              "COLL_COMM_ID=%s without COLL_AUTH_KEY or COLL_AUTH_KEY_FILE: bootstrap and net connections are "
              "unauthenticated (anyone who can reach this job's ports may join it)",
              commId.c_str());
  });
  // Only guards against mixing up jobs: anyone knowing the address can derive it.
  return keyFrom("coll-comm-id:" + commId);
}

Digest authMac(const AuthKey& key, const char* label, std::initializer_list<std::span<const std::byte>> parts) {
  HmacSha256 h(key.view());
  h.update(label, std::char_traits<char>::length(label) + 1);
  for (auto p : parts) h.update(p);
  return h.digest();
}

Digest listenerProof(const AuthKey& key, AuthPurpose purpose, const AuthNonce& listenerNonce,
                     std::span<const std::byte> said) {
  return authMac(key, "listener", {bytesOf(purpose), bytesOf(listenerNonce), said});
}

bool macEqual(const Digest& a, const Digest& b) {
  return constantTimeEqual(std::as_bytes(std::span(a)), std::as_bytes(std::span(b)));
}

namespace {

Digest roleMac(const AuthKey& key, const char* role, AuthPurpose purpose, const AuthNonce& fromConnector,
               const AuthNonce& fromAcceptor) {
  return authMac(key, role, {bytesOf(purpose), bytesOf(fromConnector), bytesOf(fromAcceptor)});
}

}  // namespace

Status authConnect(Socket& s, const AuthKey& key, AuthPurpose purpose, Deadline deadline,
                   const std::atomic<bool>* cancel) {
  AuthHello hello{kAuthMagic, purpose, {}};
  COLL_ASSIGN(hello.nonce, randomNonce());
  Status sent = s.sendAll(&hello, sizeof(hello), deadline, cancel);
  if (!sent.ok()) return sent.prefix("authenticating with " + s.peer().str() + ": " + kAuthNoAnswer + ": ");
  AuthChallenge ch{};
  Status got = s.recvAll(&ch, sizeof(ch), deadline, cancel);
  if (!got.ok()) return got.prefix("authenticating with " + s.peer().str() + ": " + kAuthNoAnswer + ": ");
  if (ch.magic != kAuthMagic || ch.purpose != purpose)
    return remoteError("authenticating with " + s.peer().str() + ": its answer is not a handshake of ours");
  if (!macEqual(ch.mac, roleMac(key, "acceptor", purpose, hello.nonce, ch.nonce)))
    return remoteError("the peer at " + s.peer().str() +
                       " does not know this communicator's key (COLL_AUTH_KEY or COLL_AUTH_KEY_FILE differ "
                       "between ranks, or the address is another job's)");
  const AuthProof proof{roleMac(key, "connector", purpose, hello.nonce, ch.nonce)};
  return s.sendAll(&proof, sizeof(proof), deadline, cancel);
}

Status authAccept(Socket& s, const AuthKey& key, AuthPurpose purpose, Deadline deadline, AuthPurpose* asked) {
  AuthHello hello{};
  Status got = s.recvAll(&hello, sizeof(hello), deadline);
  if (!got.ok()) return got.prefix("no handshake: ");
  if (hello.magic != kAuthMagic) return remoteError("no handshake (no key presented, or not a peer of ours)");
  if (asked) *asked = hello.purpose;
  if (hello.purpose != purpose)
    return remoteError("a handshake for another kind of connection (" +
                       std::to_string(static_cast<uint32_t>(hello.purpose)) + ")");
  AuthChallenge ch{kAuthMagic, purpose, {}, {}};
  COLL_ASSIGN(ch.nonce, randomNonce());
  ch.mac = roleMac(key, "acceptor", purpose, hello.nonce, ch.nonce);
  COLL_CHECK(s.sendAll(&ch, sizeof(ch), deadline));
  AuthProof proof{};
  got = s.recvAll(&proof, sizeof(proof), deadline);
  if (!got.ok()) return got.prefix("no proof of the key: ");
  if (!macEqual(proof.mac, roleMac(key, "connector", purpose, hello.nonce, ch.nonce)))
    return remoteError("wrong key (or a replayed handshake)");
  return okStatus();
}

}  // namespace coll

// Authentication (bootstrap/auth.h): SHA-256 and HMAC against the standards' examples,
// and every listener a rank runs (the bootstrap root, a rank's bootstrap listener, the
// socket net listener) facing a wrong key, no key (the hello of before), a replayed
// handshake, garbage and a client that stalls: each is closed, and the job completes.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "base/sha256.h"
#include "bootstrap/auth.h"
#include "bootstrap/wire.h"
#include "comm/comm.h"
#include "harness.h"
#include "transport/net/socket/socket_net.h"

using namespace coll;
using testing::CapturedLog;
using testing::ScopedEnv;

namespace {

std::string hex(const Digest& d) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

std::span<const std::byte> bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

}  // namespace

TEST_CASE("SHA-256 gives FIPS 180-4's example digests", "[auth]") {
  CHECK(hex(sha256(bytes(""))) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256(bytes("abc"))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(hex(sha256(bytes(two))) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // A million 'a', fed in uneven pieces: the block boundary falls inside updates.
  Sha256 s;
  const std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, chunk.size());
    s.update(chunk.data(), n);
    left -= n;
  }
  CHECK(hex(s.digest()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("HMAC-SHA-256 gives RFC 4231's test case outputs", "[auth]") {
  auto mac = [](const std::string& key, const std::string& data) { return hex(hmacSha256(bytes(key), bytes(data))); };
  CHECK(mac(std::string(20, '\x0b'), "Hi There") == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(mac("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(mac(std::string(20, '\xaa'), std::string(50, '\xdd')) ==
        "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (char c = 1; c <= 25; ++c) key4 += c;
  CHECK(mac(key4, std::string(50, '\xcd')) == "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  const std::string longKey(131, '\xaa');
  CHECK(mac(longKey, "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(mac(longKey,
            "This is a test using a larger than block-size key and a larger than block-size data. The key needs "
            "to be hashed before being used by the HMAC algorithm.") ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

namespace {

SockAddr loopback() {
  SockAddr a{};
  a.u.in4.sin_family = AF_INET;
  a.u.in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

AuthKey keyOf(uint8_t fill) {
  AuthKey k;
  k.bytes.fill(fill);
  return k;
}

// Copies bytes both ways between a and b until both are closed; returns what a sent.
std::string forward(Socket& a, Socket& b) {
  std::string fromA;
  bool aOpen = true, bOpen = true;
  while (aOpen || bOpen) {
    pollfd p[2] = {{aOpen ? a.fd() : -1, POLLIN, 0}, {bOpen ? b.fd() : -1, POLLIN, 0}};
    if (::poll(p, 2, 5000) <= 0) break;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (!p[i].revents) continue;
      Socket& from = i == 0 ? a : b;
      Socket& to = i == 0 ? b : a;
      ssize_t n = ::recv(from.fd(), buf, sizeof(buf), 0);
      if (n <= 0) {
        (i == 0 ? aOpen : bOpen) = false;
        ::shutdown(to.fd(), SHUT_WR);
        continue;
      }
      if (i == 0) fromA.append(buf, static_cast<size_t>(n));
      (void)to.sendAll(buf, static_cast<size_t>(n), deadlineIn(5));
    }
  }
  return fromA;
}

// The bytes a real connector sends in a successful handshake (through a forwarding
// proxy to a real acceptor), as someone watching the network would record them.
std::string recordHandshake(const AuthKey& key, AuthPurpose purpose) {
  SockAddr acceptAt = loopback(), proxyAt = loopback();
  Socket acceptor = Socket::listen(&acceptAt).take();
  Socket proxy = Socket::listen(&proxyAt).take();
  Status accepted;
  std::thread a([&] {
    Socket s = acceptor.accept(deadlineIn(10)).take();
    accepted = authAccept(s, key, purpose, deadlineIn(10));
  });
  std::string recorded;
  std::thread p([&] {
    Socket in = proxy.accept(deadlineIn(10)).take();
    Socket out = Socket::connect(acceptAt, deadlineIn(10)).take();
    recorded = forward(in, out);
  });
  {
    Socket c = Socket::connect(proxyAt, deadlineIn(10)).take();
    REQUIRE(authConnect(c, key, purpose, deadlineIn(10)).ok());
  }
  a.join();
  p.join();
  REQUIRE(accepted.ok());
  REQUIRE(recorded.size() == sizeof(AuthHello) + sizeof(AuthProof));
  return recorded;
}

enum class Attack { kWrongKey, kNoKey, kReplay, kGarbage, kStall };
const char* attackName(Attack a) {
  const char* names[] = {"wrong key", "no key (the hello of before)", "replayed handshake", "garbage", "stall"};
  return names[static_cast<int>(a)];
}

// Connects to `at` and misbehaves; returns once the listener closed the connection (or
// after 15 s: then the listener kept it open, and the caller's check fails).
bool attack(const SockAddr& at, Attack kind, AuthPurpose purpose, const std::string& recorded) {
  Result<Socket> c = Socket::connect(at, deadlineIn(10));
  if (!c.ok()) return false;
  Socket& s = c.value();
  std::string out;
  if (purpose == AuthPurpose::kSocketNet && kind == Attack::kWrongKey) {
    out = recorded;  // a hello whose MAC was not made with the key
    for (size_t i = out.size() - 32; i < out.size(); ++i) out[i] = static_cast<char>(out[i] ^ 0x5a);
  } else if (purpose == AuthPurpose::kSocketNet && kind == Attack::kNoKey) {
    // The socket backend's hello of before (magic, socket, connection id), then a message.
    const uint32_t old[4] = {0xC0115C0Cu, 0, 1, 0};
    out.assign(reinterpret_cast<const char*>(old), sizeof(old));
    out += std::string(8, '\x10') + std::string(16, 'd');
  } else if (kind == Attack::kWrongKey) {
    // Follows the protocol with another key, ignoring that the acceptor's MAC is wrong.
    AuthHello hello{kAuthMagic, purpose, {}};
    AuthChallenge ch{};
    (void)s.sendAll(&hello, sizeof(hello), deadlineIn(5));
    // A listener busy with another attack (the stall) may answer late, or close first:
    // without its challenge, only whether it closes is left to see, below.
    if (s.recvAll(&ch, sizeof(ch), deadlineIn(15)).ok()) {
      const AuthProof proof{
          authMac(keyOf(0x77), "connector", {bytesOf(purpose), bytesOf(hello.nonce), bytesOf(ch.nonce)})};
      out.assign(reinterpret_cast<const char*>(&proof), sizeof(proof));
    }
  } else if (kind == Attack::kNoKey) {
    out.assign(sizeof(JoinMsg), '\0');  // magic first, as JoinMsg and HelloMsg were
    std::memcpy(out.data(), &kWireMagic, sizeof(kWireMagic));
  } else if (kind == Attack::kReplay) {
    out = recorded;
  } else if (kind == Attack::kGarbage) {
    for (int i = 0; i < 4096; ++i) out += static_cast<char>(i * 7919 >> 3);
  }
  if (!out.empty()) (void)s.sendAll(out.data(), out.size(), deadlineIn(5));
  // Drain what the listener sends (a challenge) until it closes.
  char buf[256];
  const Deadline until = deadlineIn(15);
  while (std::chrono::steady_clock::now() < until) {
    pollfd p{s.fd(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t n = ::recv(s.fd(), buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

constexpr Attack kAttacks[] = {Attack::kWrongKey, Attack::kNoKey, Attack::kReplay, Attack::kGarbage, Attack::kStall};

// Every attack on `at` at once; each must be closed by the listener.
void attackAll(const SockAddr& at, AuthPurpose purpose, const std::string& recorded) {
  std::vector<std::thread> threads;
  bool closed[5] = {};
  for (int i = 0; i < 5; ++i) threads.emplace_back([&, i] { closed[i] = attack(at, kAttacks[i], purpose, recorded); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 5; ++i) {
    INFO(attackName(kAttacks[i]) << " on " << at.str());
    CHECK(closed[i]);
  }
}

UniqueIdData idData(const collUniqueId& id) {
  UniqueIdData d;
  std::memcpy(&d, id.internal, sizeof(d));
  return d;
}

// nranks thread ranks of `id` init, run an allreduce and check it; "" when all is well.
std::string initAndReduce(const collUniqueId& id, int nranks, std::vector<collComm_t>* keep = nullptr) {
  std::vector<std::string> errors(nranks);
  std::vector<collComm_t> comms(nranks, nullptr);
  std::vector<std::thread> t;
  for (int r = 0; r < nranks; ++r)
    t.emplace_back([&, r] {
      if (collCommInitRank(&comms[r], nranks, id, r) != collSuccess) {
        errors[r] = collGetLastError(nullptr);
        return;
      }
      std::vector<int32_t> v(1000, r + 1);
      if (collAllReduce(v.data(), v.data(), v.size(), collInt32, collSum, comms[r], nullptr) != collSuccess)
        errors[r] = collGetLastError(comms[r]);
      else if (v[999] != nranks * (nranks + 1) / 2) errors[r] = "wrong sum " + std::to_string(v[999]);
    });
  for (auto& th : t) th.join();
  std::string all;
  for (int r = 0; r < nranks; ++r)
    if (!errors[r].empty()) all += "rank " + std::to_string(r) + ": " + errors[r] + "\n";
  if (keep) *keep = comms;
  else
    for (collComm_t c : comms)
      if (c) collCommDestroy(c);
  return all;
}

}  // namespace

TEST_CASE("the interactive handshake: both sides prove the key", "[auth]") {
  SockAddr at = loopback();
  Socket l = Socket::listen(&at).take();
  for (bool same : {true, false}) {
    Status accepted;
    std::thread a([&] {
      Socket s = l.accept(deadlineIn(10)).take();
      accepted = authAccept(s, keyOf(1), AuthPurpose::kPeer, deadlineIn(10));
    });
    Socket c = Socket::connect(at, deadlineIn(10)).take();
    Status connected = authConnect(c, keyOf(same ? 1 : 2), AuthPurpose::kPeer, deadlineIn(10));
    c.close();
    a.join();
    INFO(connected.message() << " / " << accepted.message());
    CHECK(connected.ok() == same);
    CHECK(accepted.ok() == same);
    if (!same) CHECK(connected.message().find("does not know this communicator's key") != std::string::npos);
  }
  // A connector for another purpose is refused by the acceptor.
  std::thread a([&] {
    Socket s = l.accept(deadlineIn(10)).take();
    CHECK(!authAccept(s, keyOf(1), AuthPurpose::kRoot, deadlineIn(10)).ok());
  });
  Socket c = Socket::connect(at, deadlineIn(10)).take();
  CHECK(!authConnect(c, keyOf(1), AuthPurpose::kPeer, deadlineIn(10)).ok());
  a.join();
}

TEST_CASE("the bootstrap root closes connections that do not prove the key, and init completes", "[auth][bootstrap]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv stall("COLL_AUTH_TIMEOUT_S", "2");  // the stalling attacker is dropped after 2 s, not 5
  CapturedLog log("auth-test");
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  const UniqueIdData d = idData(id);
  // Before any rank joins: the root takes them one at a time, the stall included.
  attackAll(d.root, AuthPurpose::kRoot, recordHandshake(d.key, AuthPurpose::kRoot));
  CHECK(initAndReduce(id, 3) == "");
  CHECK(log.count("root: rejected a connection from 127.0.0.1") == 5);
}

TEST_CASE("a rank's bootstrap listener closes connections that do not prove the key", "[auth][bootstrap]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv stall("COLL_AUTH_TIMEOUT_S", "2");  // the stalling attacker is dropped after 2 s, not 5
  CapturedLog log("auth-test");
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  std::vector<collComm_t> comms;
  REQUIRE(initAndReduce(id, 3, &comms) == "");
  const Bootstrap& b = *comms[2]->bootstrap;
  attackAll(b.peers()[2].bootAddr, AuthPurpose::kPeer, recordHandshake(b.authKey(), AuthPurpose::kPeer));
  CHECK(log.count("rejected a bootstrap connection from 127.0.0.1") == 5);
  // A split: rank 0 sends the new id to rank 2 over a connection it makes now (the ring
  // of init connected 0->1, 1->2, 2->0), and the new communicator works.
  std::vector<collComm_t> subs(3, nullptr);
  std::vector<collResult_t> res(3);
  std::vector<std::thread> t;
  for (int r = 0; r < 3; ++r) t.emplace_back([&, r] { res[r] = collCommSplit(comms[r], 0, r, &subs[r], nullptr); });
  for (auto& th : t) th.join();
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << ": " << collGetLastError(comms[r]));
    CHECK(res[r] == collSuccess);
  }
  for (collComm_t c : subs)
    if (c) collCommDestroy(c);
  for (collComm_t c : comms) collCommDestroy(c);
}

TEST_CASE("the socket net listener closes connections that do not prove the key", "[auth][net]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv stall("COLL_AUTH_TIMEOUT_S", "2");  // the stalling attacker is dropped after 2 s, not 5
  CapturedLog log("auth-test");
  auto backend = makeSocketBackend();
  const AuthKey key = keyOf(5);
  // What a real connector sent to another listener (its nonce differs from the next one's).
  NetHandle first{};
  auto l1 = backend->listen(0, key, &first);
  REQUIRE(l1.ok());
  SockAddr recAt = loopback();
  Socket recorder = Socket::listen(&recAt).take();
  setSocketHandleAddr(&first, recAt);
  auto sent = backend->connect(0, first, key, nullptr);
  REQUIRE(sent.ok());
  std::string recorded(48, '\0');  // the first socket's hello (SockHello: 16 bytes and a MAC)
  Socket r = recorder.accept(deadlineIn(10)).take();
  REQUIRE(r.recvAll(recorded.data(), recorded.size(), deadlineIn(10)).ok());

  NetHandle h{};
  auto listen = backend->listen(0, key, &h);
  REQUIRE(listen.ok());
  std::thread attacks([&] { attackAll(socketHandleAddr(h), AuthPurpose::kSocketNet, recorded); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the attackers queue first
  auto send = backend->connect(0, h, key, nullptr);
  REQUIRE(send.ok());
  auto recv = backend->accept(listen.value().get());
  attacks.join();
  REQUIRE(recv.ok());
  // The real connection carries data.
  const std::string msg = "through the authenticated connection";
  std::string got(64, '\0');
  auto sreq = backend->isend(send.value().get(), msg.data(), msg.size());
  auto rreq = backend->irecv(recv.value().get(), got.data(), got.size());
  REQUIRE(sreq.ok());
  REQUIRE(rreq.ok());
  bool sdone = false, rdone = false;
  size_t size = 0;
  const Deadline until = deadlineIn(10);
  while ((!sdone || !rdone) && std::chrono::steady_clock::now() < until) {
    if (!sdone) REQUIRE(backend->test(sreq.value(), &sdone, &size).ok());
    if (!rdone) REQUIRE(backend->test(rreq.value(), &rdone, &size).ok());
  }
  REQUIRE(rdone);
  CHECK(got.substr(0, size) == msg);
  CHECK(log.count("socket net: rejected a connection from 127.0.0.1") == 5);
}

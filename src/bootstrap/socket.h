// Sockets for the bootstrap and the socket net backend: addresses (IPv4 and IPv6),
// interface selection with NCCL's COLL_SOCKET_IFNAME syntax, and an RAII socket with
// blocking helpers that honour a deadline and an abort flag.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace coll {

// Fits in a unique id: an IPv6 address and port at most.
struct SockAddr {
  union {
    sockaddr sa;
    sockaddr_in in4;
    sockaddr_in6 in6;
  } u{};

  socklen_t len() const { return u.sa.sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }
  int family() const { return u.sa.sa_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  std::string str() const;  // "1.2.3.4:5" or "[::1]:5"
};

// Parses "host:port", "[v6addr]:port" or "v6addr" with port; resolves host names.
Result<SockAddr> parseSockAddr(const std::string& text);

// NCCL's interface-list syntax: "eth,ib" (name prefixes), "=eth0" (exact names),
// "^docker,lo" (exclude prefixes), "^=docker0" (exclude exact). Empty matches all.
bool ifNameMatches(const std::string& spec, const std::string& ifname);

struct NetIf {
  std::string name;
  SockAddr addr;
};
// Interfaces that are up and match COLL_SOCKET_IFNAME (and COLL_SOCKET_FAMILY). Without a
// spec: every non-loopback, non-docker interface; if there is none, loopback.
std::vector<NetIf> findInterfaces();

using Deadline = std::chrono::steady_clock::time_point;
inline Deadline deadlineIn(double seconds) {
  return std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_), peer_(o.peer_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  const SockAddr& peer() const { return peer_; }

  // Listens on addr (port 0: ephemeral); the bound address is written back into *addr.
  static Result<Socket> listen(SockAddr* addr, int backlog = 128);
  // Connects, retrying refused connections until the deadline (the listener may not
  // exist yet).
  static Result<Socket> connect(const SockAddr& addr, Deadline deadline, const std::atomic<bool>* abort = nullptr);
  // Waits for a connection until the deadline.
  Result<Socket> accept(Deadline deadline, const std::atomic<bool>* abort = nullptr);

  // Blocking transfers of exactly n bytes, giving up at the deadline or on abort.
  Status sendAll(const void* data, size_t n, Deadline deadline, const std::atomic<bool>* abort = nullptr);
  Status recvAll(void* data, size_t n, Deadline deadline, const std::atomic<bool>* abort = nullptr);

  Status setNonBlocking(bool on);
  Status setNoDelay();

 private:
  int fd_ = -1;
  SockAddr peer_{};
};

}  // namespace coll

#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "base/param.h"

namespace coll {

uint16_t SockAddr::port() const { return ntohs(family() == AF_INET6 ? u.in6.sin6_port : u.in4.sin_port); }

void SockAddr::setPort(uint16_t port) {
  if (family() == AF_INET6) u.in6.sin6_port = htons(port);
  else u.in4.sin_port = htons(port);
}

std::string SockAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &u.in6.sin6_addr, buf, sizeof(buf));
    return std::string("[") + buf + "]:" + std::to_string(port());
  }
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &u.in4.sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(port());
  }
  return "<unset>";
}

Result<SockAddr> parseSockAddr(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return invalidArgument("address \"" + text + "\": expected [ipv6]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return invalidArgument("address \"" + text + "\": expected host:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 0 || p > 65535)
    return invalidArgument("address \"" + text + "\": port \"" + port + "\" is not 0..65535");
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    return invalidArgument("address \"" + text + "\": cannot resolve \"" + host + "\": " + gai_strerror(rc));
  SockAddr a;
  std::memcpy(&a.u, res->ai_addr, std::min<size_t>(res->ai_addrlen, sizeof(a.u)));
  freeaddrinfo(res);
  a.setPort(static_cast<uint16_t>(p));
  return a;
}

bool ifNameMatches(const std::string& specIn, const std::string& ifname) {
  std::string spec = specIn;
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  if (spec.empty()) return !exclude;
  bool hit = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    if (!item.empty()) {
      if (exact ? ifname == item : ifname.compare(0, item.size(), item) == 0) hit = true;
    }
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

std::vector<NetIf> findInterfaces() {
  std::string spec = param(StringParam::SOCKET_IFNAME);
  std::string fam = param(StringParam::SOCKET_FAMILY);
  int wantFamily = fam == "AF_INET" ? AF_INET : fam == "AF_INET6" ? AF_INET6 : AF_UNSPEC;
  std::vector<NetIf> out, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int f = i->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    if (wantFamily != AF_UNSPEC && f != wantFamily) continue;
    NetIf nif;
    nif.name = i->ifa_name;
    std::memcpy(&nif.addr.u, i->ifa_addr, f == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (f == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&nif.addr.u.in6.sin6_addr)) continue;
    if (!spec.empty()) {
      if (ifNameMatches(spec, nif.name)) out.push_back(nif);
      continue;
    }
    if (i->ifa_flags & IFF_LOOPBACK) loopback.push_back(nif);
    else if (nif.name.compare(0, 6, "docker") != 0) out.push_back(nif);
  }
  freeifaddrs(list);
  // IPv4 first, so a default choice is the one people expect to see in logs.
  std::stable_sort(out.begin(), out.end(), [](const NetIf& a, const NetIf& b) {
    return a.addr.family() == AF_INET && b.addr.family() != AF_INET;
  });
  std::stable_sort(loopback.begin(), loopback.end(), [](const NetIf& a, const NetIf& b) {
    return a.addr.family() == AF_INET && b.addr.family() != AF_INET;
  });
  return out.empty() && spec.empty() ? loopback : out;
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    peer_ = o.peer_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

static int msUntil(Deadline d) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d - std::chrono::steady_clock::now()).count();
  if (left < 0) return 0;
  return left > 100 ? 100 : static_cast<int>(left);  // wake often to watch abort flags
}

Result<Socket> Socket::listen(SockAddr* addr, int backlog) {
  int fd = ::socket(addr->family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return systemError("socket()", errno);
  Socket s(fd);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, &addr->u.sa, addr->len()) != 0) return systemError("bind(" + addr->str() + ")", errno);
  if (::listen(fd, backlog) != 0) return systemError("listen(" + addr->str() + ")", errno);
  socklen_t len = sizeof(addr->u);
  getsockname(fd, &addr->u.sa, &len);
  return s;
}

Result<Socket> Socket::connect(const SockAddr& addr, Deadline deadline, const std::atomic<bool>* abort) {
  int delayMs = 1;
  for (;;) {
    int fd = ::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return systemError("socket()", errno);
    Socket s(fd);
    s.peer_ = addr;
    if (::connect(fd, &addr.u.sa, addr.len()) == 0) {
      COLL_CHECK(s.setNoDelay());
      return s;
    }
    int err = errno;
    bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EAGAIN || err == EINTR || err == ENETUNREACH ||
                 err == ECONNRESET;
    if (!retry) return systemError("connect(" + addr.str() + ")", err);
    if (std::chrono::steady_clock::now() >= deadline)
      return timeoutError("connect(" + addr.str() + "): nobody listening (" + std::strerror(err) +
                          ") until the deadline");
    if (abort && abort->load(std::memory_order_relaxed)) return remoteError("connect(" + addr.str() + ") aborted");
    usleep(delayMs * 1000);
    delayMs = std::min(delayMs * 2, 100);
  }
}

Result<Socket> Socket::accept(Deadline deadline, const std::atomic<bool>* abort) {
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, msUntil(deadline));
    if (rc < 0 && errno != EINTR) return systemError("poll(accept)", errno);
    if (rc > 0) {
      SockAddr from;
      socklen_t len = sizeof(from.u);
      int fd = ::accept4(fd_, &from.u.sa, &len, SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
        return systemError("accept()", errno);
      }
      Socket s(fd);
      s.peer_ = from;
      COLL_CHECK(s.setNoDelay());
      return s;
    }
    if (abort && abort->load(std::memory_order_relaxed)) return remoteError("accept() aborted");
    if (std::chrono::steady_clock::now() >= deadline) return timeoutError("accept() timed out");
  }
}

Status Socket::sendAll(const void* data, size_t n, Deadline deadline, const std::atomic<bool>* abort) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return systemError("send to " + peer_.str(), errno);
    pollfd pf{fd_, POLLOUT, 0};
    ::poll(&pf, 1, msUntil(deadline));
    if (abort && abort->load(std::memory_order_relaxed)) return remoteError("send aborted");
    if (std::chrono::steady_clock::now() >= deadline) return timeoutError("send to " + peer_.str() + " timed out");
  }
  return okStatus();
}

Status Socket::recvAll(void* data, size_t n, Deadline deadline, const std::atomic<bool>* abort) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::recv(fd_, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return remoteError("connection closed by " + peer_.str());
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return systemError("recv from " + peer_.str(), errno);
    pollfd pf{fd_, POLLIN, 0};
    ::poll(&pf, 1, msUntil(deadline));
    if (abort && abort->load(std::memory_order_relaxed)) return remoteError("recv aborted");
    if (std::chrono::steady_clock::now() >= deadline) return timeoutError("recv from " + peer_.str() + " timed out");
  }
  return okStatus();
}

Status Socket::setNonBlocking(bool on) {
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0) return systemError("fcntl(F_GETFL)", errno);
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd_, F_SETFL, flags) != 0) return systemError("fcntl(F_SETFL)", errno);
  return okStatus();
}

Status Socket::setNoDelay() {
  int one = 1;
  if (setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
    return systemError("setsockopt(TCP_NODELAY)", errno);
  return okStatus();
}

}  // namespace coll

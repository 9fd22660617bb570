#include "transport/net/socket/socket_net.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/auth.h"
#include "bootstrap/socket.h"
#include "base/log.h"
#include "base/param.h"
#include "base/wait.h"
#include "kernels/host_copy.h"
#include "transport/net/socket/socket_wire.h"

namespace coll {

int socketStripe(size_t size, int nsocks, size_t* partLen) {
  constexpr size_t kMinPart = 64 * 1024;
  size_t parts = (size + kMinPart - 1) / kMinPart;
  if (parts > static_cast<size_t>(nsocks)) parts = static_cast<size_t>(nsocks);
  if (parts == 0) parts = 1;
  size_t len = (size + parts - 1) / parts;
  len = (len + 4095) & ~size_t{4095};
  *partLen = len;
  return static_cast<int>(parts);
}

size_t socketHeaderPad(const void* data, size_t size) {
  constexpr size_t kMinBytes = 16384;  // smaller ones are read through the bounce buffer anyway
  if (size < kMinBytes) return 0;
  return (reinterpret_cast<uintptr_t>(data) - 8) & 63;
}

namespace {

constexpr char kZeros[64] = {};
static_assert(sizeof(SockHandle) <= kNetHandleBytes, "handle too large");

struct SockRequest;
struct SockTask {
  SockRequest* req;
  char* ptr;
  size_t len;
  size_t off;
};

class SockConn;
struct SockRequest : NetRequest {
  SockConn* conn = nullptr;
  bool send = false;
  char* data = nullptr;
  size_t size = 0;   // send: bytes; recv: capacity, then bytes
  uint64_t hdr = 0;  // length on the wire
  enum State { kHeaderUnqueued, kHeaderQueued, kPayload } state = kHeaderUnqueued;
  std::atomic<int> pending{0};  // tasks not finished (helpers decrement)
};

// One direction of a connection: its sockets, their task queues, and optionally helper
// threads. Threads: the caller (executor) posts requests and queues tasks; sockets are
// pumped by the caller (no helpers) or by helper h for sockets i with i % nhelpers == h.
// `mu` guards the queues and `error`.
class SockConn {
 public:
  ~SockConn() {
    stop_.store(true);
    cv_.notify_all();
    for (auto& t : helpers_) t.join();
    for (SockRequest* r : reqs) delete r;
  }

  void init(std::vector<Socket> socks, bool send, std::string peer, int nhelpers) {
    socks_ = std::move(socks);
    queues_.resize(socks_.size());
    dry_.assign(socks_.size(), false);
    closed_.assign(socks_.size(), false);
    send_ = send;
    peerName_ = std::move(peer);
    for (int h = 0; h < nhelpers; ++h) helpers_.emplace_back([this, h, nhelpers] { helperLoop(h, nhelpers); });
  }

  size_t nsocks() const { return socks_.size(); }
  bool hasHelpers() const { return !helpers_.empty(); }
  int nhelpers() const { return static_cast<int>(helpers_.size()); }
  const std::string& peerName() const { return peerName_; }

  // Descriptors of this connection's sockets, for the opposite direction of a duplex
  // pair (TCP is full duplex; each direction keeps its own queues and state).
  Result<std::vector<Socket>> dupSockets() const {
    std::vector<Socket> out;
    for (const Socket& s : socks_) {
      int fd = ::fcntl(s.fd(), F_DUPFD_CLOEXEC, 0);
      if (fd < 0) return systemError("duplicating a socket to " + peerName_, errno);
      out.emplace_back(fd);
    }
    return out;
  }

  void queue(size_t sock, SockTask t) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++t.req->pending;
      queues_[sock].push_back(t);
    }
    if (hasHelpers()) cv_.notify_all();
  }

  void queueData(SockRequest* r) {
    size_t partLen;
    int parts = socketStripe(r->size, static_cast<int>(nsocks()), &partLen);
    for (int i = 0; i < parts; ++i) {
      size_t off = static_cast<size_t>(i) * partLen;
      if (off >= r->size) break;
      queue(static_cast<size_t>(i), {r, r->data + off, std::min(partLen, r->size - off), 0});
    }
    r->state = SockRequest::kPayload;
  }

  Status error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // Receive side: r, not complete, waits for bytes on a socket the peer has closed, so
  // they will never come. Only r fails, not the connection: the peer closes once it has
  // sent everything, and its close may reach one socket while the last parts of earlier
  // messages are still unread on another (the receiver posts ahead on socket 0).
  Status closedUnder(const SockRequest* r) {
    if (!anyClosed_.load(std::memory_order_acquire)) return okStatus();  // the usual case, no lock
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < socks_.size(); ++i) {
      if (!closed_[i]) continue;
      for (const SockTask& t : queues_[i])
        if (t.req == r) return remoteError("connection closed by " + peerName_ + " (peer exited or was killed)");
    }
    return okStatus();
  }

  // Called by the caller's test(): moves headers along and, without helpers, pumps.
  Status progress() {
    if (failed_.load(std::memory_order_acquire)) return error();
    if (!hasHelpers()) delivered_ = false;  // with helpers it stays false: their threads read it
    bool progressed = true;
    while (progressed) {
      progressed = false;
      if (!send_) {
        // Headers are read in order: the next request's header may be queued only after
        // the previous request's data parts are queued behind socket 0.
        for (SockRequest* r : reqs) {
          if (r->state == SockRequest::kPayload) continue;
          if (r->state == SockRequest::kHeaderUnqueued) {
            r->state = SockRequest::kHeaderQueued;
            queue(0, {r, reinterpret_cast<char*>(&r->hdr), sizeof(r->hdr), 0});
          }
          if (r->pending.load(std::memory_order_acquire) > 0) break;  // header on its way
          SockHeader h;
          Status st = parseSockHeader(&r->hdr, sizeof(r->hdr), r->size, &h);
          if (!st.ok()) return fail(st.prefix("from " + peerName_ + ": "));
          static_assert(sizeof(padSink_) > kMaxPad);
          r->size = h.len;
          if (h.pad > 0) queue(0, {r, padSink_, h.pad, 0});
          queueData(r);
          progressed = true;
        }
      }
      if (!hasHelpers()) {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < socks_.size(); ++i) {
          Status st = pump(i, &progressed);
          if (!st.ok()) return failLocked(st);
        }
      }
    }
    return okStatus();
  }

  WaitTarget waitTarget() {
    WaitTarget t;
    if (hasHelpers()) {
      t.word = &completions_;
      t.waiters = &waiters_;
      t.seen = completions_.load();
    } else {
      // The first socket with work (the caller alone touches the queues without helpers):
      // socket 0 may be idle, or closed, while a message's last part waits on another.
      size_t w = 0;
      for (size_t i = 0; i < socks_.size(); ++i)
        if (!queues_[i].empty() && !closed_[i]) {
          w = i;
          break;
        }
      t.fd = socks_[w].fd();
      t.events = send_ ? POLLOUT : POLLIN;
    }
    return t;
  }

  std::deque<SockRequest*> reqs;  // caller only, in posting order

 private:
  Status fail(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    return failLocked(std::move(st));
  }
  Status failLocked(Status st) {
    if (!failed_.load()) {
      error_ = st;
      failed_.store(true, std::memory_order_release);
    }
    return error_;
  }

  // One sendmsg of the queued tasks (at most 16), from where each stands.
  template <typename Queue>
  static ssize_t sendQueued(int fd, const Queue& q) {
    constexpr int kMaxIov = 16;
    iovec iov[kMaxIov];
    int k = 0;
    for (auto it = q.begin(); it != q.end() && k < kMaxIov; ++it, ++k) iov[k] = {it->ptr + it->off, it->len - it->off};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(k);
    return ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // Receive socket i reached its end. Not an error yet: the other sockets may still hold
  // the peer's last bytes. Requires mu_.
  void peerClosed(size_t i) {
    closed_[i] = true;
    anyClosed_.store(true, std::memory_order_release);
    if (hasHelpers()) {  // the caller sleeps on completions: let it look again
      completions_.fetch_add(1, std::memory_order_release);
      futexWakeIfWaiting(&completions_, &waiters_, false);
    }
  }

  // Moves bytes on socket i until it would block. Requires mu_. Sends gather every
  // queued task (a message's header and its data, several small messages) into one
  // sendmsg, so a small message is one syscall and one TCP segment, not two.
  Status pump(size_t i, bool* progressed) {
    auto& q = queues_[i];
    int fd = socks_[i].fd();
    while (!q.empty()) {
      if (closed_[i]) break;  // read to its end (bounce_ too: a close is seen only once it is empty)
      ssize_t n;
      if (send_) {
        n = sendQueued(fd, q);
      } else if (delivered_ && !(i == 0 && bounceHead_ < bounceTail_)) {
        // A message completed in this call: its reader is about to act on it, and a
        // syscall now would only delay that (each poll or recv is ~0.4 us here, and an
        // 8-byte exchange made four of them between receiving and sending the next one).
        break;
      } else if (dry_[i] && !(i == 0 && bounceHead_ < bounceTail_) && !readable(fd)) {
        break;  // nothing arrived since the last EAGAIN (and nothing is buffered)
      } else if (i == 0) {
        // Socket 0 carries the headers: read through a bounce buffer, so a small
        // message's header and data (and whatever follows) come in one recv.
        SockTask& t = q.front();
        if (bounceHead_ < bounceTail_) {
          size_t take = std::min(bounceTail_ - bounceHead_, t.len - t.off);
          hostCopy(t.ptr + t.off, bounce_.data() + bounceHead_, take);
          bounceHead_ += take;
          t.off += take;
          *progressed = true;
          if (t.off == t.len) complete(q);
          continue;
        }
        if (t.len - t.off >= bounce_.size()) {
          n = ::recv(fd, t.ptr + t.off, t.len - t.off, MSG_DONTWAIT);
        } else {
          n = ::recv(fd, bounce_.data(), bounce_.size(), MSG_DONTWAIT);
          if (n > 0) {
            bounceHead_ = 0;
            bounceTail_ = static_cast<size_t>(n);
            *progressed = true;
            continue;
          }
        }
      } else {
        SockTask& t = q.front();
        n = ::recv(fd, t.ptr + t.off, t.len - t.off, MSG_DONTWAIT);
      }
      if (n > 0) {
        *progressed = true;
        if (!send_) dry_[i] = false;
        size_t left = static_cast<size_t>(n);
        while (left > 0) {
          SockTask& t = q.front();
          size_t take = std::min(left, t.len - t.off);
          t.off += take;
          left -= take;
          if (t.off == t.len) complete(q);
        }
        continue;
      }
      if (n == 0 && !send_) {
        peerClosed(i);
        *progressed = true;
        break;
      }
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        if (!send_) dry_[i] = true;
        break;
      }
      return systemError(std::string(send_ ? "send to " : "recv from ") + peerName_, errno);
    }
    return okStatus();
  }

  // After an EAGAIN, wait for data with poll() rather than more recv() calls (recv takes
  // the socket lock loopback delivery needs). Measured: no difference at 8 bytes either
  // way (A/B medians 14.54 vs 14.65 us, docs/PERFORMANCE.md).
  static bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

  void complete(std::deque<SockTask>& q) {
    SockRequest* r = q.front().req;
    const bool last = r->pending.fetch_sub(1, std::memory_order_release) == 1;
    q.pop_front();
    if (last && !send_ && !hasHelpers() && r->state == SockRequest::kPayload) delivered_ = true;
    if (hasHelpers()) {
      completions_.fetch_add(1, std::memory_order_release);
      futexWakeIfWaiting(&completions_, &waiters_, false);
    }
  }

  void helperLoop(int h, int nhelpers) {
    std::vector<size_t> mine;
    for (size_t i = static_cast<size_t>(h); i < socks_.size(); i += static_cast<size_t>(nhelpers)) mine.push_back(i);
    while (!stop_.load()) {
      bool busy = false, progressed = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        for (size_t i : mine) {
          if (queues_[i].empty() || closed_[i]) continue;
          busy = true;
          Status st = pump(i, &progressed);
          if (!st.ok()) {
            (void)failLocked(st);
            completions_.fetch_add(1);
            futexWakeIfWaiting(&completions_, &waiters_, false);
            return;
          }
        }
        if (!busy) {
          cv_.wait_for(lock, std::chrono::milliseconds(10));
          continue;
        }
      }
      if (!progressed) {
        // Work queued but the sockets are full/empty: sleep until one is ready.
        std::vector<pollfd> fds;
        for (size_t i : mine)
          if (!closed_[i]) fds.push_back({socks_[i].fd(), static_cast<short>(send_ ? POLLOUT : POLLIN), 0});
        ::poll(fds.data(), fds.size(), 10);
      }
    }
  }

  std::vector<Socket> socks_;
  std::vector<std::deque<SockTask>> queues_;
  std::vector<bool> dry_;     // receive: the last recv on socket i found nothing
  std::vector<bool> closed_;  // receive: the peer closed socket i (read to its end)
  bool delivered_ = false;    // receive without helpers: a message completed in this progress()
  std::vector<char> bounce_ = std::vector<char>(16384);  // receive side, socket 0
  char padSink_[64];                                     // receive side: header padding
  size_t bounceHead_ = 0, bounceTail_ = 0;               // unread bytes in bounce_
  bool send_ = false;
  std::string peerName_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> helpers_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> anyClosed_{false};  // some closed_[i] is set
  Status error_;
  std::atomic<uint32_t> completions_{0};
  std::atomic<uint32_t> waiters_{0};
};

class SockListen : public NetListenComm {
 public:
  Socket listener;
  uint32_t nsocks;
  AuthKey key;
  AuthNonce nonce;
};
class SockSend : public NetSendComm {
 public:
  SockConn conn;
};
class SockRecv : public NetRecvComm {
 public:
  SockConn conn;
};

// The other direction of `from`'s connection, as a To (SockSend or SockRecv).
template <typename To, typename From>
Result<std::unique_ptr<To>> reverseOf(const From& from, bool send) {
  auto to = std::make_unique<To>();
  COLL_ASSIGN(auto socks, from.conn.dupSockets());
  to->conn.init(std::move(socks), send, from.conn.peerName(), from.conn.nhelpers());
  return to;
}

// The index of a socket whose hello proves the key and belongs to the connection being
// accepted (the first one accepted names it: *connId).
Result<uint32_t> checkHello(const SockListen& l, Socket& sock, const std::vector<Socket>& taken, bool first,
                            uint64_t* connId) {
  char raw[sizeof(SockHello)];
  Status got = sock.recvAll(raw, sizeof(raw), deadlineIn(authTimeoutS()));
  if (!got.ok()) return got.prefix("no hello: ");
  SockHello hello{};
  COLL_CHECK(parseSockHello(raw, sizeof(raw), l.nsocks, &hello));
  if (!macEqual(hello.mac, listenerProof(l.key, AuthPurpose::kSocketNet, l.nonce, bytesOf(hello.body))))
    return remoteError("wrong key, or a hello recorded for another listener");
  const uint32_t idx = hello.body.idx;
  if (taken[idx].valid() || (!first && hello.body.connId != *connId))
    return remoteError("socket " + std::to_string(idx) + " is not one this listener waits for (a replay?)");
  *connId = hello.body.connId;
  return idx;
}

// Helper threads per connection (0: the caller pumps) and sockets per connection.
int helperThreads() { return static_cast<int>(std::clamp<int64_t>(param(IntParam::SOCKET_NTHREADS), 0, 16)); }
uint32_t socketsPerConn() {
  int64_t per = std::clamp<int64_t>(param(IntParam::NSOCKS_PERTHREAD), 1, 16);
  return static_cast<uint32_t>(std::max(1, helperThreads()) * per);
}

bool isLoopback(const SockAddr& a) {
  if (a.family() == AF_INET) return (ntohl(a.u.in4.sin_addr.s_addr) >> 24) == 127;
  return a.family() == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&a.u.in6.sin6_addr);
}

// The PCI function behind an interface ("" for virtual ones: lo, veth, bridges).
std::string interfacePciPath(const std::string& ifname) {
  char buf[PATH_MAX];
  return realpath(("/sys/class/net/" + ifname + "/device").c_str(), buf) ? std::string(buf) : std::string();
}

class SocketBackend : public NetBackend {
 public:
  // Every interface COLL_SOCKET_IFNAME names is a device (a rail: channels spread over
  // them); without it, the first interface found only (others may not reach the peers).
  SocketBackend() {
    // One device per interface (its first address: IPv4 before IPv6, findInterfaces).
    for (NetIf& i : findInterfaces())
      if (std::none_of(ifs_.begin(), ifs_.end(), [&](const NetIf& o) { return o.name == i.name; }))
        ifs_.push_back(std::move(i));
    // A loopback interface is a rail only when nothing else is (an exclusion list such as
    // "^docker" matches lo too, which no other host reaches).
    if (std::any_of(ifs_.begin(), ifs_.end(), [](const NetIf& i) { return !isLoopback(i.addr); }))
      std::erase_if(ifs_, [](const NetIf& i) { return isLoopback(i.addr); });
    if (param(StringParam::SOCKET_IFNAME).empty() && ifs_.size() > 1) ifs_.resize(1);
    std::string list;
    for (const NetIf& i : ifs_) list += (list.empty() ? "" : ", ") + i.name + " (" + i.addr.str() + ")";
    if (!ifs_.empty()) COLL_INFO(NET, "socket backend: %s", list.c_str());
  }
  const char* name() const override { return "Socket"; }
  int devices() override { return static_cast<int>(ifs_.size()); }
  Status properties(int dev, NetProperties* p) override {
    if (dev < 0 || dev >= devices()) return invalidArgument("socket device " + std::to_string(dev));
    p->name = ifs_[static_cast<size_t>(dev)].name;
    p->speedMbps = 10000;
    p->maxComms = 65536;
    p->hostMemOnly = true;
    p->pciPath = interfacePciPath(p->name);
    return okStatus();
  }

  Result<std::unique_ptr<NetListenComm>> listen(int dev, const AuthKey& key, NetHandle* handle) override {
    if (dev < 0 || dev >= devices())
      return Status(Code::kSystem, "socket backend: no usable interface (COLL_SOCKET_IFNAME=\"" +
                                       param(StringParam::SOCKET_IFNAME) + "\")");
    auto l = std::make_unique<SockListen>();
    SockAddr a = ifs_[static_cast<size_t>(dev)].addr;
    a.setPort(0);
    COLL_ASSIGN(l->listener, Socket::listen(&a));
    l->nsocks = socketsPerConn();  // read per connection: may change between comms
    l->key = key;
    COLL_ASSIGN(l->nonce, randomNonce());
    SockHandle h{kSockMagic, l->nsocks, a, l->nonce};
    std::memset(handle->bytes, 0, sizeof(handle->bytes));
    std::memcpy(handle->bytes, &h, sizeof(h));
    return std::unique_ptr<NetListenComm>(std::move(l));
  }

  Result<std::unique_ptr<NetSendComm>> connect(int, const NetHandle& handle, const AuthKey& key,
                                               const std::atomic<bool>* cancel) override {
    SockHandle h;
    COLL_CHECK(parseSockHandle(handle.bytes, sizeof(handle.bytes), &h));
    auto s = std::make_unique<SockSend>();
    uint64_t connId = 0;
    COLL_CHECK(randomBytes(&connId, sizeof(connId)));
    std::vector<Socket> socks;
    for (uint32_t i = 0; i < h.nsocks; ++i) {
      COLL_ASSIGN(Socket sock, Socket::connect(h.addr, deadlineIn(30), cancel));
      SockHello hello{{kSockMagic, i, connId}, {}};
      hello.mac = listenerProof(key, AuthPurpose::kSocketNet, h.nonce, bytesOf(hello.body));
      COLL_CHECK(sock.sendAll(&hello, sizeof(hello), deadlineIn(30)));
      COLL_CHECK(sock.setNonBlocking(true));
      socks.push_back(std::move(sock));
    }
    s->conn.init(std::move(socks), true, h.addr.str(), std::min<int>(helperThreads(), h.nsocks));
    return std::unique_ptr<NetSendComm>(std::move(s));
  }

  // Takes the connector's sockets. A connection that does not prove the key (or is not a
  // socket of this connection) is closed with a WARN, and the listener waits on for the
  // real ones (they connected before their peer learnt of any failure, so they are queued).
  Result<std::unique_ptr<NetRecvComm>> accept(NetListenComm* lc) override {
    auto* l = static_cast<SockListen*>(lc);
    auto r = std::make_unique<SockRecv>();
    std::vector<Socket> socks(l->nsocks);
    uint64_t connId = 0;
    std::string peer;
    const Deadline deadline = deadlineIn(60);
    for (uint32_t n = 0; n < l->nsocks;) {
      COLL_ASSIGN(Socket sock, l->listener.accept(deadline));
      Result<uint32_t> idx = checkHello(*l, sock, socks, n == 0, &connId);
      if (!idx.ok()) {
        COLL_WARN(NET, "socket net: rejected a connection from %s: %s", sock.peer().str().c_str(),
                  idx.status().message().c_str());
        continue;
      }
      COLL_CHECK(sock.setNonBlocking(true));
      peer = sock.peer().str();
      socks[idx.value()] = std::move(sock);
      ++n;
    }
    r->conn.init(std::move(socks), false, peer, std::min<int>(helperThreads(), l->nsocks));
    return std::unique_ptr<NetRecvComm>(std::move(r));
  }

  Result<NetRequest*> isend(NetSendComm* sc, const void* data, size_t size) override {
    SockConn& c = static_cast<SockSend*>(sc)->conn;
    COLL_CHECK(c.error());
    if (size > kLenMask)
      return invalidArgument("socket send of " + std::to_string(size) + " bytes: at most " + std::to_string(kLenMask) +
                             " per message");
    auto* r = new SockRequest();
    r->conn = &c;
    r->send = true;
    r->data = const_cast<char*>(static_cast<const char*>(data));
    r->size = size;
    const size_t pad = socketHeaderPad(data, size);
    r->hdr = size | (uint64_t{pad} << kPadShift);
    c.reqs.push_back(r);
    c.queue(0, {r, reinterpret_cast<char*>(&r->hdr), sizeof(r->hdr), 0});
    if (pad > 0) c.queue(0, {r, const_cast<char*>(kZeros), pad, 0});
    c.queueData(r);
    return static_cast<NetRequest*>(r);
  }

  Result<NetRequest*> irecv(NetRecvComm* rc, void* data, size_t maxSize) override {
    SockConn& c = static_cast<SockRecv*>(rc)->conn;
    COLL_CHECK(c.error());
    auto* r = new SockRequest();
    r->conn = &c;
    r->data = static_cast<char*>(data);
    r->size = maxSize;
    c.reqs.push_back(r);
    return static_cast<NetRequest*>(r);
  }

  Status test(NetRequest* req, bool* done, size_t* size) override {
    auto* r = static_cast<SockRequest*>(req);
    SockConn& c = *r->conn;
    // A connection closing (or failing) after this request completed does not fail it:
    // a sender that finished may close while its last messages wait here to be read.
    Status st = c.progress();
    *done = r->state == SockRequest::kPayload && r->pending.load(std::memory_order_acquire) == 0;
    if (!st.ok() && !*done) return st;
    if (!*done && !r->send) COLL_CHECK(c.closedUnder(r));
    if (*done) {
      *size = r->size;
      if (c.reqs.empty() || c.reqs.front() != r) return internalError("socket requests tested out of order");
      c.reqs.pop_front();
      delete r;
    }
    return okStatus();
  }

  // Helper threads go on sending queued data by themselves.
  bool sendsOnlyWhenTested(NetSendComm* sc) override { return !static_cast<SockSend*>(sc)->conn.hasHelpers(); }

  bool duplex() const override { return true; }
  Result<std::unique_ptr<NetRecvComm>> reverse(NetSendComm* sc) override {
    COLL_ASSIGN(auto r, reverseOf<SockRecv>(*static_cast<SockSend*>(sc), false));
    return std::unique_ptr<NetRecvComm>(std::move(r));
  }
  Result<std::unique_ptr<NetSendComm>> reverse(NetRecvComm* rc) override {
    COLL_ASSIGN(auto s, reverseOf<SockSend>(*static_cast<SockRecv*>(rc), true));
    return std::unique_ptr<NetSendComm>(std::move(s));
  }

  WaitTarget waitTarget(NetSendComm* sc) override { return static_cast<SockSend*>(sc)->conn.waitTarget(); }
  WaitTarget waitTarget(NetRecvComm* rc) override { return static_cast<SockRecv*>(rc)->conn.waitTarget(); }

 private:
  std::vector<NetIf> ifs_;
};

}  // namespace

std::unique_ptr<NetBackend> makeSocketBackend() { return std::make_unique<SocketBackend>(); }

SockAddr socketHandleAddr(const NetHandle& handle) {
  SockHandle h;
  std::memcpy(&h, handle.bytes, sizeof(h));
  return h.addr;
}

void setSocketHandleAddr(NetHandle* handle, const SockAddr& addr) {
  SockHandle h;
  std::memcpy(&h, handle->bytes, sizeof(h));
  h.addr = addr;
  std::memcpy(handle->bytes, &h, sizeof(h));
}

}  // namespace coll

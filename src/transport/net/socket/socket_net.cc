#include "transport/net/socket/socket_net.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "bootstrap/socket.h"
#include "core/log.h"
#include "core/param.h"

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

namespace {

constexpr uint32_t kSockMagic = 0xC0115C0Cu;

struct SockHandle {
  uint32_t magic;
  uint32_t nsocks;
  SockAddr addr;
};
static_assert(sizeof(SockHandle) <= kNetHandleBytes, "handle too large");

struct SockHello {
  uint32_t magic;
  uint32_t idx;
  uint64_t connId;
};

struct SockRequest;
struct SockTask {
  SockRequest* req;
  char* ptr;
  size_t len;
  size_t off;
};

struct SockConn {
  ~SockConn();
  std::vector<Socket> socks;
  std::vector<std::deque<SockTask>> queues;
  std::deque<SockRequest*> reqs;  // in posting order
  std::string peerName;
  bool failed = false;
  Status error;
};

struct SockRequest : NetRequest {
  SockConn* conn;
  bool send;
  char* data;
  size_t size;   // send: bytes; recv: capacity, then bytes
  uint64_t hdr;  // length on the wire
  enum State { kHeaderUnqueued, kHeaderQueued, kData } state;
  int pending;   // tasks not finished
};

SockConn::~SockConn() {
  for (SockRequest* r : reqs) delete r;
}

class SockListen : public NetListenComm {
 public:
  Socket listener;
  uint32_t nsocks;
};
class SockSend : public NetSendComm {
 public:
  SockConn conn;
};
class SockRecv : public NetRecvComm {
 public:
  SockConn conn;
};

// Moves bytes on one socket until it would block. Returns progress made.
Status pumpSocket(SockConn& c, size_t i, bool send, bool* progressed) {
  auto& q = c.queues[i];
  int fd = c.socks[i].fd();
  while (!q.empty()) {
    SockTask& t = q.front();
    ssize_t n = send ? ::send(fd, t.ptr + t.off, t.len - t.off, MSG_NOSIGNAL | MSG_DONTWAIT)
                     : ::recv(fd, t.ptr + t.off, t.len - t.off, MSG_DONTWAIT);
    if (n > 0) {
      *progressed = true;
      t.off += static_cast<size_t>(n);
      if (t.off == t.len) {
        --t.req->pending;
        q.pop_front();
      }
      continue;
    }
    if (n == 0 && !send)
      return remoteError("connection closed by " + c.peerName + " (peer exited or was killed)");
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
    return systemError(std::string(send ? "send to " : "recv from ") + c.peerName, errno);
  }
  return okStatus();
}

void queueData(SockRequest* r) {
  SockConn& c = *r->conn;
  size_t partLen;
  int parts = socketStripe(r->size, static_cast<int>(c.socks.size()), &partLen);
  for (int i = 0; i < parts && r->size > 0; ++i) {
    size_t off = static_cast<size_t>(i) * partLen;
    if (off >= r->size) break;
    size_t len = std::min(partLen, r->size - off);
    c.queues[i].push_back({r, r->data + off, len, 0});
    ++r->pending;
  }
  r->state = SockRequest::kData;
}

Status progressConn(SockConn& c, bool send) {
  if (c.failed) return c.error;
  bool progressed = true;
  while (progressed) {
    progressed = false;
    if (!send) {
      // Receive headers in order: the next request's header may be queued only after the
      // previous request's data parts are queued behind socket 0.
      for (SockRequest* r : c.reqs) {
        if (r->state == SockRequest::kData) continue;
        if (r->state == SockRequest::kHeaderUnqueued) {
          c.queues[0].push_back({r, reinterpret_cast<char*>(&r->hdr), sizeof(r->hdr), 0});
          ++r->pending;
          r->state = SockRequest::kHeaderQueued;
        }
        if (r->pending > 0) break;  // header still on its way
        if (r->hdr > r->size) {
          c.failed = true;
          c.error = remoteError("message of " + std::to_string(r->hdr) + " bytes from " +
                                c.peerName + " exceeds the posted " + std::to_string(r->size) +
                                " bytes (do the ranks use the same COLL_BUFFSIZE?)");
          return c.error;
        }
        r->size = r->hdr;
        queueData(r);
        progressed = true;
      }
    }
    for (size_t i = 0; i < c.socks.size(); ++i) {
      Status st = pumpSocket(c, i, send, &progressed);
      if (!st.ok()) {
        c.failed = true;
        c.error = st;
        return st;
      }
    }
  }
  return okStatus();
}

class SocketBackend : public NetBackend {
 public:
  SocketBackend() {
    ifs_ = findInterfaces();
    if (!ifs_.empty())
      COLL_INFO(NET, "socket backend: %s (%s)", ifs_[0].name.c_str(),
                ifs_[0].addr.str().c_str());
  }
  const char* name() const override { return "Socket"; }
  int devices() override { return ifs_.empty() ? 0 : 1; }
  Status properties(int dev, NetProperties* p) override {
    if (dev != 0 || ifs_.empty()) return invalidArgument("socket device " + std::to_string(dev));
    p->name = ifs_[0].name;
    p->speedMbps = 10000;
    p->maxComms = 65536;
    p->hostMemOnly = true;
    return okStatus();
  }

  Result<std::unique_ptr<NetListenComm>> listen(int dev, NetHandle* handle) override {
    if (dev != 0 || ifs_.empty())
      return Status(Code::kSystem, "socket backend: no usable interface (COLL_SOCKET_IFNAME=\"" +
                                       paramString("SOCKET_IFNAME") + "\")");
    auto l = std::make_unique<SockListen>();
    SockAddr a = ifs_[0].addr;
    a.setPort(0);
    COLL_ASSIGN(l->listener, Socket::listen(&a));
    // Read per connection so that a process may change it between communicators.
    l->nsocks = static_cast<uint32_t>(std::clamp<int64_t>(
        paramInt("NSOCKS_PERTHREAD") * paramInt("SOCKET_NTHREADS"), 1, 64));
    SockHandle h{kSockMagic, l->nsocks, a};
    std::memset(handle->bytes, 0, sizeof(handle->bytes));
    std::memcpy(handle->bytes, &h, sizeof(h));
    return std::unique_ptr<NetListenComm>(std::move(l));
  }

  Result<std::unique_ptr<NetSendComm>> connect(int, const NetHandle& handle) override {
    SockHandle h;
    std::memcpy(&h, handle.bytes, sizeof(h));
    if (h.magic != kSockMagic || h.nsocks == 0 || h.nsocks > 64)
      return internalError("corrupt socket handle");
    auto s = std::make_unique<SockSend>();
    uint64_t connId = std::random_device{}();
    for (uint32_t i = 0; i < h.nsocks; ++i) {
      COLL_ASSIGN(Socket sock, Socket::connect(h.addr, deadlineIn(30)));
      SockHello hello{kSockMagic, i, connId};
      COLL_CHECK(sock.sendAll(&hello, sizeof(hello), deadlineIn(30)));
      COLL_CHECK(sock.setNonBlocking(true));
      s->conn.socks.push_back(std::move(sock));
    }
    s->conn.queues.resize(h.nsocks);
    s->conn.peerName = h.addr.str();
    return std::unique_ptr<NetSendComm>(std::move(s));
  }

  Result<std::unique_ptr<NetRecvComm>> accept(NetListenComm* lc) override {
    auto* l = static_cast<SockListen*>(lc);
    auto r = std::make_unique<SockRecv>();
    r->conn.socks.resize(l->nsocks);
    uint64_t connId = 0;
    for (uint32_t n = 0; n < l->nsocks; ++n) {
      COLL_ASSIGN(Socket sock, l->listener.accept(deadlineIn(60)));
      SockHello hello{};
      COLL_CHECK(sock.recvAll(&hello, sizeof(hello), deadlineIn(30)));
      if (hello.magic != kSockMagic || hello.idx >= l->nsocks ||
          r->conn.socks[hello.idx].valid() || (n > 0 && hello.connId != connId))
        return internalError("unexpected connection on a socket listener from " +
                             sock.peer().str());
      connId = hello.connId;
      COLL_CHECK(sock.setNonBlocking(true));
      r->conn.peerName = sock.peer().str();
      r->conn.socks[hello.idx] = std::move(sock);
    }
    r->conn.queues.resize(l->nsocks);
    return std::unique_ptr<NetRecvComm>(std::move(r));
  }

  Result<NetRequest*> isend(NetSendComm* sc, const void* data, size_t size) override {
    SockConn& c = static_cast<SockSend*>(sc)->conn;
    if (c.failed) return c.error;
    auto* r = new SockRequest{};
    r->conn = &c;
    r->send = true;
    r->data = const_cast<char*>(static_cast<const char*>(data));
    r->size = size;
    r->hdr = size;
    c.queues[0].push_back({r, reinterpret_cast<char*>(&r->hdr), sizeof(r->hdr), 0});
    r->pending = 1;
    queueData(r);
    c.reqs.push_back(r);
    return static_cast<NetRequest*>(r);
  }

  Result<NetRequest*> irecv(NetRecvComm* rc, void* data, size_t maxSize) override {
    SockConn& c = static_cast<SockRecv*>(rc)->conn;
    if (c.failed) return c.error;
    auto* r = new SockRequest{};
    r->conn = &c;
    r->send = false;
    r->data = static_cast<char*>(data);
    r->size = maxSize;
    r->state = SockRequest::kHeaderUnqueued;
    c.reqs.push_back(r);
    return static_cast<NetRequest*>(r);
  }

  Status test(NetRequest* req, bool* done, size_t* size) override {
    auto* r = static_cast<SockRequest*>(req);
    SockConn& c = *r->conn;
    COLL_CHECK(progressConn(c, r->send));
    *done = r->state == SockRequest::kData && r->pending == 0;
    if (*done) {
      *size = r->size;
      if (c.reqs.empty() || c.reqs.front() != r)
        return internalError("socket requests tested out of order");
      c.reqs.pop_front();
      delete r;
    }
    return okStatus();
  }

  int pollFd(NetSendComm* sc) override { return static_cast<SockSend*>(sc)->conn.socks[0].fd(); }
  int pollFd(NetRecvComm* rc) override { return static_cast<SockRecv*>(rc)->conn.socks[0].fd(); }

 private:
  std::vector<NetIf> ifs_;
};

}  // namespace

std::unique_ptr<NetBackend> makeSocketBackend() { return std::make_unique<SocketBackend>(); }

}  // namespace coll

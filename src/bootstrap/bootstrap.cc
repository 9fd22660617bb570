#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "bootstrap/host_id.h"
#include "bootstrap/root.h"
#include "base/log.h"
#include "base/param.h"

namespace coll {

Result<UniqueIdData> makeUniqueId() {
  UniqueIdData id{};
  id.magic = kIdMagic;
  std::string env = param(StringParam::COMM_ID);
  if (!env.empty()) {
    auto addr = parseSockAddr(env);
    if (!addr.ok()) return invalidArgument("COLL_COMM_ID/NCCL_COMM_ID: " + addr.status().message());
    id.root = addr.take();
    id.flags = kIdFromEnv;
    // Every process derives the same key: from COLL_AUTH_KEY(_FILE), else from the
    // address, which guards against mixing up jobs but not against attackers.
    COLL_ASSIGN(id.key, commIdKey(env));
    return id;
  }
  auto ifs = findInterfaces();
  if (ifs.empty())
    return Status(Code::kSystem,
                  "no usable network interface (COLL_SOCKET_IFNAME=\"" + param(StringParam::SOCKET_IFNAME) + "\")");
  return startRootAt(ifs[0].addr);
}

Result<UniqueIdData> startRootAt(SockAddr addr, const AuthKey* key) {
  UniqueIdData id{};
  id.magic = kIdMagic;
  id.root = addr;
  id.root.setPort(0);
  if (key) {
    id.key = *key;
  } else {
    COLL_ASSIGN(id.key, randomAuthKey());
  }
  COLL_CHECK(startRoot(&id.root, id.key));
  return id;
}

AuthKey childAuthKey(const AuthKey& parent, uint64_t tag, int64_t color) {
  return AuthKey{authMac(parent, "child communicator", {bytesOf(tag), bytesOf(color)})};
}

// Our listener on the interface that reaches the root (same family, same interface
// choice as the root for the usual single-interface case).
Status Bootstrap::listen(int family, SockAddr* addr) {
  auto ifs = findInterfaces();
  auto it = std::find_if(ifs.begin(), ifs.end(), [&](const NetIf& nif) { return nif.addr.family() == family; });
  if (ifs.empty())
    return Status(Code::kSystem,
                  "no usable network interface (COLL_SOCKET_IFNAME=\"" + param(StringParam::SOCKET_IFNAME) + "\")");
  SockAddr mine = it != ifs.end() ? it->addr : ifs[0].addr;
  mine.setPort(0);
  COLL_ASSIGN(listener_, Socket::listen(&mine));
  *addr = mine;
  return okStatus();
}

namespace {

JoinMsg joinMsg(RootMsg kind, int rank, int nranks, const PeerInfo& self, double timeoutS = 0) {
  JoinMsg j{};
  j.magic = kWireMagic;
  j.kind = kind;
  j.rank = rank;
  j.nranks = nranks;
  j.joinTimeoutMs = static_cast<int32_t>(std::min(timeoutS * 1000, 2e9));
  j.info = self;
  return j;
}

}  // namespace

// A rank that cannot join tells the root why (best effort, briefly), so the others fail
// their init at once instead of waiting out the join timeout.
void Bootstrap::tellRootFailed(const UniqueIdData& id, int rank, int nranks, const PeerInfo& self,
                               const std::string& why) {
  auto conn = Socket::connect(id.root, deadlineIn(5), nullptr);
  if (!conn.ok() || !authConnect(conn.value(), id.key, AuthPurpose::kRoot, deadlineIn(5)).ok()) return;
  JoinMsg j = joinMsg(RootMsg::kRankFailed, rank, nranks, self);
  std::snprintf(j.text, sizeof(j.text), "%s", why.c_str());
  (void)conn.value().sendAll(&j, sizeof(j), deadlineIn(5));
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::create(const UniqueIdData& id, int rank, int nranks, PeerInfo self,
                                                     std::shared_ptr<AbortState> abort, double timeoutS) {
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->rank_ = rank;
  b->nranks_ = nranks;
  b->key_ = id.key;
  b->abort_ = std::move(abort);
  b->timeoutS_ = static_cast<double>(param(IntParam::BOOTSTRAP_TIMEOUT_S));
  const double joinS = timeoutS > 0 ? std::min(b->timeoutS_, timeoutS) : b->timeoutS_;

  if ((id.flags & kIdFromEnv) && rank == 0) {
    SockAddr rootAddr = id.root;
    COLL_CHECK(startRoot(&rootAddr, id.key));
  }

  Status listening = b->listen(id.root.family(), &self.bootAddr);
  if (!listening.ok()) {
    tellRootFailed(id, rank, nranks, self, listening.message());
    return listening;
  }

  Deadline deadline = deadlineIn(joinS + 10);
  COLL_CHECK(b->joinRoot(id, deadline));
  const JoinMsg j = joinMsg(RootMsg::kJoin, rank, nranks, self, joinS);
  Status sent = b->root_.sendAll(&j, sizeof(j), deadline, &b->abort_->flag);
  if (!sent.ok()) return sent.prefix("rank " + std::to_string(rank) + ": bootstrap root at " + id.root.str() + ": ");
  RootReply reply{};
  COLL_CHECK(b->readTable(id, &reply, deadline));
  for (int r = 0; r < nranks; ++r)
    if (b->peers_[r].pid == reply.rootPid &&
        std::strncmp(b->peers_[r].hostId, reply.rootHostId, sizeof(reply.rootHostId)) == 0)
      b->rootRank_ = r;
  b->service_ = std::thread([p = b.get()] { p->serviceLoop(); });
  return b;
}

// Connects to the root and proves the key. A root that closes the connection unanswered is
// the last communicator's at this address (COLL_COMM_ID reused), which stops listening
// when it sees a join: this one's root comes up behind it, so we try again.
Status Bootstrap::joinRoot(const UniqueIdData& id, Deadline deadline) {
  const std::string where = "rank " + std::to_string(rank_) + ": bootstrap root at " + id.root.str() + ": ";
  for (;;) {
    auto conn = Socket::connect(id.root, deadlineIn(timeoutS_), &abort_->flag);
    if (!conn.ok())
      return Status(conn.status().code(), "rank " + std::to_string(rank_) + ": cannot reach the bootstrap root at " +
                                              id.root.str() + ": " + conn.status().message());
    root_ = conn.take();
    Status authed = authConnect(root_, id.key, AuthPurpose::kRoot, deadline, &abort_->flag);
    if (authed.ok()) return authed;
    root_.close();
    if (authed.message().find(kAuthNoAnswer) == std::string::npos || std::chrono::steady_clock::now() >= deadline)
      return authed.prefix(where);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The root's answer to our join: the table of every rank's PeerInfo, or why not.
Status Bootstrap::readTable(const UniqueIdData& id, RootReply* reply, Deadline deadline) {
  const std::string root = "rank " + std::to_string(rank_) + ": bootstrap root at " + id.root.str();
  char raw[sizeof(RootReply)];
  Status st = root_.recvAll(raw, sizeof(raw), deadline, &abort_->flag);
  if (!st.ok()) {
    // The root tells a failed init before it closes; a bare close is the end of the
    // process hosting it (the one that made the unique id), whose own log says why.
    const bool gone = st.message().starts_with("connection closed") ||
                      st.message().find("reset by peer") != std::string::npos;
    return Status(st.code(),
                  root + ": waiting for the other ranks: " + st.message() +
                      (gone ? " (the root's process, the one that made the unique id, ended unanswered)" : ""));
  }
  st = parseRootReply(raw, sizeof(raw), nranks_, reply);
  if (!st.ok()) return st.prefix(root + ": ");
  if (reply->kind == RootMsg::kError)
    return remoteError(std::string("bootstrap root refused rank ") + std::to_string(rank_) + ": " + reply->text);
  if (reply->kind != RootMsg::kTable)
    return remoteError(root + ": unexpected reply kind " + std::to_string(static_cast<uint32_t>(reply->kind)));
  std::vector<char> table(sizeof(PeerInfo) * static_cast<size_t>(nranks_));
  COLL_CHECK(root_.recvAll(table.data(), table.size(), deadline, &abort_->flag));
  st = parsePeerTable(table.data(), table.size(), nranks_, &peers_);
  if (!st.ok()) return st.prefix(root + ": ");
  return okStatus();
}

Bootstrap::~Bootstrap() {
  stop_.store(true);
  if (service_.joinable()) service_.join();
}

void Bootstrap::leave() {
  {
    // Under the lock: the service thread reads it (reportState) until the join below.
    std::lock_guard<std::mutex> lock(rootMu_);
    if (left_) return;
    left_ = true;
  }
  stop_.store(true);
  if (service_.joinable()) service_.join();
  RootReply bye{};
  bye.magic = kWireMagic;
  bye.kind = RootMsg::kBye;
  std::lock_guard<std::mutex> lock(rootMu_);
  if (root_.valid()) (void)root_.sendAll(&bye, sizeof(bye), deadlineIn(2));
  root_.close();
}

void Bootstrap::announceFailure(const std::string& why) { tellRoot(RootMsg::kRankFailed, why); }
void Bootstrap::announceLeaving(const std::string& why) { tellRoot(RootMsg::kRankLeft, why); }

void Bootstrap::tellRoot(RootMsg kind, const std::string& why) {
  RootReply msg{};
  msg.magic = kWireMagic;
  msg.kind = kind;
  msg.rank = rank_;
  std::snprintf(msg.text, sizeof(msg.text), "%s", why.c_str());
  std::lock_guard<std::mutex> lock(rootMu_);
  if (root_.valid() && !left_) (void)root_.sendAll(&msg, sizeof(msg), deadlineIn(2));
}

bool Bootstrap::reportState(ReportWhy why) {
  RootReply head{};
  head.magic = kWireMagic;
  head.kind = RootMsg::kState;
  head.rank = rank_;
  const OpStateMsg state = opState_.snapshot(why);
  std::lock_guard<std::mutex> lock(rootMu_);
  if (!root_.valid() || left_) return false;
  Status st = root_.sendAll(&head, sizeof(head), deadlineIn(2));
  if (st.ok()) st = root_.sendAll(&state, sizeof(state), deadlineIn(2));
  return st.ok();
}

// The root's finding about a stall: the failing operation's error carries it; after a
// timeout it is the communicator's error (this rank may be one that never called the
// operation the others wait in).
void Bootstrap::takeFinding(const RootReply& msg) {
  const std::string finding = std::string(kFindingPrefix) + msg.text;
  opState_.setFinding(finding);
  const std::string asker = "rank " + std::to_string(msg.rank);
  if (msg.flags & kReportTimedOut) abort_->set(Code::kTimeout, "timed out on " + asker + "; " + finding);
}

Status Bootstrap::connectTo(int peer, const std::atomic<bool>* cancel) {
  COLL_ASSIGN(Socket s, Socket::connect(peers_[peer].bootAddr, deadlineIn(timeoutS_), cancel));
  Status authed = authConnect(s, key_, AuthPurpose::kPeer, deadlineIn(timeoutS_), cancel);
  if (!authed.ok()) return authed.prefix("bootstrap connection to rank " + std::to_string(peer) + ": ");
  HelloMsg h{kWireMagic, rank_};
  COLL_CHECK(s.sendAll(&h, sizeof(h), deadlineIn(timeoutS_), cancel));
  out_.emplace(peer, std::move(s));
  return okStatus();
}

Status Bootstrap::send(int peer, uint64_t tag, const void* data, size_t len, bool ignoreAbort) {
  std::lock_guard<std::mutex> lock(sendMu_);
  const std::atomic<bool>* cancel = ignoreAbort ? &abort_->closing : &abort_->flag;
  if (!out_.count(peer)) COLL_CHECK(connectTo(peer, cancel));
  Socket& s = out_.at(peer);
  FrameHeader h{tag, len};
  Status st = s.sendAll(&h, sizeof(h), deadlineIn(timeoutS_), cancel);
  if (st.ok() && len) st = s.sendAll(data, len, deadlineIn(timeoutS_), cancel);
  if (!st.ok())
    return Status(st.code(), "bootstrap send to rank " + std::to_string(peer) + " (" + peers_[peer].hostname +
                                 "): " + st.message());
  return okStatus();
}

Status Bootstrap::recv(int peer, uint64_t tag, std::vector<char>* out, bool ignoreAbort) {
  return receive(peer, tag, out, ignoreAbort, timeoutS_);
}

Status Bootstrap::recvWithin(int peer, uint64_t tag, std::vector<char>* out, double timeoutS) {
  return receive(peer, tag, out, false, timeoutS);
}

Status Bootstrap::receive(int peer, uint64_t tag, std::vector<char>* out, bool ignoreAbort, double timeoutS) {
  std::unique_lock<std::mutex> lock(mu_);
  auto key = std::make_pair(peer, tag);
  const Deadline deadline = timeoutS > 0 ? deadlineIn(timeoutS) : Deadline::max();
  for (;;) {
    auto it = inbox_.find(key);
    if (it != inbox_.end() && !it->second.empty()) {
      *out = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) inbox_.erase(it);
      return okStatus();
    }
    if (abort_->raised() && !ignoreAbort) return abort_->status();
    if (abort_->closing.load()) return invalidUsage("bootstrap: the communicator is being freed");
    if (std::chrono::steady_clock::now() >= deadline)
      return timeoutError("bootstrap: no message from rank " + std::to_string(peer) + " (tag " + std::to_string(tag) +
                          ") within " + std::to_string(static_cast<int>(timeoutS)) + " s");
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

Status Bootstrap::recv(int peer, uint64_t tag, void* data, size_t len, bool ignoreAbort) {
  std::vector<char> buf;
  COLL_CHECK(recv(peer, tag, &buf, ignoreAbort));
  if (buf.size() != len)
    return internalError("bootstrap message from rank " + std::to_string(peer) + " has " + std::to_string(buf.size()) +
                         " bytes, expected " + std::to_string(len));
  std::memcpy(data, buf.data(), len);
  return okStatus();
}

Status Bootstrap::allGather(void* data, size_t blockLen, uint64_t tag, bool ignoreAbort) {
  char* base = static_cast<char*>(data);
  int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  for (int s = 0; s < nranks_ - 1; ++s) {
    int sendBlock = (rank_ - s + nranks_) % nranks_;
    int recvBlock = (rank_ - s - 1 + nranks_) % nranks_;
    COLL_CHECK(send(next, tag, base + sendBlock * blockLen, blockLen, ignoreAbort));
    COLL_CHECK(recv(prev, tag, base + recvBlock * blockLen, blockLen, ignoreAbort));
  }
  return okStatus();
}

// A frame from an authenticated peer that breaks the limits (wire.h) fails the
// communicator naming that peer: its later frames cannot be trusted to line up, and the
// ranks waiting for them should hear why now rather than at their timeout.
Status Bootstrap::readFrame(int idx) {
  InConn& c = in_[idx];
  char raw[sizeof(FrameHeader)];
  COLL_CHECK(c.sock.recvAll(raw, sizeof(raw), deadlineIn(timeoutS_)));
  FrameHeader h{};
  Status st = parseFrameHeader(raw, sizeof(raw), &h);
  if (!st.ok()) {
    st.prefix("bootstrap: rank " + std::to_string(c.from) + " (" + peers_[c.from].hostname + ", " +
              c.sock.peer().str() + ") sent a bad frame: ");
    COLL_WARN(BOOTSTRAP, "%s", st.message().c_str());
    abort_->set(st.code(), st.message());
    return st;
  }
  std::vector<char> buf(h.len);
  if (h.len) COLL_CHECK(c.sock.recvAll(buf.data(), h.len, deadlineIn(timeoutS_)));
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_[{c.from, h.tag}].push_back(std::move(buf));
  }
  cv_.notify_all();
  return okStatus();
}

// A connection from another rank proves the key before anything else is read from it; one
// that does not is dropped (the service thread is held authTimeoutS() at most).
void Bootstrap::acceptPeer() {
  auto s = listener_.accept(deadlineIn(1));
  if (!s.ok()) return;
  Socket sock = s.take();
  Status authed = authAccept(sock, key_, AuthPurpose::kPeer, deadlineIn(authTimeoutS()));
  if (!authed.ok()) {
    COLL_WARN(BOOTSTRAP, "rejected a bootstrap connection from %s: %s", sock.peer().str().c_str(),
              authed.message().c_str());
    return;
  }
  char raw[sizeof(HelloMsg)];
  HelloMsg h{};
  Status st = sock.recvAll(raw, sizeof(raw), deadlineIn(5));
  if (st.ok()) st = parseHello(raw, sizeof(raw), nranks_, &h);
  if (st.ok()) {
    in_.push_back({std::move(sock), h.fromRank});
    return;
  }
  COLL_WARN(BOOTSTRAP, "dropped a bootstrap connection from %s: %s", sock.peer().str().c_str(), st.message().c_str());
}

// A message from the root: another rank failed or left, or the root is gone.
void Bootstrap::readRoot() {
  RootReply msg{};
  char raw[sizeof(RootReply)];
  Status st = root_.recvAll(raw, sizeof(raw), deadlineIn(5));
  if (st.ok()) {
    st = parseRootReply(raw, sizeof(raw), nranks_, &msg);
    if (!st.ok()) {
      st.prefix("bootstrap: bad message from the root at " + root_.peer().str() + ": ");
      COLL_WARN(BOOTSTRAP, "%s", st.message().c_str());
      abort_->set(st.code(), st.message());
    }
  }
  if (st.ok() && msg.kind == RootMsg::kStateQuery) {
    (void)reportState(ReportWhy::kAnswer);
    return;
  }
  if (st.ok() && msg.kind == RootMsg::kReport) {
    takeFinding(msg);
    return;
  }
  if (st.ok() && msg.kind == RootMsg::kRankFailed) {
    abort_->set(Code::kRemote, msg.text);
  } else if (st.ok() && msg.kind == RootMsg::kRankLeft) {
    abort_->setPeerGone(msg.text, msg.rank);
  } else if (!st.ok() && !stop_.load()) {
    std::string who = rootRank_ >= 0
                          ? "rank " + std::to_string(rootRank_) + " (pid " + std::to_string(peers_[rootRank_].pid) +
                                " on " + peers_[rootRank_].hostname + ")"
                          : std::string("the process that created the unique id");
    abort_->setPeerGone("lost the bootstrap root hosted by " + who + ": it exited or was killed");
  }
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(rootMu_);
    root_.close();
  }
}

void Bootstrap::serviceLoop() {
  setLogRank(rank_);
  while (!stop_.load()) {
    std::vector<pollfd> fds;
    fds.push_back({listener_.fd(), POLLIN, 0});
    fds.push_back({root_.fd(), POLLIN, 0});  // -1 once closed: poll skips it
    for (auto& c : in_) fds.push_back({c.sock.fd(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), 100);
    opState_.tick();  // dates the state's changes for the hang report, to this poll's 100 ms
    if (rc <= 0) continue;
    if (fds[0].revents) acceptPeer();
    if (root_.valid() && fds[1].revents) readRoot();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      int idx = static_cast<int>(i - 2);
      if (!readFrame(idx).ok()) in_[idx].sock.close();
    }
    std::erase_if(in_, [](const InConn& c) { return !c.sock.valid(); });
  }
}

}  // namespace coll

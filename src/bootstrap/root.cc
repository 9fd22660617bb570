#include "bootstrap/root.h"

#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/host_id.h"
#include "base/log.h"
#include "base/param.h"

namespace coll {

namespace {

class Root {
 public:
  Root(Socket listener, const AuthKey& key) : listener_(std::move(listener)), key_(key) {}
  void run();

 private:
  void sendReply(Socket& s, RootMsg kind, int rank, const std::string& text);
  void refuse(Socket& s, const std::string& text) {
    COLL_WARN(BOOTSTRAP, "root: %s", text.c_str());
    sendReply(s, RootMsg::kError, -1, text);
  }
  void handleJoin(Socket s);
  void failJoin(const JoinMsg& j, Socket& s);
  void failJoined();  // tells every rank that joined that the init failed (failed_), and drops it
  bool gather();
  void monitor();

  Socket listener_;
  AuthKey key_;
  int nranks_ = -1;
  std::vector<Socket> ranks_;
  std::vector<PeerInfo> infos_;
  int joined_ = 0;
  std::string failed_;  // a rank's reason for failing before it joined: the init fails
};

void Root::sendReply(Socket& s, RootMsg kind, int rank, const std::string& text) {
  RootReply r{};
  r.magic = kWireMagic;
  r.kind = kind;
  r.rank = rank;
  r.rootPid = getpid();
  std::snprintf(r.rootHostId, sizeof(r.rootHostId), "%s", localHostId().c_str());
  std::snprintf(r.text, sizeof(r.text), "%s", text.c_str());
  (void)s.sendAll(&r, sizeof(r), deadlineIn(5));
}

// A connection that does not prove the key is dropped before anything else is read from
// it; the root goes on waiting for the ranks, within the join deadline.
void Root::handleJoin(Socket s) {
  Status authed = authAccept(s, key_, AuthPurpose::kRoot, deadlineIn(kAuthTimeoutS));
  if (!authed.ok()) {
    COLL_WARN(BOOTSTRAP, "root: rejected a connection from %s: %s", s.peer().str().c_str(), authed.message().c_str());
    return;
  }
  JoinMsg j{};
  char raw[sizeof(JoinMsg)];
  Status st = s.recvAll(raw, sizeof(raw), deadlineIn(10));
  if (!st.ok()) {
    COLL_WARN(BOOTSTRAP, "root: dropped a connection from %s: %s", s.peer().str().c_str(), st.message().c_str());
    return;
  }
  st = parseJoinMsg(raw, sizeof(raw), &j);
  if (!st.ok()) return refuse(s, "a join from " + s.peer().str() + " is malformed: " + st.message());
  if (j.kind == RootMsg::kRankFailed) return failJoin(j, s);
  if (nranks_ < 0) {
    nranks_ = j.nranks;
    ranks_.resize(nranks_);
    infos_.resize(nranks_);
  } else if (j.nranks != nranks_) {
    return refuse(s, "rank " + std::to_string(j.rank) + " says nranks=" + std::to_string(j.nranks) +
                         " but ranks before it said nranks=" + std::to_string(nranks_));
  }
  if (ranks_[j.rank].valid())
    return refuse(s, "rank " + std::to_string(j.rank) + " joined twice (first from pid " +
                         std::to_string(infos_[j.rank].pid) + " on " + infos_[j.rank].hostname + ", again from pid " +
                         std::to_string(j.info.pid) + " on " + j.info.hostname + ")");
  infos_[j.rank] = j.info;
  ranks_[j.rank] = std::move(s);
  ++joined_;
}

// A rank that could not join (no interface, no listener) told us why: every rank that
// joined, and every one that joins later, fails its init with that reason.
void Root::failJoin(const JoinMsg& j, Socket& s) {
  const std::string why(j.text, strnlen(j.text, sizeof(j.text)));
  failed_ = "rank " + std::to_string(j.rank) + " (pid " + std::to_string(j.info.pid) + " on " +
            std::string(j.info.hostname, strnlen(j.info.hostname, sizeof(j.info.hostname))) +
            ") failed before it joined: " + why;
  COLL_WARN(BOOTSTRAP, "root: %s (from %s)", failed_.c_str(), s.peer().str().c_str());
  failJoined();
}

void Root::failJoined() {
  for (auto& r : ranks_)
    if (r.valid()) {
      sendReply(r, RootMsg::kError, -1, failed_);
      r.close();
    }
}

bool Root::gather() {
  double timeout = static_cast<double>(param(IntParam::BOOTSTRAP_TIMEOUT_S));
  Deadline deadline{};
  bool started = false;
  while (nranks_ < 0 || joined_ < nranks_) {
    if (started && std::chrono::steady_clock::now() >= deadline) {
      if (nranks_ < 0) return false;  // only refused connections came: nobody to tell
      std::string missing;
      for (int r = 0; r < nranks_; ++r)
        if (!ranks_[r].valid()) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      std::string text = "rank(s) " + missing + " of " + std::to_string(nranks_) +
                         " never joined within COLL_BOOTSTRAP_TIMEOUT_S=" + std::to_string(static_cast<int>(timeout)) +
                         " s";
      COLL_WARN(BOOTSTRAP, "root: %s", text.c_str());
      for (auto& s : ranks_)
        if (s.valid()) sendReply(s, RootMsg::kError, -1, text);
      return false;
    }
    auto r = listener_.accept(started ? deadline : deadlineIn(3600));
    if (!r.ok()) continue;
    if (!started) {
      started = true;
      deadline = deadlineIn(timeout);
    }
    handleJoin(r.take());
    if (!failed_.empty()) failJoined();  // later joiners hear it too, until the join deadline
  }
  for (int r = 0; r < nranks_; ++r) {
    sendReply(ranks_[r], RootMsg::kTable, r, "");
    (void)ranks_[r].sendAll(infos_.data(), sizeof(PeerInfo) * nranks_, deadlineIn(10));
  }
  COLL_INFO(BOOTSTRAP, "root: all %d ranks joined", nranks_);
  return true;
}

void Root::monitor() {
  listener_.close();
  int open = nranks_;
  std::vector<bool> alive(nranks_, true);
  while (open > 0) {
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int r = 0; r < nranks_; ++r)
      if (alive[r]) {
        fds.push_back({ranks_[r].fd(), POLLIN, 0});
        who.push_back(r);
      }
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      int r = who[i];
      RootReply msg{};
      char raw[sizeof(RootReply)];
      Status st = ranks_[r].recvAll(raw, sizeof(raw), deadlineIn(5));
      const bool read = st.ok();
      if (read) st = parseRootReply(raw, sizeof(raw), nranks_, &msg);
      if (read && !st.ok())  // then treated as that rank gone: the others are told
        COLL_WARN(BOOTSTRAP, "root: rank %d (%s): %s", r, ranks_[r].peer().str().c_str(), st.message().c_str());
      if (st.ok() && (msg.kind == RootMsg::kRankFailed || msg.kind == RootMsg::kRankLeft)) {
        // A rank failed an operation and stays, or is leaving by an abort: the others
        // learn why (their own wait may never end otherwise, e.g. for data it will not send).
        for (int o = 0; o < nranks_; ++o)
          if (alive[o] && o != r) sendReply(ranks_[o], msg.kind, r, msg.text);
        continue;
      }
      alive[r] = false;
      --open;
      bool clean = st.ok() && msg.kind == RootMsg::kBye;
      ranks_[r].close();
      if (clean) continue;
      std::string text = "rank " + std::to_string(r) + " (pid " + std::to_string(infos_[r].pid) + " on " +
                         infos_[r].hostname + ") exited or was killed";
      COLL_WARN(BOOTSTRAP, "root: %s; telling the other ranks", text.c_str());
      for (int o = 0; o < nranks_; ++o)
        if (alive[o]) sendReply(ranks_[o], RootMsg::kRankFailed, r, text);
    }
  }
}

void Root::run() {
  if (gather()) monitor();
}

}  // namespace

Status startRoot(SockAddr* addr, const AuthKey& key) {
  COLL_ASSIGN(Socket listener, Socket::listen(addr));
  COLL_INFO(BOOTSTRAP, "root listening on %s", addr->str().c_str());
  auto root = std::make_shared<Root>(std::move(listener), key);
  std::thread([root] { root->run(); }).detach();
  return okStatus();
}

}  // namespace coll

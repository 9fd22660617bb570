#include "bootstrap/root.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/hang_report.h"
#include "bootstrap/host_id.h"
#include "base/log.h"
#include "base/param.h"

namespace coll {

namespace {

class Root : public std::enable_shared_from_this<Root> {
 public:
  Root(Socket listener, const AuthKey& key) : listener_(std::move(listener)), key_(key) {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  }
  ~Root() {
    for (int fd : wake_)
      if (fd >= 0) ::close(fd);
  }
  void run();
  // Stops listening once it is only watching (a new root of this process takes the
  // address); waits up to 2 s for that. A root still gathering its ranks keeps it.
  void yieldAddress();
  std::string address;  // where it listens

 private:
  // How long a report waits for the ranks' answers: a rank's service thread answers at
  // once unless its process is stopped or frozen.
  static constexpr double kRoundS = 1.5;

  void sendReply(Socket& s, RootMsg kind, int rank, const std::string& text, uint32_t flags = 0);
  void refuse(Socket& s, const std::string& text) {
    COLL_WARN(BOOTSTRAP, "root: %s", text.c_str());
    sendReply(s, RootMsg::kError, -1, text);
  }
  void handleJoin(Socket s);
  void failJoin(const JoinMsg& j, Socket& s);
  void failJoined();  // tells every rank that joined that the init failed (failed_), and drops it
  void tellJoined(const std::string& text, bool close);  // kError to each rank that joined
  bool gather();
  void monitor();
  bool readRank(int r);
  Status readState(int r);
  void tellOthers(int from, RootMsg kind, const std::string& text);
  void startRound(const std::string& askedBy, bool forRanks, uint32_t flags);
  bool roundComplete() const;
  void finishRound();
  void acceptStat();
  void takeStatClients();
  static void sendStatReply(Socket& s, const std::string& text);

  Socket listener_;
  AuthKey key_;
  int nranks_ = -1;
  std::vector<Socket> ranks_;
  std::vector<PeerInfo> infos_;
  int joined_ = 0;
  double joinLimitS_ = 0;  // the least join timeout a rank asked for (0: none asked)
  std::string failed_;     // a rank's reason for failing before it joined: the init fails

  // The watch (monitor): who is alive, what each last said of its state.
  std::vector<bool> alive_;
  std::vector<RankView> views_;
  struct Round {  // a hang report being gathered
    bool on = false;
    bool forRanks = false;  // asked by a rank: printed, and its finding sent to every rank
    uint32_t flags = 0;     // kReportTimedOut: the finding fails every rank
    std::string askedBy;
    int asker = -1;  // the first rank that asked
    std::vector<bool> answered;
    Deadline end{};
  };
  Round round_;
  std::string lastCause_;
  std::vector<Socket> statWaiting_;  // collstat clients the round in progress answers
  std::mutex statMu_;
  std::vector<Socket> statQueue_;  // authenticated clients handed over by their threads
  int wake_[2] = {-1, -1};
  std::atomic<bool> yield_{false};  // yieldAddress() asked; the watch closes the listener
  std::mutex yieldMu_;
  std::condition_variable yieldCv_;
};

// This process's roots, by the address they listen on: COLL_COMM_ID reused for the next
// communicator starts a root at the address of one that may still be watching the last.
std::mutex gRootsMu;
std::vector<std::weak_ptr<Root>> gRoots;

void Root::yieldAddress() {
  yield_.store(true);
  char one = 1;
  (void)!::write(wake_[1], &one, 1);
  std::unique_lock<std::mutex> lock(yieldMu_);
  yieldCv_.wait_for(lock, std::chrono::seconds(2), [&] { return !listener_.valid(); });
}

void Root::sendReply(Socket& s, RootMsg kind, int rank, const std::string& text, uint32_t flags) {
  RootReply r{};
  r.magic = kWireMagic;
  r.kind = kind;
  r.rank = rank;
  r.flags = flags;
  r.rootPid = getpid();
  std::snprintf(r.rootHostId, sizeof(r.rootHostId), "%s", localHostId().c_str());
  std::snprintf(r.text, sizeof(r.text), "%s", text.c_str());
  (void)s.sendAll(&r, sizeof(r), deadlineIn(5));
}

// A connection that does not prove the key is dropped before anything else is read from
// it; the root goes on waiting for the ranks, within the join deadline.
void Root::handleJoin(Socket s) {
  Status authed = authAccept(s, key_, AuthPurpose::kRoot, deadlineIn(authTimeoutS()));
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
  const double asked = j.joinTimeoutMs / 1000.0;
  if (asked > 0 && (joinLimitS_ == 0 || asked < joinLimitS_)) joinLimitS_ = asked;
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

void Root::failJoined() { tellJoined(failed_, true); }

void Root::tellJoined(const std::string& text, bool close) {
  for (int r : failureReplyOrder(infos_, getpid(), localHostId()))
    if (ranks_[r].valid()) {
      sendReply(ranks_[r], RootMsg::kError, -1, text);
      if (close) ranks_[r].close();
    }
}

bool Root::gather() {
  const double configured = static_cast<double>(param(IntParam::BOOTSTRAP_TIMEOUT_S));
  double timeout = configured;
  Deadline first{}, deadline{};
  bool started = false;
  while (nranks_ < 0 || joined_ < nranks_) {
    if (started && std::chrono::steady_clock::now() >= deadline) {
      if (nranks_ < 0) return false;  // only refused connections came: nobody to tell
      std::string missing;
      for (int r = 0; r < nranks_; ++r)
        if (!ranks_[r].valid()) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      std::ostringstream why;
      why << "rank(s) " << missing << " of " << nranks_ << " never joined within " << timeout << " s (";
      if (timeout < configured) why << "the least timeout of the ranks that joined)";
      else why << "COLL_BOOTSTRAP_TIMEOUT_S)";
      const std::string text = why.str();
      COLL_WARN(BOOTSTRAP, "root: %s", text.c_str());
      tellJoined(text, false);
      return false;
    }
    auto r = listener_.accept(started ? deadline : deadlineIn(3600));
    if (!r.ok()) continue;
    if (!started) {
      started = true;
      first = std::chrono::steady_clock::now();
    }
    handleJoin(r.take());
    if (joinLimitS_ > 0) timeout = std::min(configured, joinLimitS_);
    deadline = first +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout));
    if (!failed_.empty()) failJoined();  // later joiners hear it too, until the join deadline
  }
  for (int r = 0; r < nranks_; ++r) {
    sendReply(ranks_[r], RootMsg::kTable, r, "");
    (void)ranks_[r].sendAll(infos_.data(), sizeof(PeerInfo) * nranks_, deadlineIn(10));
  }
  COLL_INFO(BOOTSTRAP, "root: all %d ranks joined", nranks_);
  return true;
}

// The watch after everyone joined: a rank whose connection closes without a goodbye is
// announced to the others; ranks' states are collected into hang reports; collstat
// clients (authenticated on threads of their own) are answered with one.
void Root::monitor() {
  alive_.assign(nranks_, true);
  views_.resize(nranks_);
  for (int r = 0; r < nranks_; ++r)
    views_[r].who = "rank " + std::to_string(r) + " (pid " + std::to_string(infos_[r].pid) + " on " +
                    infos_[r].hostname + ")";
  int open = nranks_;
  while (open > 0) {
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}, {wake_[0], POLLIN, 0}};
    std::vector<int> who;
    for (int r = 0; r < nranks_; ++r)
      if (alive_[r]) {
        fds.push_back({ranks_[r].fd(), POLLIN, 0});
        who.push_back(r);
      }
    if (::poll(fds.data(), fds.size(), round_.on ? 50 : -1) < 0) continue;
    if (fds[0].revents) acceptStat();
    if (fds[1].revents) takeStatClients();
    if (yield_.load() && listener_.valid()) {
      std::lock_guard<std::mutex> lock(yieldMu_);
      listener_.close();
      yieldCv_.notify_all();
    }
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents && !readRank(who[i - 2])) --open;
    if (round_.on && (roundComplete() || std::chrono::steady_clock::now() >= round_.end)) finishRound();
  }
  {
    std::lock_guard<std::mutex> lock(yieldMu_);
    listener_.close();
    yieldCv_.notify_all();
  }
  for (auto& c : statWaiting_) sendStatReply(c, "the communicator's ranks have all left");
}

// One message from rank r; false when its connection ended (it left or died).
bool Root::readRank(int r) {
  RootReply msg{};
  char raw[sizeof(RootReply)];
  Status st = ranks_[r].recvAll(raw, sizeof(raw), deadlineIn(5));
  const bool read = st.ok();
  if (read) st = parseRootReply(raw, sizeof(raw), nranks_, &msg);
  if (st.ok() && msg.kind == RootMsg::kState) st = readState(r);
  if (read && !st.ok())  // then treated as that rank gone: the others are told
    COLL_WARN(BOOTSTRAP, "root: rank %d (%s): %s", r, ranks_[r].peer().str().c_str(), st.message().c_str());
  if (st.ok() && msg.kind == RootMsg::kState) return true;
  if (st.ok() && (msg.kind == RootMsg::kRankFailed || msg.kind == RootMsg::kRankLeft)) {
    // A rank failed an operation and stays, or is leaving by an abort: the others
    // learn why (their own wait may never end otherwise, e.g. for data it will not send).
    if (msg.kind == RootMsg::kRankLeft) views_[r].gone = std::string("left by an abort: ") + msg.text;
    tellOthers(r, msg.kind, msg.text);
    return true;
  }
  alive_[r] = false;
  const bool clean = st.ok() && msg.kind == RootMsg::kBye;
  ranks_[r].close();
  views_[r].kind = clean || !views_[r].gone.empty() ? RankView::Kind::kLeft : RankView::Kind::kGone;
  if (clean) {
    if (views_[r].gone.empty()) views_[r].gone = "left (destroyed or aborted its communicator)";
    return false;
  }
  std::string text = views_[r].who + " exited or was killed";
  if (views_[r].gone.empty()) views_[r].gone = "exited or was killed";
  COLL_WARN(BOOTSTRAP, "root: %s; telling the other ranks", text.c_str());
  tellOthers(r, RootMsg::kRankFailed, text);
  return false;
}

void Root::tellOthers(int from, RootMsg kind, const std::string& text) {
  for (int o = 0; o < nranks_; ++o)
    if (alive_[o] && o != from) sendReply(ranks_[o], kind, from, text);
}

// A rank's state: an answer to the round in progress, or a request for a report.
Status Root::readState(int r) {
  char raw[sizeof(OpStateMsg)];
  COLL_CHECK(ranks_[r].recvAll(raw, sizeof(raw), deadlineIn(5)));
  OpStateMsg m{};
  COLL_CHECK(parseOpState(raw, sizeof(raw), nranks_, &m));
  views_[r].state = m;
  views_[r].known = true;
  if (m.why != ReportWhy::kAnswer) {
    static const char* const kWhy[] = {"", "stalled", "timed out", "failed"};
    const uint32_t flags = m.why == ReportWhy::kTimedOut ? kReportTimedOut : 0;
    if (!round_.on || round_.asker < 0) round_.asker = r;
    startRound(views_[r].who + ", " + kWhy[static_cast<int>(m.why)], true, flags);
  }
  if (round_.on) round_.answered[r] = true;
  return okStatus();
}

// Asks every rank for its state (once per round; a round already open takes the new asker
// in). forRanks: the ranks get the finding; flags (kReport*): it fails their communicator.
void Root::startRound(const std::string& askedBy, bool forRanks, uint32_t flags) {
  round_.forRanks |= forRanks;
  round_.flags |= flags;
  if (round_.on) return;
  round_.on = true;
  round_.askedBy = askedBy;
  round_.answered.assign(nranks_, false);
  round_.end = deadlineIn(kRoundS);
  for (int r = 0; r < nranks_; ++r)
    if (alive_[r]) sendReply(ranks_[r], RootMsg::kStateQuery, -1, "");
}

bool Root::roundComplete() const {
  for (int r = 0; r < nranks_; ++r)
    if (alive_[r] && !round_.answered[r]) return false;
  return true;
}

void Root::finishRound() {
  std::vector<RankView> views = views_;
  for (int r = 0; r < nranks_; ++r)
    if (alive_[r]) views[r].kind = round_.answered[r] ? RankView::Kind::kAnswered : RankView::Kind::kNoAnswer;
  const std::string header = "job-wide report of a communicator of " + std::to_string(nranks_) + " ranks (root pid " +
                             std::to_string(getpid()) + " on " + localHostName() + "), asked by " + round_.askedBy +
                             ":";
  const HangReport rep = analyzeHang(views, header);
  if (round_.forRanks) {
    // A rank that asks after the others moved on (idle, or gone by an abort) would learn
    // of a death without where the ranks were: the finding that said where stays the
    // finding, so every rank names the failure alike.
    const bool poorer = lastCause_.rfind(rep.cause + " while ", 0) == 0;
    const std::string& cause = poorer ? lastCause_ : rep.cause;
    // One report per finding: the ranks of one stall ask one after another.
    if (cause != lastCause_) COLL_WARN(BOOTSTRAP, "%s", rep.text.c_str());
    lastCause_ = cause;
    for (int r = 0; r < nranks_; ++r)
      if (alive_[r]) sendReply(ranks_[r], RootMsg::kReport, round_.asker, cause, round_.flags);
  }
  for (auto& c : statWaiting_) sendStatReply(c, rep.text);
  statWaiting_.clear();
  round_ = Round{};
}

// A collstat client: its handshake runs on a thread of its own (a client that stalls
// must not hold the watch), which hands the socket over through the wake pipe.
void Root::acceptStat() {
  auto s = listener_.accept(deadlineIn(1));
  if (!s.ok()) return;
  std::thread([self = shared_from_this(), sock = s.take()]() mutable {
    AuthPurpose asked{};
    Status authed = authAccept(sock, self->key_, AuthPurpose::kStat, deadlineIn(authTimeoutS()), &asked);
    if (asked == AuthPurpose::kRoot) {
      // A rank joining the next communicator at this address (COLL_COMM_ID reused): this
      // root stops listening, the rank retries and finds the new root.
      self->yield_.store(true);
      char one = 1;
      (void)!::write(self->wake_[1], &one, 1);
      return;
    }
    if (!authed.ok()) {
      COLL_WARN(BOOTSTRAP, "root: rejected a connection from %s: %s", sock.peer().str().c_str(),
                authed.message().c_str());
      return;
    }
    std::lock_guard<std::mutex> lock(self->statMu_);
    self->statQueue_.push_back(std::move(sock));
    char one = 1;
    (void)!::write(self->wake_[1], &one, 1);
  }).detach();
}

void Root::takeStatClients() {
  char drain[64];
  while (::read(wake_[0], drain, sizeof drain) > 0) {
  }
  std::lock_guard<std::mutex> lock(statMu_);
  for (auto& c : statQueue_) statWaiting_.push_back(std::move(c));
  statQueue_.clear();
  if (!statWaiting_.empty()) startRound("collstat", false, 0);
}

void Root::sendStatReply(Socket& s, const std::string& text) {
  const StatReplyHeader h{kWireMagic, static_cast<uint32_t>(text.size())};
  if (s.sendAll(&h, sizeof(h), deadlineIn(2)).ok()) (void)s.sendAll(text.data(), text.size(), deadlineIn(2));
  s.close();
}

void Root::run() {
  if (gather()) monitor();
}

}  // namespace

Status startRoot(SockAddr* addr, const AuthKey& key) {
  std::lock_guard<std::mutex> lock(gRootsMu);
  std::erase_if(gRoots, [](const std::weak_ptr<Root>& w) { return w.expired(); });
  if (addr->port() != 0)
    for (auto& w : gRoots)
      if (auto old = w.lock(); old && old->address == addr->str()) old->yieldAddress();
  COLL_ASSIGN(Socket listener, Socket::listen(addr));
  COLL_INFO(BOOTSTRAP, "root listening on %s", addr->str().c_str());
  auto root = std::make_shared<Root>(std::move(listener), key);
  root->address = addr->str();
  gRoots.push_back(root);
  std::thread([root] { root->run(); }).detach();
  return okStatus();
}

std::vector<int> failureReplyOrder(const std::vector<PeerInfo>& infos, int32_t selfPid, const std::string& selfHostId) {
  std::vector<int> others, ours;
  for (int r = 0; r < static_cast<int>(infos.size()); ++r) {
    const PeerInfo& p = infos[r];
    const bool here = p.pid == selfPid && selfHostId == std::string(p.hostId, strnlen(p.hostId, sizeof(p.hostId)));
    (here ? ours : others).push_back(r);
  }
  others.insert(others.end(), ours.begin(), ours.end());
  return others;
}

Result<std::string> queryHangReport(const SockAddr& root, const AuthKey& key, double timeoutS) {
  const Deadline deadline = deadlineIn(timeoutS);
  COLL_ASSIGN(Socket s, Socket::connect(root, deadline, nullptr));
  COLL_CHECK(authConnect(s, key, AuthPurpose::kStat, deadline));
  char raw[sizeof(StatReplyHeader)];
  COLL_CHECK(s.recvAll(raw, sizeof(raw), deadline));
  StatReplyHeader h{};
  COLL_CHECK(parseStatReplyHeader(raw, sizeof(raw), &h));
  std::string text(h.len, '\0');
  COLL_CHECK(s.recvAll(text.data(), text.size(), deadline));
  return text;
}

}  // namespace coll

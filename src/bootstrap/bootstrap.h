// Per-rank bootstrap: joins the root, learns every rank's PeerInfo, and then offers
// tagged, ordered, out-of-band messages between ranks (used to exchange connection
// handles and for small allgathers), plus failure notification.
//
// Concurrency: one service thread per Bootstrap owns the listener, every incoming
// connection and the root connection; it files incoming frames into an inbox. send()
// and recv() may be called from the communicator's thread (one at a time). The failure
// callback runs on the service thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/hang_report.h"
#include "bootstrap/wire.h"
#include "base/status.h"

namespace coll {

// Shared failure state of one communicator: set once (first reason wins) by the
// bootstrap service thread, an executor, or collCommAbort; read by every wait.
struct AbortState {
  std::atomic<bool> flag{false};
  std::atomic<int> code{0};
  std::mutex mu;
  std::string reason;

  // True when this call raised it (false: an earlier reason stands).
  bool set(Code c, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (flag.load()) return false;
    reason = why;
    code.store(static_cast<int>(c));
    flag.store(true, std::memory_order_release);
    return true;
  }
  bool raised() const { return flag.load(std::memory_order_relaxed); }
  // The communicator is being freed (destroy, abort): even waits that outlive a raised
  // flag (a shrink's rendezvous) end.
  std::atomic<bool> closing{false};

  // The bootstrap root vanished, or a rank left by collCommAbort. Not fatal by itself
  // (the process hosting the root may just have finished; the aborted rank may owe this
  // one nothing more); executors treat it as fatal once they are stuck.
  std::atomic<bool> peerGone{false};
  std::string peerGoneWhy;     // written before peerGone is set
  std::vector<int> goneRanks;  // the ranks that left (-1: the root's process), under mu
  void setPeerGone(const std::string& why, int rank = -1) {
    {
      std::lock_guard<std::mutex> lock(mu);
      peerGoneWhy = why;
      goneRanks.push_back(rank);
    }
    peerGone.store(true, std::memory_order_release);
  }
  std::string peerGoneReason() {
    std::lock_guard<std::mutex> lock(mu);
    return peerGoneWhy;
  }
  // Whether `rank` left: what a lane waiting on it waits for will never come.
  bool rankGone(int rank) {
    if (!peerGone.load(std::memory_order_acquire)) return false;
    std::lock_guard<std::mutex> lock(mu);
    return std::find(goneRanks.begin(), goneRanks.end(), rank) != goneRanks.end();
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu);
    return Status(static_cast<Code>(code.load()), reason);
  }
};

Result<UniqueIdData> makeUniqueId();  // honours COLL_COMM_ID
// A new id whose root listens on addr's IP (ephemeral port), hosted by this process; its
// key is `key`, or a random one.
Result<UniqueIdData> startRootAt(SockAddr addr, const AuthKey* key = nullptr);
// The key of a communicator made from `parent` by the management operation `tag` (split:
// the members of `color`), which every member derives: no key travels between ranks.
AuthKey childAuthKey(const AuthKey& parent, uint64_t tag, int64_t color);

class Bootstrap {
 public:
  // Joins the communicator described by id as `rank` of `nranks`, waiting for the others
  // at most timeoutS (COLL_BOOTSTRAP_TIMEOUT_S where that is less; 0: it alone): the
  // root waits for every rank the least any joiner asked. Later exchanges keep
  // COLL_BOOTSTRAP_TIMEOUT_S.
  static Result<std::unique_ptr<Bootstrap>> create(const UniqueIdData& id, int rank, int nranks, PeerInfo self,
                                                   std::shared_ptr<AbortState> abort, double timeoutS = 0);
  ~Bootstrap();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }

  // ignoreAbort: keep going when the communicator has failed or been revoked (the
  // rendezvous of a shrink); the timeout still applies.
  Status send(int peer, uint64_t tag, const void* data, size_t len, bool ignoreAbort = false);
  Status recv(int peer, uint64_t tag, std::vector<char>* out, bool ignoreAbort = false);
  Status recv(int peer, uint64_t tag, void* data, size_t len, bool ignoreAbort = false);  // exact length
  // The next message of tag from peer within timeoutS seconds (0: however long it takes),
  // for waits whose bound is the caller's (one-sided signals).
  Status recvWithin(int peer, uint64_t tag, std::vector<char>* out, double timeoutS);
  // Ring allgather: data holds nranks blocks of blockLen; block `rank` is ours.
  Status allGather(void* data, size_t blockLen, uint64_t tag, bool ignoreAbort = false);

  // Leaving cleanly tells the root this rank is not failing.
  void leave();
  // Tells every other rank (through the root) that this rank failed an operation and why:
  // they raise it as their communicator's error, so none keeps waiting for this rank.
  void announceFailure(const std::string& why);
  // Tells every other rank (through the root) that this rank is leaving by an abort:
  // fatal to them only if they then stay stuck (AbortState::peerGone).
  void announceLeaving(const std::string& why);
  // Where this rank stands in its operations, for the job-wide hang report.
  OpStateBox& opState() { return opState_; }
  // Sends this rank's state to the root: an answer to its query, or (any other `why`) a
  // request for a job-wide report, whose finding arrives in opState(). False when the
  // root is gone.
  bool reportState(ReportWhy why);
  // The communicator's abort flag, for waits outside the bootstrap (a net connect).
  const std::atomic<bool>* abortFlag() const { return &abort_->flag; }
  // The communicator's key: its net connections prove it too (auth.h).
  const AuthKey& authKey() const { return key_; }

 private:
  Bootstrap() = default;
  Status listen(int family, SockAddr* addr);
  static void tellRootFailed(const UniqueIdData& id, int rank, int nranks, const PeerInfo& self,
                             const std::string& why);
  void serviceLoop();
  void acceptPeer();
  void readRoot();
  void tellRoot(RootMsg kind, const std::string& why);
  void takeFinding(const RootReply& msg);
  Status readFrame(int connIdx);
  Status joinRoot(const UniqueIdData& id, Deadline deadline);
  Status readTable(const UniqueIdData& id, RootReply* reply, Deadline deadline);
  Status connectTo(int peer, const std::atomic<bool>* cancel);
  Status receive(int peer, uint64_t tag, std::vector<char>* out, bool ignoreAbort, double timeoutS);

  int rank_ = -1, nranks_ = 0;
  AuthKey key_{};
  std::vector<PeerInfo> peers_;
  Socket listener_;
  Socket root_;
  std::mutex rootMu_;  // writes to root_ (announceFailure, leave)
  int rootRank_ = -1;  // the rank whose process hosts the root, if any
  std::shared_ptr<AbortState> abort_;
  double timeoutS_ = 60;
  OpStateBox opState_;

  std::mutex sendMu_;
  std::map<int, Socket> out_;

  struct InConn {
    Socket sock;
    int from;
  };
  std::vector<InConn> in_;  // service thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, uint64_t>, std::deque<std::vector<char>>> inbox_;
  std::atomic<bool> stop_{false};
  bool left_ = false;  // under rootMu_
  std::thread service_;
};

}  // namespace coll

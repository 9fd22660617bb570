// One-shot algorithms for small operations.
//
// For small messages a ring's latency (2(n-1) dependent hops for allreduce) and the cost
// of building programs dominate. A one-shot operation has every rank hand its whole
// contribution to every peer at once and then compute its result locally:
//   - mailbox (every rank on one host, shared memory): each rank writes into its own
//     mailbox buffer and reads its peers' buffers directly (transport/shm/mailbox.h). Serves
//     allreduce, reduce, broadcast, allgather and reduce-scatter.
//   - ring connectors (a communicator spanning hosts): allreduce only; each rank's input
//     travels once around the ring (an allgather of inputs, n-1 hops in one message
//     each) and every rank reduces locally. For 2 ranks that is one exchange.
//   - direct (every rank on one host, above the mailbox size, peers' memory readable):
//     ranks exchange buffer addresses through the mailboxes and read each other's
//     buffers with process_vm_readv (plain loads between threads of one process), one
//     copy per byte instead of the FIFOs' two. Allreduce: each rank reduces its block
//     from every rank's input, then reads the other finished blocks; rounds of mailbox
//     flags separate the phases, and a last round keeps every buffer alive until nobody
//     reads it any more. A rank whose call fails midway withdraws its flags and returns
//     only once no peer reads its buffers (abandon(); mailbox.h has the handshake).
// Results are bit-identical to the ring algorithms: block k of an allreduce (and the
// reduce-scatter block of rank k, and a reduce to root k) is combined in the same chain
// order k+1, k+2, ..., k, so the choice of algorithm never changes a result.
//
// An operation is started (contribution published, never blocks) and then polled until
// complete, so the executor can run one-shots of several communicators from one thread.
// Inside a group a one-shot is a step of channel 0's program, in call order with the
// ring operations (whose order every rank shares).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/plan.h"
#include "algorithms/ring_layout.h"
#include "transport/connector_set.h"
#include "transport/shm/mailbox.h"
#include "transport/shm/shared_mem.h"

namespace coll {

// What one-shot operations keep of a communicator between operations (collComm::oneShot),
// made at init (comm/comm.cc).
struct OneShotState {
  std::unique_ptr<Mailboxes> mailboxes;  // every rank on this host: the mailbox modes
  uint32_t mailSeq = 0;                  // last mailbox round number used
  bool directOn = false;                 // large operations read peers' buffers
  SharedWindows windows;                 // symmetric windows every rank mapped
  uint64_t windowsAgreed = 0;            // symmetric window agreements so far
  size_t netBytes = 0;                   // across hosts: allreduce up to this size (COLL_NET_ONESHOT_BYTES)
  std::vector<char> scratch;             // ring one-shot inputs; direct reductions' chunks
  // Two ranks over net: a duplex connection for the one-shot only, so the ACKs of small
  // messages ride on data (8 B: 13 -> 9 us), while ring slices stay on one-way
  // connections (sharing a socket serialises bulk sends and receives on its lock:
  // measured -20-35 % bandwidth). Empty otherwise.
  ConnectorSet::Channel pair;
};

// What a one-shot operation uses of its communicator (comm/comm.h oneShotContext): the
// ranks, the ring, the one-shot state, the host set's channel 0.
struct OneShotContext {
  int rank = 0;
  int nranks = 1;
  const RingLayout* ring = nullptr;
  OneShotState* state = nullptr;
  size_t slotBytes = 0;
  ConnectorSet::Channel* ring0 = nullptr;  // the host set's channel 0; null without one
};

// Whether od runs as a one-shot operation (depends only on values every rank shares, so
// all ranks choose alike).
bool oneShotEligible(const OneShotContext& c, const OpDesc& od);

class OneShot {
 public:
  // od is kept by reference: it outlives the OneShot (the caller's, or its launch's).
  OneShot(const OneShotContext& ctx, const OpDesc& od);
  // Publishes this rank's contribution; call once.
  Status start();
  // Moves what can move; *done once the result is in place. When not done, *wait says
  // what to sleep on.
  Status poll(bool* done, WaitTarget* wait);
  const OpDesc& op() const { return od_; }
  int blockedPeer() const { return blockedPeer_; }
  bool ringPassMode() const { return mode_ == Mode::kRingPass; }
  // Whether poll may move now: every peer's flag of the current round is up (true across
  // hosts, where only poll can tell). Cheap: something to spin on between polls.
  bool mayMove() const { return mode_ == Mode::kRingPass || allArrivedNow(); }
  // The operation is given up before it completed (its call fails): a direct one
  // withdraws and returns once no peer reads this rank's buffers any more, so the caller
  // may free them.
  void abandon();

 private:
  enum class Mode { kMailbox, kDirectRead, kRingPass };
  struct Ptrs {
    uint64_t send, recv;
    uint64_t sendWin, recvWin;  // the shared windows holding them (SharedWindow::id), or 0
  };
  Status pollRounds(bool* done, WaitTarget* wait);
  bool allArrivedNow() const;
  void finishMailbox();
  const char* ownInput(size_t off, const char* dst) const;
  void resolveWindows();
  const char* mapped(int rank, const char* remote, size_t bytes) const;
  Status directPhase(int round);
  Status readPhase(int round);
  Status withdrawnError(int peer) const;
  template <typename Base>
  Status reduceDirect(char* dst, Base base, size_t cnt, int last);
  Status pollRingPass(bool* done, WaitTarget* wait);
  void finishRingPass();

  OneShotContext ctx_;
  const OpDesc& od_;
  size_t es_;
  // What the mailboxes carry to say which operation this is. Made once, ahead of the
  // stores that publish it: copied from a temporary, it would be read back through
  // stores still waiting for a mailbox line (a stall as long as that wait).
  MailSignature sig_;
  Mode mode_ = Mode::kRingPass;
  uint32_t seqs_[3] = {};  // mailbox round numbers
  int rounds_ = 1;         // mailbox: 1; direct: 2 or 3 (the last one: "done reading")
  int round_ = 0;
  int arrived_ = 0;         // peers seen in this round, in rank order skipping ourselves
  std::vector<Ptrs> ptrs_;  // direct: every rank's buffers
  // Direct: the parts of shared windows holding each rank's send and recv buffers, mapped
  // here (2 per rank), and the windows, kept mapped until the operation ends.
  std::vector<WindowPart> views_;
  std::vector<std::shared_ptr<const SharedWindow>> held_;
  int sent_ = 0;      // ring: blocks sent (own + forwarded)
  int received_ = 0;  // ring: blocks received
  int blockedPeer_ = -1;
  bool published_ = false;  // direct: our buffers' addresses are out
  bool complete_ = false;
};

}  // namespace coll

#include "comm/watch.h"

#include "comm/comm.h"

namespace coll {

namespace {

// How long a failed operation waits for the report's cause: the root asks every rank and
// answers within Root::kRoundS (1.5 s) even when some do not answer.
constexpr double kFindingWaitS = 2.5;

OpStateBox* boxOf(collComm* c) { return c->bootstrap ? &c->bootstrap->opState() : nullptr; }

// A failure the report can explain: a stall or a peer's failure, on a communicator that
// nobody revoked or is closing.
bool reportable(collComm* c, const Status& st) {
  const Code code = st.code();
  const bool stall = code == Code::kTimeout || code == Code::kRemote || code == Code::kSystem ||
                     code == Code::kInvalidUsage || code == Code::kInternal;
  return stall && !c->revoked.load() && !c->abort->closing.load();
}

std::string describeCall(const OpSignature& call) {
  OpDesc od{};
  od.kind = static_cast<CollKind>(call.kind);
  od.seq = call.seq;
  od.dtype = static_cast<collDataType_t>(call.dtype);
  od.op = static_cast<collRedOp_t>(call.op);
  od.root = call.root;
  od.count = call.count;
  return od.describe();
}

}  // namespace

void watchInit(collComm* c) {
  if (OpStateBox* box = boxOf(c)) box->setDescribe(describeCall);
}

void watchStarted(collComm* c, const OpDesc& first, size_t nOps) {
  OpStateBox* box = boxOf(c);
  if (!box) return;
  OpSignature call;
  call.seq = first.seq;
  call.kind = static_cast<int32_t>(first.kind);
  call.dtype = static_cast<int32_t>(first.dtype);
  call.op = static_cast<int32_t>(first.op);
  call.root = first.root;
  call.count = first.count;
  call.p2p = isPeerOp(first.kind);
  box->started(call, static_cast<uint32_t>(nOps));
}

void watchFinished(collComm* c) {
  if (OpStateBox* box = boxOf(c)) box->finished(c->seq);
}

void watchStalled(collComm* c, int peer, const std::string& where) {
  if (OpStateBox* box = boxOf(c)) box->waiting(peer, where);
}

void watchAskReport(collComm* c) {
  if (c->bootstrap) (void)c->bootstrap->reportState(ReportWhy::kStalled);
}

Status watchFailed(collComm* c, Status st) {
  OpStateBox* box = boxOf(c);
  if (!box || !reportable(c, st)) return st;
  const bool timedOut = st.code() == Code::kTimeout;
  const std::string message = st.message();
  if (!box->failed(timedOut, message.substr(0, message.find('\n')))) return st;
  // A failure that is the report's finding (it failed this communicator) asks no more.
  if (message.find(kFindingPrefix) != std::string::npos) return st;
  const uint64_t seen = box->findings();
  std::string finding;
  if (c->bootstrap->reportState(timedOut ? ReportWhy::kTimedOut : ReportWhy::kFailed))
    finding = box->awaitFinding(seen, kFindingWaitS);
  // No fresh finding: the root may be gone (its process was a rank that failed first and
  // exited), but a report it sent while this launch ran still says why.
  if (finding.empty()) finding = box->findingOfLaunch();
  if (finding.empty()) return st;
  return Status(st.code(), message + "; " + finding);
}

Status watchUnusable(collComm* c) {
  const Status earlier = c->abort->status();
  Status st = Status(earlier).prefix("communicator is unusable after an earlier error: ");
  OpStateBox* box = boxOf(c);
  if (!box || !reportable(c, st) || st.message().find(kFindingPrefix) != std::string::npos) return st;
  const std::string finding = box->failureFinding([&] {
    const uint64_t seen = box->findings();
    std::string fresh;
    if (c->bootstrap->reportState(ReportWhy::kFailed)) fresh = box->awaitFinding(seen, kFindingWaitS);
    // No answer: the root's process may have ended since (a rank that failed first and
    // left), but the finding it sent every rank then may name this failure's cause.
    return fresh.empty() ? box->findingNaming(earlier.message()) : fresh;
  });
  return finding.empty() ? st : Status(st.code(), st.message() + "; " + finding);
}

}  // namespace coll

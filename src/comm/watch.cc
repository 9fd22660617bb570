#include "comm/watch.h"

#include "comm/comm.h"

namespace coll {

namespace {

// How long a failed operation waits for the report's cause: the root asks every rank and
// answers within Root::kRoundS (1.5 s) even when some do not answer.
constexpr double kFindingWaitS = 2.5;

OpStateBox* boxOf(collComm* c) { return c->bootstrap ? &c->bootstrap->opState() : nullptr; }

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
  call.p2p = first.kind == CollKind::kSend || first.kind == CollKind::kRecv;
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
  const bool stall = st.code() == Code::kTimeout || st.code() == Code::kRemote || st.code() == Code::kSystem ||
                     st.code() == Code::kInvalidUsage || st.code() == Code::kInternal;
  if (!box || !stall || c->revoked.load() || c->abort->closing.load()) return st;
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

}  // namespace coll

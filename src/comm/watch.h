// The rank's side of the job-wide hang report (bootstrap/hang_report.h): keeps the
// communicator's OpStateBox in step with its operations, asks the root for a report when
// an operation stalls past COLL_STALL_WARN_S, and makes a failed operation's error carry
// the cause the report found.
#pragma once

#include <cstddef>
#include <string>

#include "algorithms/plan.h"
#include "base/status.h"

struct collComm;

namespace coll {

// Once c's bootstrap exists: the box describes calls with OpDesc::describe.
void watchInit(collComm* c);
// c runs a launch of nOps operations, `first` the first of them.
void watchStarted(collComm* c, const OpDesc& first, size_t nOps);
// The launch completed.
void watchFinished(collComm* c);
// A lane of c's launch has stalled waiting for `peer` (-1: unknown); `where` says how.
void watchStalled(collComm* c, int peer, const std::string& where);
// The launch stalled past COLL_STALL_WARN_S: asks the root for a job-wide report.
void watchAskReport(collComm* c);
// The launch failed with st: the failure is reported to the root, and the error returned
// carries the report's cause when one comes within a few seconds. Errors that are not a
// stall or a peer's failure (bad arguments, a revoked or aborted communicator) pass as
// they are.
Status watchFailed(collComm* c, Status st);
// c was failed by an earlier error (its own launch's, or a peer's that its bootstrap heard
// of between launches) and refuses a new call: the error that says so, carrying the
// report's cause. Only the first such call asks the root; the later ones reuse its finding.
Status watchUnusable(collComm* c);

}  // namespace coll

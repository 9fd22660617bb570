// Groups and the task queue.
//
// Outside a group an operation runs at once and returns when complete. Between
// collGroupStart and collGroupEnd operations are queued per thread (the group belongs to
// the calling thread, as in NCCL); the outermost collGroupEnd runs them all together:
// it connects any missing send/recv connectors of every communicator involved (in three
// phases, so one thread may drive several ranks), builds one program per channel and per
// send/recv lane, and hands them all to one executor.
#pragma once

#include <functional>

#include "algorithms/plan.h"
#include "comm/comm.h"

namespace coll {

Status groupStart();
Status groupEnd(collComm** failedComm);
// Closes a group without running it: *us gets the cost model's prediction for what it
// queued (per communicator the sum of its operations, the largest over communicators).
// The outermost close drops the operations (and gives back their sequence numbers);
// an inner one leaves them to the outer group.
Status groupSimulateEnd(double* us);
bool inGroup();
// A communicator whose init was called inside a group (initState collInProgress, joining
// on its own thread): the outermost collGroupEnd waits for it, as NCCL's group semantics
// let one thread init several ranks of a communicator.
void groupDeferInit(collComm* comm);
// Management calls made inside a group (split, shrink) that must not block the thread
// that drives several ranks: `work` runs on a thread of its own at once; the outermost
// collGroupEnd joins it and, where it succeeded, calls `publish` on the caller's thread
// (which writes the new communicator where the caller asked).
void groupDefer(std::function<Status()> work, std::function<void()> publish);
// A call inside the open group failed: the outermost collGroupEnd drops the group and
// returns this error (NCCL's rule), so no rank runs half a group.
void groupNoteError(const Status& st);
// Queues (inside a group) or runs (outside) one operation.
Status enqueue(collComm* comm, OpDesc&& op, collComm** failedComm);

}  // namespace coll

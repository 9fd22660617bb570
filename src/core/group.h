// Groups and the task queue.
//
// Outside a group an operation runs at once and returns when complete. Between
// collGroupStart and collGroupEnd operations are queued per thread (the group belongs to
// the calling thread, as in NCCL); the outermost collGroupEnd runs them all together:
// it wires any missing send/recv connectors of every communicator involved (in three
// phases, so one thread may drive several ranks), builds one program per channel and per
// send/recv lane, and hands them all to one executor.
#pragma once

#include "algorithms/plan.h"
#include "core/comm.h"

namespace coll {

Status groupStart();
Status groupEnd(collComm** failedComm);
bool inGroup();
// Queues (inside a group) or runs (outside) one operation.
Status enqueue(collComm* comm, OpDesc op, collComm** failedComm);

}  // namespace coll

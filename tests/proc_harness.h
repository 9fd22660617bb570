// Forked ranks: each rank is a real process that forms its communicator through the real
// bootstrap (COLL_COMM_ID on a free loopback port, rank 0 hosting the root). The parent
// never calls the library, so no library thread exists when it forks.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collectives/collectives.h"

// In a rank's body (with `comm` and `report` in scope): on failure, appends the call and
// the communicator's last error to the report and returns 1 (the rank's exit code).
#define PCHECK(call)                                                       \
  do {                                                                     \
    collResult_t r_ = (call);                                              \
    if (r_ != collSuccess) {                                               \
      report += std::string(#call) + ": " + collGetLastError(comm) + "\n"; \
      return 1;                                                            \
    }                                                                      \
  } while (0)

namespace testing {

struct ProcResult {
  int exitCode = -1;  // -1: killed by a signal or timed out
  int signal = 0;
  std::string output;  // what the rank wrote to its report pipe
};

struct ProcOptions {
  double timeoutS = 60;                      // kill everything after this
  std::map<std::string, std::string> env;    // for every rank
  std::function<void(int rank)> perRankEnv;  // may setenv in the child
  // Called in the parent after forking, with the children's pids (e.g. to kill one).
  std::function<void(const std::vector<pid_t>&)> parent;
};

// Runs body(rank, report) in nranks forked processes; body returns the exit code and
// may append text to `report`. Returns each rank's result.
std::vector<ProcResult> runProcs(int nranks, const std::function<int(int rank, std::string& report)>& body,
                                 const ProcOptions& opts = {});

// A currently free TCP port on 127.0.0.1.
int freePort();

// Every rank's exit code, signal and report, one line each, for a failure's message.
std::string describe(const std::vector<ProcResult>& res);

// A rank's body: forms a communicator of TEST_NRANKS ranks and checks allreduce,
// broadcast, reduce-scatter, reduce and allgather at three sizes; 0 when all correct.
int basicOps(int rank, std::string& report);

}  // namespace testing

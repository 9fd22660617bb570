// Forked ranks: each rank is a real process that forms its communicator through the real
// bootstrap (COLL_COMM_ID on a free loopback port, rank 0 hosting the root). The parent
// never calls the library, so no library thread exists when it forks.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

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

}  // namespace testing

// Where a perf_tests process sits in a launch: rank, size and local rank read from the
// environment of collrun, Open MPI, MPICH/Hydra, Slurm or torchrun, and the address of
// the rendezvous root (COLL_COMM_ID, NCCL_COMM_ID or MASTER_ADDR/MASTER_PORT).
#pragma once

#include <functional>
#include <string>

namespace perf {

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  std::string launcher = "none";  // "collrun", "Open MPI", "MPICH/Hydra", "Slurm", "torchrun"
  std::string rootAddr;           // host:port, or "" when none was given
};

using EnvGetter = std::function<const char*(const char*)>;

// Reads the launch from env (getenv by default). On a malformed or incomplete launch
// environment returns false and explains in *error.
bool detectLaunch(LaunchInfo* out, std::string* error, const EnvGetter& env = nullptr);

}  // namespace perf

#include "launch.h"

#include <cstdlib>

namespace perf {

namespace {

bool parseInt(const char* s, int* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*end || v < 0 || v > 1 << 24) return false;
  *out = static_cast<int>(v);
  return true;
}

struct Scheme {
  const char* name;
  const char* rank;
  const char* size;
  const char* local;  // may be null
};

}  // namespace

bool detectLaunch(LaunchInfo* out, std::string* error, const EnvGetter& envIn) {
  EnvGetter env = envIn ? envIn : [](const char* n) -> const char* { return std::getenv(n); };
  static const Scheme kSchemes[] = {
      {"collrun", "COLL_RANK", "COLL_NRANKS", "COLL_LOCAL_RANK"},
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
  };
  LaunchInfo info;
  for (const Scheme& s : kSchemes) {
    const char* r = env(s.rank);
    const char* n = env(s.size);
    if (!r && !n) continue;
    if (!parseInt(r, &info.rank) || !parseInt(n, &info.size) || info.size < 1 || info.rank >= info.size) {
      *error = std::string(s.name) + " launch: " + s.rank + "=\"" + (r ? r : "(unset)") + "\" and " + s.size + "=\"" +
               (n ? n : "(unset)") + "\" do not describe a rank of a job";
      return false;
    }
    info.launcher = s.name;
    info.localRank = info.rank;
    if (s.local && env(s.local) && !parseInt(env(s.local), &info.localRank)) {
      *error = std::string(s.name) + " launch: " + s.local + "=\"" + env(s.local) + "\" is not a number";
      return false;
    }
    break;
  }
  if (const char* id = env("COLL_COMM_ID")) info.rootAddr = id;
  else if (const char* nid = env("NCCL_COMM_ID")) info.rootAddr = nid;
  else if (env("MASTER_ADDR") && env("MASTER_PORT"))
    info.rootAddr = std::string(env("MASTER_ADDR")) + ":" + env("MASTER_PORT");
  if (info.size > 1 && info.rootAddr.empty()) {
    *error = "this is rank " + std::to_string(info.rank) + " of " + std::to_string(info.size) + " (" + info.launcher +
             ") but no rendezvous address is set: export COLL_COMM_ID=host:port "
             "(or MASTER_ADDR and MASTER_PORT) to every rank, e.g. mpirun -x COLL_COMM_ID=host:29500";
    return false;
  }
  *out = info;
  return true;
}

}  // namespace perf

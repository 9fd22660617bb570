// The host side of NCCL's device API (NVIDIA's nccl_device.h: device communicators that
// user kernels drive, teams of ranks, windows seen from the GPU) as the drop-in exports
// it. Its kernels are NVIDIA's header code, compiled into the user's program against
// NVIDIA's device communicator layout, which this library does not provide: so
// ncclCommQueryProperties reports deviceApiSupport 0, the calls that would hand a kernel
// a device communicator, a resource or a GPU pointer fail with ncclInvalidUsage saying
// so, and the team calls describe the teams such a communicator would have (every rank
// its own load/store team). Programs built against NCCL 2.28+ (PyTorch's libtorch_cuda)
// link and run; only their device-API paths are refused. docs/NCCL.md lists each call.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "collectives/collectives.h"
#include "collectives/nccl/nccl.h"

namespace {

// The types of nccl_device/host.h these calls take or return by value, with NVIDIA's
// layouts (tests/nccl/device_layout.cc compares them); every other argument is a pointer
// this library never reads.
struct Team {
  int nRanks, rank, stride;
};
struct MultimemHandle {
  void* mcBasePtr;
};
enum GinType : int { kGinTypeNone = 0 };
enum GinConnectionType : int { kGinConnectionNone = 0 };
struct CommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  GinType ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  GinType railedGinType;
  uint64_t commHash;
  int ginMinStride;
  GinConnectionType ginConnectionType;
  bool ginSupport[64];
  size_t devCommRuntimeVersionSize;
  bool cftSupport;
  bool cftMulticastSupport;
  bool cftCountedSupport;
};

collComm_t C(ncclComm_t c) { return reinterpret_cast<collComm_t>(c); }

ncclResult_t refuse(ncclComm_t comm, const char* call) {
  const std::string text = std::string(call) +
                           ": the NCCL device API is not supported by this library (ncclCommQueryProperties "
                           "reports deviceApiSupport 0); use the host API's collectives";
  return static_cast<ncclResult_t>(collRecordError(C(comm), collInvalidUsage, text.c_str()));
}

// comm's rank and size, or false (the error recorded) for a communicator that is not one.
bool rankAndSize(ncclComm_t comm, int* rank, int* nranks) {
  return collCommUserRank(C(comm), rank) == collSuccess && collCommCount(C(comm), nranks) == collSuccess;
}

Team self() { return Team{1, 0, 1}; }

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

// What the device API would have to work with: nothing but the rank's place.
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, CommProperties* props) {
  if (!props) return static_cast<ncclResult_t>(collRecordError(C(comm), collInvalidArgument, "props is NULL"));
  if (props->size < offsetof(CommProperties, rank) || props->magic != NCCL_API_MAGIC)
    return static_cast<ncclResult_t>(
        collRecordError(C(comm), collInvalidArgument,
                        "ncclCommQueryProperties: props was not made from NCCL_COMM_PROPERTIES_INITIALIZER"));
  CommProperties p{};
  if (!rankAndSize(comm, &p.rank, &p.nRanks)) return ncclInvalidArgument;
  if (collCommCuDevice(C(comm), &p.cudaDev) != collSuccess) return ncclInvalidArgument;
  p.nvmlDev = -1;
  p.nLsaTeams = p.nRanks;  // every rank its own load/store team
  p.ginMinStride = 1;
  // Only the fields the caller's struct has; its header stays as it was.
  const size_t from = offsetof(CommProperties, rank);
  const size_t upto = props->size < sizeof(p) ? props->size : sizeof(p);
  std::memcpy(reinterpret_cast<char*>(props) + from, reinterpret_cast<const char*>(&p) + from, upto - from);
  return ncclSuccess;
}

ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void*, void*) { return refuse(comm, "ncclDevCommCreate"); }
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void*) { return refuse(comm, "ncclDevCommDestroy"); }

ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**) {
  return refuse(nullptr, "ncclGetLsaMultimemDevicePointer");
}
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t, size_t, MultimemHandle, void**) {
  return refuse(nullptr, "ncclGetMultimemDevicePointer");
}
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t, size_t, int, void**) {
  return refuse(nullptr, "ncclGetLsaDevicePointer");
}
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**) {
  return refuse(nullptr, "ncclGetPeerDevicePointer");
}
ncclResult_t ncclGetMultimemDeviceLeInfo(ncclWindow_t, size_t, uint32_t*, size_t*) {
  return refuse(nullptr, "ncclGetMultimemDeviceLeInfo");
}
ncclResult_t ncclGetCftDeviceLeInfo(ncclWindow_t, size_t, int, Team, uint32_t*, size_t*) {
  return refuse(nullptr, "ncclGetCftDeviceLeInfo");
}
ncclResult_t ncclGetPeerDeviceLeInfo(ncclWindow_t, size_t, int, uint32_t*, size_t*) {
  return refuse(nullptr, "ncclGetPeerDeviceLeInfo");
}

// Teams: the world; each rank alone for load/store (and the NVLink fabric's teams), so
// the rail team (one rank of each load/store team) is the world again.
Team ncclTeamWorld(ncclComm_t comm) {
  Team t{0, 0, 1};
  return rankAndSize(comm, &t.rank, &t.nRanks) ? t : Team{0, 0, 0};
}
Team ncclTeamRail(ncclComm_t comm) { return ncclTeamWorld(comm); }
Team ncclTeamLsa(ncclComm_t) { return self(); }
Team ncclTeamCft(ncclComm_t, int) { return self(); }
Team ncclTeamCftMultimem(ncclComm_t) { return self(); }
// The world rank of `rank` of a team this rank belongs to.
int ncclTeamRankToWorld(ncclComm_t comm, Team team, int rank) {
  int me = 0, n = 0;
  if (!rankAndSize(comm, &me, &n)) return -1;
  const int world = me + (rank - team.rank) * team.stride;
  return world >= 0 && world < n ? world : -1;
}
// The rank within this rank's load/store team (itself alone) of `rank` of a team: 0 for
// this rank, -1 for any other.
int ncclTeamRankToLsa(ncclComm_t comm, Team team, int rank) {
  int me = 0, n = 0;
  if (!rankAndSize(comm, &me, &n)) return -1;
  return ncclTeamRankToWorld(comm, team, rank) == me ? 0 : -1;
}

ncclResult_t ncclLsaBarrierCreateRequirement(Team, int, void*, void*) {
  return refuse(nullptr, "ncclLsaBarrierCreateRequirement");
}
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, Team, int, void*, void*) {
  return refuse(comm, "ncclGinBarrierCreateRequirement");
}
// Slots of an LL all-to-all buffer: none exist without the device API.
int ncclLLA2ACalcSlots(int, int) { return 0; }
ncclResult_t ncclLLA2ACreateRequirement(int, int, void*, void*) {
  return refuse(nullptr, "ncclLLA2ACreateRequirement");
}
ncclResult_t ncclGinOutboxCreateRequirement(int, int, void*, void*) {
  return refuse(nullptr, "ncclGinOutboxCreateRequirement");
}
ncclResult_t ncclGinInboxA2ACreateRequirement(Team, int, int, void*, void*) {
  return refuse(nullptr, "ncclGinInboxA2ACreateRequirement");
}

#define PNCCL(ret, name, params) ret p##name params __attribute__((alias(#name)));
PNCCL(ncclResult_t, ncclCommQueryProperties, (ncclComm_t, CommProperties*))
PNCCL(ncclResult_t, ncclDevCommCreate, (ncclComm_t, const void*, void*))
PNCCL(ncclResult_t, ncclDevCommDestroy, (ncclComm_t, const void*))
PNCCL(ncclResult_t, ncclGetLsaMultimemDevicePointer, (ncclWindow_t, size_t, void**))
PNCCL(ncclResult_t, ncclGetMultimemDevicePointer, (ncclWindow_t, size_t, MultimemHandle, void**))
PNCCL(ncclResult_t, ncclGetLsaDevicePointer, (ncclWindow_t, size_t, int, void**))
PNCCL(ncclResult_t, ncclGetPeerDevicePointer, (ncclWindow_t, size_t, int, void**))
PNCCL(ncclResult_t, ncclGetMultimemDeviceLeInfo, (ncclWindow_t, size_t, uint32_t*, size_t*))
PNCCL(ncclResult_t, ncclGetCftDeviceLeInfo, (ncclWindow_t, size_t, int, Team, uint32_t*, size_t*))
PNCCL(ncclResult_t, ncclGetPeerDeviceLeInfo, (ncclWindow_t, size_t, int, uint32_t*, size_t*))
PNCCL(Team, ncclTeamWorld, (ncclComm_t))
PNCCL(Team, ncclTeamRail, (ncclComm_t))
PNCCL(Team, ncclTeamLsa, (ncclComm_t))
PNCCL(Team, ncclTeamCft, (ncclComm_t, int))
PNCCL(Team, ncclTeamCftMultimem, (ncclComm_t))
PNCCL(int, ncclTeamRankToWorld, (ncclComm_t, Team, int))
PNCCL(int, ncclTeamRankToLsa, (ncclComm_t, Team, int))
PNCCL(ncclResult_t, ncclLsaBarrierCreateRequirement, (Team, int, void*, void*))
PNCCL(ncclResult_t, ncclGinBarrierCreateRequirement, (ncclComm_t, Team, int, void*, void*))
PNCCL(int, ncclLLA2ACalcSlots, (int, int))
PNCCL(ncclResult_t, ncclLLA2ACreateRequirement, (int, int, void*, void*))
PNCCL(ncclResult_t, ncclGinOutboxCreateRequirement, (int, int, void*, void*))
PNCCL(ncclResult_t, ncclGinInboxA2ACreateRequirement, (Team, int, int, void*, void*))
#undef PNCCL

}  // extern "C"
#pragma GCC visibility pop

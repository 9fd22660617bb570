// The host side of NCCL's device API through the drop-in, built against NVIDIA's
// nccl_device/host.h (so its structs are NVIDIA's): properties read back right, teams
// described, and every call that would need the device API refused with
// ncclInvalidUsage and a last error saying so. Exit status: the number of failed checks.
#include <nccl.h>
#include <nccl_device/host.h>

#include <cstdio>
#include <cstring>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

bool refused(ncclComm_t comm, ncclResult_t r) {
  const char* text = ncclGetLastError(comm);
  return r == ncclInvalidUsage && text && std::strstr(text, "device API is not supported");
}

}  // namespace

int main() {
  ncclComm_t comms[2] = {nullptr, nullptr};
  if (ncclCommInitAll(comms, 2, nullptr) != ncclSuccess) {
    std::printf("FAIL ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  ncclComm_t comm = comms[1];
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  int dev = -2;
  ncclCommCuDevice(comm, &dev);
  check(ncclCommQueryProperties(comm, &props) == ncclSuccess, "ncclCommQueryProperties");
  check(props.rank == 1 && props.nRanks == 2 && props.cudaDev == dev, "properties: rank, nRanks, cudaDev");
  check(!props.deviceApiSupport && !props.multimemSupport && !props.hostRmaSupport && !props.cftSupport,
        "properties: no device API, multimem, host RMA or CFT");
  check(props.size == sizeof(props) && props.magic == NCCL_API_MAGIC, "properties: header kept");
  ncclCommProperties_t junk;
  std::memset(&junk, 0, sizeof(junk));
  check(ncclCommQueryProperties(comm, &junk) == ncclInvalidArgument, "uninitialized properties refused");

  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm_t devComm;
  check(refused(comm, ncclDevCommCreate(comm, &reqs, &devComm)), "ncclDevCommCreate refused, saying why");
  check(refused(comm, ncclDevCommDestroy(comm, &devComm)), "ncclDevCommDestroy refused, saying why");
  void* ptr = nullptr;
  check(refused(nullptr, ncclGetLsaDevicePointer(nullptr, 0, 0, &ptr)), "ncclGetLsaDevicePointer refused");

  ncclTeam_t world = ncclTeamWorld(comm), lsa = ncclTeamLsa(comm), rail = ncclTeamRail(comm);
  check(world.nRanks == 2 && world.rank == 1 && world.stride == 1, "ncclTeamWorld");
  check(lsa.nRanks == 1 && lsa.rank == 0, "ncclTeamLsa: the rank alone");
  check(rail.nRanks == 2 && rail.rank == 1, "ncclTeamRail: the world");
  check(ncclTeamRankToWorld(comm, world, 0) == 0 && ncclTeamRankToWorld(comm, world, 5) == -1, "ncclTeamRankToWorld");
  check(ncclTeamRankToLsa(comm, world, 1) == 0 && ncclTeamRankToLsa(comm, world, 0) == -1, "ncclTeamRankToLsa");
  check(ncclLLA2ACalcSlots(64, 8) == 0, "ncclLLA2ACalcSlots: none");

  for (ncclComm_t c : comms) ncclCommDestroy(c);
  std::printf("%d failed\n", failures);
  return failures;
}

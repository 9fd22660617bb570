// Symmetric windows between processes of one host: buffers from collMemAlloc, registered
// as symmetric windows, are mapped by every peer, and large operations read them with
// plain loads. Every way round gives the ring's results: windows every rank mapped, a
// window one rank made on heap memory (nobody maps it: read as other memory), a rank
// whose buffers lie outside the windows, and a rank whose memory nobody may read (the
// FIFOs).
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/collectives.h"
#include "proc_harness.h"

using testing::describe;
using testing::ProcOptions;
using testing::runProcs;

namespace {

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : dflt;
}

// Drops CAP_SYS_PTRACE from this process (root reads any process's memory with it).
int dropPtraceCapability() {
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &head, data) != 0) return -1;
  data[0].effective &= ~(1u << CAP_SYS_PTRACE);
  data[0].permitted &= ~(1u << CAP_SYS_PTRACE);
  data[0].inheritable &= ~(1u << CAP_SYS_PTRACE);
  return static_cast<int>(syscall(SYS_capset, &head, data));
}

// What this rank's log says of its windows: "shared", "not shared" or "".
std::string windowVerdict() {
  std::ifstream log(std::getenv("COLL_DEBUG_FILE"));
  std::stringstream all;
  all << log.rdbuf();
  const std::string text = all.str();
  if (text.find("not mapped by every rank") != std::string::npos) return "not shared";
  if (text.find("mapped by every rank") != std::string::npos) return "shared";
  return "";
}

// Checks got[i] == want(i) for i < count; on the first miss, says where.
template <typename F>
bool same(const int32_t* got, size_t count, F want, const char* what, std::string& report) {
  for (size_t i = 0; i < count; ++i)
    if (got[i] != want(i)) {
      report += std::string(what) + " wrong at " + std::to_string(i) + ": " + std::to_string(got[i]) + " for " +
                std::to_string(want(i)) + "\n";
      return false;
    }
  return true;
}

// The collectives over send and recv (each room for count * n elements).
int runOps(collComm_t comm, int rank, int n, size_t count, int32_t* send, int32_t* recv, std::string& report) {
  auto input = [rank](size_t i) { return static_cast<int32_t>(rank * 1000 + i % 97); };
  auto sum = [n](size_t i) { return static_cast<int32_t>(1000 * n * (n - 1) / 2 + n * (i % 97)); };
  for (size_t i = 0; i < count * n; ++i) send[i] = input(i);
  PCHECK(collAllReduce(send, recv, count, collInt32, collSum, comm, nullptr));
  if (!same(recv, count, sum, "allreduce", report)) return 1;
  for (size_t i = 0; i < count; ++i) recv[i] = input(i);
  PCHECK(collAllReduce(recv, recv, count, collInt32, collSum, comm, nullptr));
  if (!same(recv, count, sum, "in-place allreduce", report)) return 1;
  PCHECK(collAllGather(send, recv, count, collInt32, comm, nullptr));
  for (int r = 0; r < n; ++r) {
    auto theirs = [r](size_t i) { return static_cast<int32_t>(r * 1000 + i % 97); };
    if (!same(recv + r * count, count, theirs, "allgather", report)) return 1;
  }
  PCHECK(collReduceScatter(send, recv, count, collInt32, collSum, comm, nullptr));
  if (!same(
          recv, count, [&](size_t i) { return sum(rank * count + i); }, "reduce-scatter", report))
    return 1;
  PCHECK(collBroadcast(send, recv, count, collInt32, n - 1, comm, nullptr));
  if (!same(
          recv, count, [n](size_t i) { return static_cast<int32_t>((n - 1) * 1000 + i % 97); }, "broadcast", report))
    return 1;
  PCHECK(collReduce(send, recv, count, collInt32, collSum, 0, comm, nullptr));
  if (rank == 0 && !same(recv, count, sum, "reduce", report)) return 1;
  return 0;
}

// TEST_HEAP_RANK: the rank whose windows are heap memory; TEST_OUTSIDE_RANK: the rank
// whose operations use buffers outside its windows; TEST_SEALED_RANK: the rank that
// nobody may read (not dumpable, and no rank holds CAP_SYS_PTRACE); TEST_EXPECT: what
// the log must say of the windows.
int windowOps(int rank, std::string& report) {
  collComm_t comm = nullptr;
  const int n = envInt("TEST_NRANKS", 3);
  if (envInt("TEST_SEALED_RANK", -1) >= 0) {
    // Root may read anyone: take the capability away, and close this rank if it is the one.
    if (dropPtraceCapability() != 0) {
      report += "cannot drop CAP_SYS_PTRACE\n";
      return 1;
    }
    if (rank == envInt("TEST_SEALED_RANK", -1)) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  }
  collUniqueId id;
  PCHECK(collGetUniqueId(&id));
  PCHECK(collCommInitRank(&comm, n, id, rank));
  const size_t count = 300000, bytes = count * n * sizeof(int32_t);
  void* mem[2] = {};
  collWindow_t win[2] = {};
  const bool heap = rank == envInt("TEST_HEAP_RANK", -1);
  for (int k = 0; k < 2; ++k) {
    // aligned_alloc takes whole multiples of the alignment.
    const size_t align = COLL_WIN_REQUIRED_ALIGNMENT, whole = (bytes + align - 1) / align * align;
    if (heap) mem[k] = std::aligned_alloc(align, whole);
    else PCHECK(collMemAlloc(&mem[k], bytes));
    PCHECK(collCommWindowRegister(comm, mem[k], bytes, &win[k], COLL_WIN_COLL_SYMMETRIC));
  }
  const std::string verdict = windowVerdict(), expect = std::getenv("TEST_EXPECT");
  if (verdict != expect) report += "the log says \"" + verdict + "\" of the windows, expected \"" + expect + "\"\n";
  std::vector<int32_t> outside(2 * count * n);
  int rc = rank == envInt("TEST_OUTSIDE_RANK", -1)
               ? runOps(comm, rank, n, count, outside.data(), outside.data() + count * n, report)
               : runOps(comm, rank, n, count, static_cast<int32_t*>(mem[0]), static_cast<int32_t*>(mem[1]), report);
  for (int k = 0; k < 2; ++k) {
    PCHECK(collCommWindowDeregister(comm, win[k]));
    if (heap) std::free(mem[k]);
    else PCHECK(collMemFree(mem[k]));
  }
  PCHECK(collCommDestroy(comm));
  return rc != 0 || verdict != expect ? 1 : 0;
}

void runCase(std::map<std::string, std::string> env) {
  const std::string dir = "/tmp/coll-win-" + std::to_string(getpid());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  ProcOptions o;
  o.env = std::move(env);
  o.env.insert({{"TEST_NRANKS", "3"}, {"COLL_DEBUG", "INFO"}, {"COLL_DEBUG_SUBSYS", "SHM"}});
  o.perRankEnv = [dir](int rank) {
    setenv("COLL_DEBUG_FILE", (dir + "/rank" + std::to_string(rank) + ".log").c_str(), 1);
  };
  auto res = runProcs(3, windowOps, o);
  (void)std::system(("rm -rf " + dir).c_str());
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

}  // namespace

TEST_CASE("symmetric windows from collMemAlloc: every rank maps every peer's and results match the ring's",
          "[multiprocess][window]") {
  runCase({{"TEST_EXPECT", "shared"}});
}

TEST_CASE("symmetric windows: a rank's buffers outside them are read as other memory", "[multiprocess][window]") {
  runCase({{"TEST_EXPECT", "shared"}, {"TEST_OUTSIDE_RANK", "1"}});
}

TEST_CASE("symmetric windows: one on heap memory is mapped by nobody and results stay right",
          "[multiprocess][window]") {
  runCase({{"TEST_EXPECT", "not shared"}, {"TEST_HEAP_RANK", "2"}});
}

TEST_CASE("symmetric windows: a rank nobody may read leaves every rank on the FIFOs", "[multiprocess][window]") {
  runCase({{"TEST_EXPECT", ""}, {"TEST_SEALED_RANK", "1"}});
}

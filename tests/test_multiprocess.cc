// Multi-process tests: real processes through the real bootstrap; a peer killed with
// SIGKILL in the middle of operations, over shared memory and over TCP; hosts simulated
// with COLL_HOSTID so shm and net mix in one communicator.
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/collectives.h"
#include "proc_harness.h"

using testing::basicOps;
using testing::describe;
using testing::ProcOptions;
using testing::ProcResult;
using testing::runProcs;

TEST_CASE("processes form a communicator through COLL_COMM_ID", "[multiprocess]") {
  // Shared memory (FIFOs above the mailbox size), shared memory with direct reads of the
  // peers' buffers (process_vm_readv), and TCP.
  const std::pair<const char*, const char*> modes[] = {{"0", "1"}, {"0", "2"}, {"1", "1"}};
  for (auto [shmDisable, direct] : modes) {
    ProcOptions o;
    o.env = {{"TEST_NRANKS", "4"}, {"COLL_SHM_DISABLE", shmDisable}, {"COLL_DIRECT", direct}};
    auto res = runProcs(4, basicOps, o);
    INFO("COLL_SHM_DISABLE=" << shmDisable << " COLL_DIRECT=" << direct << "\n" << describe(res));
    for (auto& r : res) REQUIRE(r.exitCode == 0);
  }
}

TEST_CASE("simulated hosts mix shm and net in one ring", "[multiprocess]") {
  // The host executor, and the device executor emulated on host threads (processes on
  // one host share FIFOs in shm segments; across hosts the proxy thread moves net FIFOs).
  const char* emulate = GENERATE("0", "1");
  ProcOptions o;
  o.env = {
      {"TEST_NRANKS", "4"}, {"COLL_DEBUG", "INFO"}, {"COLL_DEBUG_SUBSYS", "INIT"}, {"COLL_DEVICE_EMULATE", emulate}};
  o.perRankEnv = [](int rank) { setenv("COLL_HOSTID", rank < 2 ? "hostA" : "hostB", 1); };
  auto res = runProcs(4, basicOps, o);
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

// Ranks placed round robin over two simulated hosts (A B A B, as mpirun --map-by node
// does): the ring visits each host once (0 -> 2 -> 1 -> 3 -> 0, two TCP hops) instead of
// crossing between them at every hop, and every collective stays correct (one-shot,
// ring, chain; host executor and emulated device executor, whose ring follows too).
int ringThenBasicOps(int rank, std::string& report) {
  {
    collComm_t comm = nullptr;
    collUniqueId id;
    PCHECK(collGetUniqueId(&id));
    PCHECK(collCommInitRank(&comm, 4, id, rank));
    collCommDestroy(comm);
  }
  const int next[4] = {2, 3, 1, 0}, prev[4] = {3, 2, 0, 1};
  std::ifstream log(std::getenv("COLL_DEBUG_FILE"));
  const std::string want = "ring " + std::to_string(prev[rank]) + " -> " + std::to_string(rank) + " -> " +
                           std::to_string(next[rank]);
  std::string line;
  bool found = false;
  while (std::getline(log, line)) found |= line.find(want) != std::string::npos;
  if (!found) {
    report += "no \"" + want + "\" in the INIT log";
    return 1;
  }
  if (int rc = basicOps(rank, report)) return rc;
  // Float sums whose bits depend on the order of combining: every rank must get the same
  // ones (each combines the inputs in one agreed order, whatever the ring's).
  collComm_t comm = nullptr;
  collUniqueId id;
  PCHECK(collGetUniqueId(&id));
  PCHECK(collCommInitRank(&comm, 4, id, rank));
  for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
    std::vector<float> in(count), out(count), all(count * 4);
    const float scale[4] = {1e8f, 1.0f, -1e8f, 3.0f};
    for (size_t i = 0; i < count; ++i) in[i] = scale[rank] * (1.0f + static_cast<float>(i % 7) / 3.0f);
    PCHECK(collAllReduce(in.data(), out.data(), count, collFloat32, collSum, comm, nullptr));
    PCHECK(collAllGather(out.data(), all.data(), count, collFloat32, comm, nullptr));
    for (int r = 1; r < 4; ++r)
      if (std::memcmp(all.data(), all.data() + r * count, count * sizeof(float)) != 0) {
        report += "float allreduce of " + std::to_string(count) + ": rank " + std::to_string(r) +
                  " got other bits than rank 0";
        collCommDestroy(comm);
        return 1;
      }
  }
  collCommDestroy(comm);
  return 0;
}

TEST_CASE("round-robin placement over hosts: the ring visits each host once", "[multiprocess]") {
  const char* emulate = GENERATE("0", "1");
  const std::string dir = "/tmp/coll-rr-" + std::to_string(getpid());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  ProcOptions o;
  o.env = {{"TEST_NRANKS", "4"},
           {"COLL_DEBUG", "INFO"},
           {"COLL_DEBUG_SUBSYS", "INIT"},
           {"COLL_DEVICE_EMULATE", emulate},
           {"COLL_SOCKET_IFNAME", "lo"}};
  o.perRankEnv = [dir](int rank) {
    setenv("COLL_HOSTID", rank % 2 == 0 ? "hostA" : "hostB", 1);
    setenv("COLL_DEBUG_FILE", (dir + "/rank" + std::to_string(rank) + ".log").c_str(), 1);
  };
  auto res = runProcs(4, ringThenBasicOps, o);
  (void)std::system(("rm -rf " + dir).c_str());
  INFO("COLL_DEVICE_EMULATE=" << emulate << "\n" << describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

TEST_CASE("tree allreduce across simulated hosts", "[multiprocess][tree]") {
  // Uneven hosts (2, 1 and 2 ranks): chains inside hosts, both double binary trees
  // across them, over shm + TCP and over TCP only; the tuner's own choice as well.
  for (const char* algo : {"allreduce:tree", ""})
    for (const char* shmDisable : {"0", "1"}) {
      ProcOptions o;
      o.env = {
          {"TEST_NRANKS", "5"}, {"COLL_ALGO", algo}, {"COLL_SHM_DISABLE", shmDisable}, {"COLL_SOCKET_IFNAME", "lo"}};
      o.perRankEnv = [](int rank) { setenv("COLL_HOSTID", rank < 2 ? "hostA" : rank < 3 ? "hostB" : "hostC", 1); };
      auto res = runProcs(5, basicOps, o);
      INFO("COLL_ALGO=" << algo << " COLL_SHM_DISABLE=" << shmDisable << "\n" << describe(res));
      for (auto& r : res) REQUIRE(r.exitCode == 0);
    }
}

TEST_CASE("NCCL_COMM_ID is honoured like COLL_COMM_ID", "[multiprocess]") {
  ProcOptions o;
  o.env = {{"TEST_NRANKS", "2"}};
  auto res = runProcs(
      2,
      [](int rank, std::string& report) {
    std::string id = std::getenv("COLL_COMM_ID");
    unsetenv("COLL_COMM_ID");
    setenv("NCCL_COMM_ID", id.c_str(), 1);
    return basicOps(rank, report);
      },
      o);
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

namespace {

// Every rank loops on allreduce until an error; the victim is killed by the parent.
// A survivor exits 0 when its error names the victim, 3 when it names someone else.
int loopUntilError(int rank, std::string& report) {
  collComm_t comm = nullptr;
  collUniqueId id;
  int n = std::atoi(std::getenv("TEST_NRANKS"));
  int victim = std::atoi(std::getenv("TEST_VICTIM"));
  // A rank that pauses between calls (it is idle, not in an operation, when the victim dies).
  const char* pause = std::getenv("TEST_PAUSE_RANK");
  const bool pauses = pause && std::atoi(pause) == rank;
  PCHECK(collGetUniqueId(&id));
  PCHECK(collCommInitRank(&comm, n, id, rank));
  std::vector<float> buf(1 << 18, 1.0f);
  if (rank == 0) {
    // Tell the parent we are up (it kills the victim a little later).
    report += "ready ";
  }
  for (;;) {
    collResult_t r = collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr);
    if (r == collSuccess && pauses) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (r == collSuccess) continue;
    std::string err = collGetLastError(comm);
    report += std::string(collGetErrorString(r)) + ": " + err;
    collCommAbort(comm);
    bool named = err.find("rank " + std::to_string(victim)) != std::string::npos;
    bool code = r == collRemoteError || r == collSystemError;
    return named && code ? 0 : 3;
  }
}

void killTest(const char* shmDisable, int victim, int n = 3, const char* emulate = "0",
              const std::map<std::string, std::string>& extraEnv = {}) {
  ProcOptions o;
  o.timeoutS = 40;
  o.env = {{"TEST_NRANKS", std::to_string(n)},
           {"TEST_VICTIM", std::to_string(victim)},
           {"COLL_SHM_DISABLE", shmDisable},
           {"COLL_DEVICE_EMULATE", emulate},
           // Should a survivor ever stay stuck, its log says where it waits (and the root's
           // hang report what every rank was doing).
           {"COLL_STALL_WARN_S", "3"}};
  o.env.insert(extraEnv.begin(), extraEnv.end());
  std::chrono::steady_clock::time_point killedAt;
  o.parent = [&](const std::vector<pid_t>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // init + some iterations
    kill(pids[victim], SIGKILL);
    killedAt = std::chrono::steady_clock::now();
  };
  auto res = runProcs(n, loopUntilError, o);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killedAt).count();
  INFO("victim " << victim << " COLL_SHM_DISABLE=" << shmDisable << " COLL_DEVICE_EMULATE=" << emulate
                 << " survivors done after " << took << " s\n"
                 << describe(res));
  REQUIRE(res[victim].signal == SIGKILL);
  for (int r = 0; r < n; ++r)
    if (r != victim) REQUIRE(res[r].exitCode == 0);
  REQUIRE(took < 10.0);
}

}  // namespace

TEST_CASE("a killed peer fails every survivor naming it over shm", "[multiprocess][failure]") {
  killTest("0", 2);
  killTest("0", 0);          // the rank hosting the bootstrap root
  killTest("0", 2, 3, "1");  // device executor (emulated): lanes spin until the proxy raises abort
}

TEST_CASE("a killed peer fails every survivor naming it over TCP", "[multiprocess][failure]") {
  killTest("1", 1);
  killTest("1", 0);
  killTest("1", 1, 2);       // two ranks: one duplex connection carries both directions
  killTest("1", 1, 3, "1");  // device executor (emulated): the proxy sees the connection fail
}

#ifdef COLL_VERBS_EMU_PATH
// The ib backend on the verbs emulation: a receiver whose credits were all delivered
// learns of the death from the side channel, a sender from its writes (retry exceeded).
TEST_CASE("a killed peer fails every survivor naming it over ib (verbs emulation)", "[multiprocess][failure]") {
  const std::string fabric = "/coll_mp_ib_" + std::to_string(getpid());
  struct Unlink {  // also when a REQUIRE fails
    std::string name;
    ~Unlink() { shm_unlink(name.c_str()); }
  } unlinkAfter{fabric};
  const std::map<std::string, std::string> env = {{"COLL_NET", "IB"},
                                                  {"COLL_IB_VERBS_LIB", COLL_VERBS_EMU_PATH},
                                                  {"COLL_VERBS_EMU_FABRIC", fabric},
                                                  {"COLL_SOCKET_IFNAME", "lo"}};
  killTest("1", 1, 3, "0", env);
  killTest("1", 0, 3, "0", env);
  killTest("1", 1, 2, "0", env);
  killTest("1", 1, 3, "1", env);  // device executor (emulated): the proxy thread polls the CQs
}
#endif

namespace {

// Three ranks, rank 2 given `rank2Env`, which makes its init fail: every rank's init must
// fail within seconds (not after COLL_BOOTSTRAP_TIMEOUT_S), the others naming rank 2 (or
// the root, whose process may exit first).
void initFailureTest(const std::map<std::string, std::string>& env,
                     const std::map<std::string, std::string>& rank2Env) {
  ProcOptions o;
  o.timeoutS = 40;
  o.env = env;
  o.perRankEnv = [&](int rank) {
    if (rank == 2)
      for (const auto& [k, v] : rank2Env) setenv(k.c_str(), v.c_str(), 1);
  };
  const auto start = std::chrono::steady_clock::now();
  auto res = runProcs(
      3,
      [](int rank, std::string& report) {
    collComm_t comm = nullptr;
    collUniqueId id;
    PCHECK(collGetUniqueId(&id));
    const collResult_t r = collCommInitRank(&comm, 3, id, rank);
    const std::string why = collGetLastError(comm);
    report += "rank " + std::to_string(rank) + ": " + why + "\n";
    if (r == collSuccess) return 3;
    // The root's process lingers as a real one reporting its error would: a rank that
    // connects after it is gone cannot tell a dead root from one not started yet, and
    // retries until COLL_BOOTSTRAP_TIMEOUT_S.
    if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(3));
    // Names rank 2, or (when the root's process, rank 0's, exited after its own failed
    // init before this rank's join was read) the root that went away.
    const bool named = why.find("rank 2") != std::string::npos || why.find("bootstrap root at") != std::string::npos;
    return rank == 2 || named ? 0 : 4;
      },
      o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("done after " << took << " s\n" << describe(res));
  for (int r = 0; r < 3; ++r) REQUIRE(res[r].exitCode == 0);
  REQUIRE(took < 20.0);
}

}  // namespace

// Rank 2 has no interface to listen on, so it cannot join: it tells the root, which
// fails the others' joins at once.
TEST_CASE("a rank that cannot join fails every rank's init at once, naming it", "[multiprocess][failure]") {
  initFailureTest({}, {{"COLL_SOCKET_IFNAME", "=no-such-interface"}});
}

// Rank 3 never comes. The root (in rank 0's process) gives up after
// COLL_BOOTSTRAP_TIMEOUT_S and tells the ranks that joined; rank 0's process then exits
// at once, which ends the root's thread too. Ranks 1 and 2 must still hear which rank was
// missing, not only that the root's connection closed: the root tells the ranks of
// other processes first (it told rank 0 first, and CI once saw ranks 1 and 2 fail with
// "connection closed" alone).
TEST_CASE("a rank that never joins is named to every rank that did, though the root's process exits at once",
          "[multiprocess][failure]") {
  for (int round = 0; round < 3; ++round) {
    ProcOptions o;
    o.timeoutS = 30;
    o.env = {{"COLL_BOOTSTRAP_TIMEOUT_S", "1"}};
    auto res = runProcs(
        4,
        [](int rank, std::string& report) {
      if (rank == 3) return 0;
      collComm_t comm = nullptr;
      collUniqueId id;
      PCHECK(collGetUniqueId(&id));
      const collResult_t r = collCommInitRank(&comm, 4, id, rank);
      report += collGetLastError(comm);
      if (r == collSuccess) return 3;
      return report.find("rank(s) 3 of 4 never joined") != std::string::npos ? 0 : 4;
        },
        o);
    INFO("round " << round << "\n" << describe(res));
    for (int r = 0; r < 4; ++r) REQUIRE(res[r].exitCode == 0);
  }
}

#ifdef COLL_VERBS_EMU_PATH
// Rank 2 joins, then finds no ib device it may use (COLL_IB_HCA selects none) while the
// others wait for its connection handles: it announces its failure through the root.
TEST_CASE("a rank that fails after joining fails every rank's init, naming it", "[multiprocess][failure]") {
  const std::string fabric = "/coll_mp_ibinit_" + std::to_string(getpid());
  struct Unlink {
    std::string name;
    ~Unlink() { shm_unlink(name.c_str()); }
  } unlinkAfter{fabric};
  initFailureTest({{"COLL_NET", "IB"},
                   {"COLL_SHM_DISABLE", "1"},
                   {"COLL_IB_VERBS_LIB", COLL_VERBS_EMU_PATH},
                   {"COLL_VERBS_EMU_FABRIC", fabric},
                   {"COLL_SOCKET_IFNAME", "lo"}},
                  {{"COLL_IB_HCA", "=nosuch"}});
}
#endif

#ifdef COLL_VERBS_EMU_PATH
namespace {

// Two processes over the network (shm off) on the verbs emulation, rank 1 given
// `rank1Env` and each rank's config->netName from `netName` (nullptr: unset); an allreduce
// where init succeeds. Each report is the rank's init result, its NET log and last error.
std::vector<ProcResult> netChoice(const std::map<std::string, std::string>& rank1Env,
                                  std::function<const char*(int)> netName) {
  const std::string fabric = "/coll_mp_netchoice_" + std::to_string(getpid());
  ProcOptions o;
  o.timeoutS = 40;
  o.env = {{"COLL_SHM_DISABLE", "1"},
           {"COLL_IB_VERBS_LIB", COLL_VERBS_EMU_PATH},
           {"COLL_VERBS_EMU_FABRIC", fabric},
           {"COLL_SOCKET_IFNAME", "lo"},
           {"COLL_DEBUG", "INFO"},
           {"COLL_DEBUG_SUBSYS", "NET"},
           {"COLL_DEBUG_FILE", "/tmp/coll-netchoice-%p.log"}};
  o.perRankEnv = [&](int rank) {
    if (rank == 1)
      for (const auto& [k, v] : rank1Env) setenv(k.c_str(), v.c_str(), 1);
  };
  auto res = runProcs(
      2,
      [&](int rank, std::string& report) {
    collComm_t comm = nullptr;
    collUniqueId id;
    PCHECK(collGetUniqueId(&id));
    collConfig_t cfg = COLL_CONFIG_INITIALIZER;
    cfg.netName = netName(rank);
    const collResult_t r = collCommInitRankConfig(&comm, 2, id, rank, &cfg);
    report += "init " + std::to_string(r) + "; " + collGetLastError(nullptr) + "\n";
    int code = 0;
    if (r == collSuccess) {
      std::vector<float> buf(100000, 1.0f + rank);
      PCHECK(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr));
      code = buf[99999] == 3.0f ? 0 : 5;
      PCHECK(collCommDestroy(comm));
    }
    const std::string path = "/tmp/coll-netchoice-" + std::to_string(getpid()) + ".log";
    std::ifstream f(path);
    report += std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    return code;
      },
      o);
  shm_unlink(fabric.c_str());
  return res;
}

bool has(const ProcResult& r, const char* text) { return r.output.find(text) != std::string::npos; }

}  // namespace

TEST_CASE("the communicator's net backend: IB where every rank can use it, else Socket, unless config->netName says",
          "[multiprocess][net]") {
  auto none = [](int) -> const char* { return nullptr; };
  auto res = netChoice({}, none);  // nothing set: every rank probes IB (the emulation)
  INFO(describe(res));
  for (auto& r : res) {
    REQUIRE(r.exitCode == 0);
    REQUIRE(has(r, "net backend IB (probed)"));
    REQUIRE(has(r, "first data delivered"));  // the ib backend carried the allreduce
  }
  res = netChoice({{"COLL_IB_DISABLE", "1"}}, none);  // rank 1 cannot: both use Socket
  INFO(describe(res));
  REQUIRE(has(res[0], "rank 0 found net backend IB, rank 1 Socket: every rank uses Socket"));
  for (auto& r : res) {
    REQUIRE(r.exitCode == 0);
    REQUIRE(has(r, "net backend Socket"));
    REQUIRE_FALSE(has(r, "first data delivered"));
  }
  res = netChoice({}, [](int) { return "Socket"; });  // config->netName is the communicator's
  INFO(describe(res));
  for (auto& r : res) {
    REQUIRE(r.exitCode == 0);
    REQUIRE(has(r, "net backend Socket"));
    REQUIRE_FALSE(has(r, "first data delivered"));
  }
  res = netChoice({}, [](int rank) { return rank == 0 ? "Socket" : "IB"; });  // a choice must match
  INFO(describe(res));
  const std::string refused = "init " + std::to_string(collInvalidUsage) + "; ";
  for (auto& r : res) {
    REQUIRE(r.exitCode == 0);
    REQUIRE(has(r, refused.c_str()));
    REQUIRE(has(r, "ranks disagree on the net backend"));
  }
}
#endif

TEST_CASE("a rank waiting for a late peer reports where it stands (COLL_STALL_WARN_S)", "[multiprocess][failure]") {
  // Host executor and device executor (emulated): rank 1 comes 2.5 s late; rank 0's log
  // names the operation and the rank it waits for, then the operation completes.
  const char* emulate = GENERATE("0", "1");
  ProcOptions o;
  o.env = {{"TEST_NRANKS", "2"},
           {"COLL_STALL_WARN_S", "1"},
           {"COLL_DEBUG_FILE", "/tmp/coll-stall-test-%p.log"},
           {"COLL_DEVICE_EMULATE", emulate}};
  auto res = runProcs(
      2,
      [](int rank, std::string& report) {
    collComm_t comm = nullptr;
    collUniqueId id;
    PCHECK(collGetUniqueId(&id));
    PCHECK(collCommInitRank(&comm, 2, id, rank));
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    std::vector<float> buf(1 << 20, 1.0f);
    PCHECK(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr));
    PCHECK(collCommDestroy(comm));
    const std::string path = "/tmp/coll-stall-test-" + std::to_string(getpid()) + ".log";
    if (rank == 1) std::remove(path.c_str());
    if (buf[0] != 2.0f) return 4;
    if (rank == 1) return 0;
    std::ifstream f(path);
    std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    report += log;
    const bool named = log.find("stalled") != std::string::npos && log.find("collAllReduce #0") != std::string::npos &&
                       log.find("rank 1") != std::string::npos;
    return named ? 0 : 3;
      },
      o);
  INFO("COLL_DEVICE_EMULATE=" << emulate << "\n" << describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

TEST_CASE("ranks that disagree on settings fail init naming both", "[multiprocess][failure]") {
  ProcOptions o;
  o.env = {{"TEST_NRANKS", "2"}, {"COLL_SHM_DISABLE", "1"}};
  o.perRankEnv = [](int rank) { setenv("COLL_NET_DUPLEX", rank == 0 ? "1" : "0", 1); };
  auto res = runProcs(
      2,
      [](int rank, std::string& report) {
    collComm_t comm = nullptr;
    collUniqueId id;
    PCHECK(collGetUniqueId(&id));
    collResult_t r = collCommInitRank(&comm, 2, id, rank);
    report += collGetLastError(nullptr);
    if (r != collInvalidUsage) return 2;
    bool named = report.find("COLL_NET_DUPLEX=1") != std::string::npos &&
                 report.find("rank 1 has") != std::string::npos &&
                 report.find("COLL_NET_DUPLEX=0") != std::string::npos;
    return named ? 0 : 3;
      },
      o);
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

TEST_CASE("bootstrap and TCP over IPv6 loopback", "[multiprocess][net]") {
  ProcOptions o;
  o.env = {{"TEST_NRANKS", "3"},
           {"COLL_COMM_ID", "[::1]:" + std::to_string(testing::freePort())},
           {"COLL_SOCKET_FAMILY", "AF_INET6"},
           {"COLL_SHM_DISABLE", "1"}};
  auto res = runProcs(3, basicOps, o);
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

namespace {

// Init under COLL_COMM_ID; exit 0 on success (after an allreduce), 4 when init fails,
// with the error in the report.
int initOrFail(int rank, std::string& report) {
  collComm_t comm = nullptr;
  collUniqueId id;
  PCHECK(collGetUniqueId(&id));
  if (collCommInitRank(&comm, 2, id, rank) != collSuccess) {
    report += collGetLastError(nullptr);
    return 4;
  }
  std::vector<int32_t> v(1000, rank + 1);
  PCHECK(collAllReduce(v.data(), v.data(), v.size(), collInt32, collSum, comm, nullptr));
  if (v[999] != 3) return 1;
  PCHECK(collCommDestroy(comm));
  return 0;
}

}  // namespace

TEST_CASE("COLL_AUTH_KEY: ranks that share it form the communicator, ranks that do not fail init saying so",
          "[multiprocess][auth]") {
  for (bool same : {true, false}) {
    ProcOptions o;
    o.timeoutS = 30;
    o.env = {{"TEST_NRANKS", "2"}, {"COLL_SHM_DISABLE", "1"}, {"COLL_BOOTSTRAP_TIMEOUT_S", "3"}};
    o.perRankEnv = [same](int rank) { setenv("COLL_AUTH_KEY", same ? "job-key" : rank ? "other" : "job-key", 1); };
    auto res = runProcs(2, initOrFail, o);
    INFO("same key: " << same << "\n" << describe(res));
    if (same) {
      for (auto& r : res) REQUIRE(r.exitCode == 0);
    } else {
      // Rank 1 finds the root (hosted by rank 0) does not know its key; rank 0 then waits
      // for rank 1 in vain.
      REQUIRE(res[1].exitCode == 4);
      REQUIRE(res[1].output.find("does not know this communicator's key (COLL_AUTH_KEY") != std::string::npos);
      REQUIRE(res[0].exitCode == 4);
      REQUIRE(res[0].output.find("rank(s) 1 of 2 never joined") != std::string::npos);
    }
  }
}

TEST_CASE("COLL_AUTH_KEY_FILE: a file only its owner may read holds the key", "[multiprocess][auth]") {
  const std::string path = "/tmp/coll_auth_key_" + std::to_string(getpid());
  for (int mode : {0600, 0644}) {
    {
      std::ofstream f(path);
      f << "a key of this job\n";
    }
    REQUIRE(chmod(path.c_str(), static_cast<mode_t>(mode)) == 0);
    ProcOptions o;
    o.timeoutS = 30;
    o.env = {{"TEST_NRANKS", "2"}, {"COLL_AUTH_KEY_FILE", path}, {"COLL_BOOTSTRAP_TIMEOUT_S", "3"}};
    auto res = runProcs(2, initOrFail, o);
    INFO("mode " << std::oct << mode << "\n" << describe(res));
    for (auto& r : res) {
      if (mode == 0600) {
        REQUIRE(r.exitCode == 0);
      } else {
        REQUIRE(r.exitCode == 1);  // collGetUniqueId refuses
        REQUIRE(r.output.find("chmod 600") != std::string::npos);
      }
    }
  }
  std::remove(path.c_str());
}

TEST_CASE("COLL_COMM_ID without a key: one WARN says connections are unauthenticated", "[multiprocess][auth]") {
  ProcOptions o;
  o.env = {{"TEST_NRANKS", "2"}, {"COLL_DEBUG_FILE", "/tmp/coll_auth_warn.%p.log"}};
  auto res = runProcs(
      2,
      [](int rank, std::string& report) {
    collComm_t comm = nullptr;
    collUniqueId id;
    PCHECK(collGetUniqueId(&id));  // twice: still one line
    const int rc = initOrFail(rank, report);
    const std::string path = "/tmp/coll_auth_warn." + std::to_string(getpid()) + ".log";
    std::ifstream f(path);
    std::string line;
    int warns = 0;
    while (std::getline(f, line))
      warns += line.find("WARN") != std::string::npos &&
               line.find("connections are unauthenticated") != std::string::npos;
    std::remove(path.c_str());
    report += "unauthenticated WARN lines: " + std::to_string(warns);
    return rc != 0 ? rc : warns == 1 ? 0 : 5;
      },
      o);
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

namespace {

// What `command` printed on stdout.
std::string commandOutput(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// Two allreduces; rank 1 comes to the second 4 s late.
int lateRank(int rank, std::string& report) {
  collComm_t comm = nullptr;
  collUniqueId id;
  PCHECK(collGetUniqueId(&id));
  PCHECK(collCommInitRank(&comm, 3, id, rank));
  std::vector<float> buf(4096, 1.0f);
  PCHECK(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr));
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  PCHECK(collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr));
  PCHECK(collCommDestroy(comm));
  return 0;
}

}  // namespace

#ifdef COLLSTAT_PATH
TEST_CASE("hang report over processes: printed once by the root past COLL_STALL_WARN_S, and by collstat on demand",
          "[multiprocess][report]") {
  char dir[] = "/tmp/coll_report_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string commId = "127.0.0.1:" + std::to_string(testing::freePort());
  const std::string env = "COLL_COMM_ID=" + commId + " COLL_AUTH_KEY=report-test-key";
  ProcOptions o;
  o.timeoutS = 40;
  o.env = {{"COLL_COMM_ID", commId},
           {"COLL_AUTH_KEY", "report-test-key"},
           {"COLL_STALL_WARN_S", "1"},
           {"COLL_DEBUG_FILE", std::string(dir) + "/log.%p"}};
  std::string stat, wrongKey;
  o.parent = [&](const std::vector<pid_t>&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    stat = commandOutput(env + " " COLLSTAT_PATH " 2>&1");
    wrongKey = commandOutput("COLL_AUTH_KEY=another " COLLSTAT_PATH " " + commId + " 2>&1; echo exit=$?");
  };
  auto res = runProcs(3, lateRank, o);
  const std::string logs = commandOutput(std::string("cat ") + dir + "/log.* 2>/dev/null");
  (void)commandOutput(std::string("rm -rf ") + dir);
  INFO(describe(res) << "collstat:\n" << stat << "\nwith a wrong key:\n" << wrongKey << "\nlogs:\n" << logs);
  for (auto& r : res) REQUIRE(r.exitCode == 0);
  const std::string cause = "cause: rank 1 never called collAllReduce #1 (count 4096, float32, sum): it is idle; "
                            "ranks 0,2 wait in it";
  CHECK(stat.find("asked by collstat") != std::string::npos);
  CHECK(stat.find(cause) != std::string::npos);
  CHECK(wrongKey.find("exit=1") != std::string::npos);
  // The stalled ranks each ask; the root prints the one finding once.
  CHECK(logs.find(cause) != std::string::npos);
  CHECK(logs.find(cause) == logs.rfind(cause));
  CHECK(logs.find("stalled") != std::string::npos);
}
#endif

namespace {

void survivorsNameKilled(const char* pauseRank) {
  ProcOptions o;
  o.timeoutS = 40;
  o.env = {{"TEST_NRANKS", "3"}, {"TEST_VICTIM", "2"}, {"TEST_PAUSE_RANK", pauseRank}};
  o.parent = [&](const std::vector<pid_t>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pids[2], SIGKILL);
  };
  auto res = runProcs(3, loopUntilError, o);
  INFO(describe(res));
  for (int r = 0; r < 2; ++r) {
    CHECK(res[r].exitCode == 0);
    CHECK(res[r].output.find("job-wide report: rank 2 (pid ") != std::string::npos);
    CHECK(res[r].output.find(") exited or was killed while rank") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("hang report over processes: the survivors of a killed rank name it and where they were",
          "[multiprocess][report][failure]") {
  survivorsNameKilled("-1");
}

// Rank 0, the root's process, sleeps between calls: it learns of the death while idle, and
// its next call fails on entry. That error too carries the job-wide report.
TEST_CASE("hang report over processes: a survivor idle when a rank dies names it on its next call",
          "[multiprocess][report][failure]") {
  survivorsNameKilled("0");
}

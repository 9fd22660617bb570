// Staged launches (device/stage.h) and the copy agent (device/copy_agent.h) across forked
// processes on one emulated GPU (COLL_DEVICE_EMULATE=1, host threads for kernels): small
// operations staged through host memory while larger ones run on lanes that yield, the
// lowest rank on the GPU copying for the others' processes, and clients that go on
// copying for themselves once their agent's communicator is gone. The timing log
// (COLL_DEVICE_TIMING) tells which path each launch took and who copied.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/collectives.h"
#include "proc_harness.h"

using testing::basicOps;
using testing::describe;
using testing::ProcOptions;
using testing::runProcs;

// Processes whose device lanes yield (as on a GPU time-sliced between them, no MPS):
// collectives up to COLL_DEVICE_STAGE_BYTES run from host memory, larger ones on lanes
// that give their block up and are run again (emulated: host threads for kernels).
TEST_CASE("processes whose device lanes yield: small collectives staged, large ones rerun (emulated)",
          "[multiprocess][device]") {
  ProcOptions o;
  o.env = {{"TEST_NRANKS", "3"},
           {"COLL_DEVICE_EMULATE", "1"},
           {"COLL_DEVICE_YIELD_US", "1"},
           {"COLL_DEVICE_STAGE_BYTES", "8192"}};
  auto res = runProcs(3, basicOps, o);
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
  // And that both paths were taken, as the timing log (COLL_DEVICE_TIMING) tells: a staged
  // allreduce, and one on lanes that yielded and ran again (256-byte slots: many waits).
  o.env["COLL_DEVICE_TIMING"] = "1";
  o.env["COLL_DEVICE_BUFFSIZE"] = "2048";
  o.env["COLL_DEBUG"] = "INFO";
  o.env["COLL_DEBUG_SUBSYS"] = "COLL";
  o.env["COLL_DEBUG_FILE"] = "/tmp/coll-yield-test-%p.log";
  for (bool agent : {true, false}) {
    o.env["COLL_DEVICE_COPY_AGENT"] = agent ? "1" : "0";
    res = runProcs(
        3,
        [agent](int rank, std::string& report) {
      collComm_t comm = nullptr;
      collUniqueId id;
      PCHECK(collGetUniqueId(&id));
      PCHECK(collCommInitRank(&comm, 3, id, rank));
      for (size_t count : {size_t{100}, size_t{20000}}) {
        std::vector<int32_t> buf(count, rank + 1);
        PCHECK(collAllReduce(buf.data(), buf.data(), count, collInt32, collSum, comm, nullptr));
        if (buf[0] != 6 || buf[count - 1] != 6) report += "allreduce of " + std::to_string(count) + " wrong; ";
      }
      // A group of more copies than one request holds (32): each rank copies them itself.
      std::vector<std::vector<int32_t>> many(40, std::vector<int32_t>(10, rank + 1));
      PCHECK(collGroupStart());
      for (auto& v : many) PCHECK(collAllReduce(v.data(), v.data(), v.size(), collInt32, collSum, comm, nullptr));
      PCHECK(collGroupEnd());
      for (const auto& v : many)
        if (v[0] != 6 || v[9] != 6) report += "a grouped allreduce wrong; ";
      PCHECK(collCommDestroy(comm));
      const std::string path = "/tmp/coll-yield-test-" + std::to_string(getpid()) + ".log";
      std::ifstream f(path);
      const std::string log((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      std::remove(path.c_str());
      if (log.find("staged timing") == std::string::npos) report += "nothing staged; ";
      // Ranks 1 and 2 are other processes on rank 0's (emulated) GPU: rank 0 copies for them.
      const bool byAgent = log.find("(copies by rank 0)") != std::string::npos;
      if (byAgent != (rank != 0 && agent)) report += byAgent ? "copied by rank 0; " : "not copied by rank 0; ";
      if (log.find(" run(s)") == std::string::npos || log.find(" in 1 run(s)") != std::string::npos)
        report += "the large allreduce did not run again; ";
      return report.empty() ? 0 : 1;
        },
        o);
    INFO("COLL_DEVICE_COPY_AGENT=" << agent << "\n" << describe(res));
    for (auto& r : res) REQUIRE(r.exitCode == 0);
  }
}

// The copy agent's communicator ends while its clients go on: rank 1 (the agent of ranks
// 2 and 3, its emulated GPU's other processes) destroys it after one allreduce; 2 and 3
// then exchange staged sends and receives, which they copy themselves (the agent closed),
// and finish with rank 0 on another (simulated) host. Rank 1 waits until 2 and 3 have
// returned from the allreduce: its own call may return before theirs have copied their
// outputs back, and an agent that closes first leaves that copy to them (as designed),
// which once made this test fail ("0 copied by rank 1").
TEST_CASE("staged operations outlive their copy agent's communicator (emulated)", "[multiprocess][device]") {
  const std::string dir = "/tmp/coll-agent-test-" + std::to_string(getpid());
  (void)std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
  ProcOptions o;
  o.env = {{"COLL_DEVICE_EMULATE", "1"}, {"COLL_DEVICE_YIELD_US", "1"}, {"COLL_DEVICE_STAGE_BYTES", "8192"},
           {"COLL_DEVICE_TIMING", "1"},  {"COLL_DEBUG", "INFO"},        {"COLL_DEBUG_SUBSYS", "COLL"},
           {"COLL_SOCKET_IFNAME", "lo"}};
  o.perRankEnv = [dir](int rank) {
    setenv("COLL_HOSTID", rank == 0 ? "hostA" : "hostB", 1);
    setenv("COLL_DEBUG_FILE", (dir + "/rank" + std::to_string(rank) + ".log").c_str(), 1);
  };
  auto res = runProcs(
      4,
      [dir](int rank, std::string& report) {
    collComm_t comm = nullptr;
    collUniqueId id;
    PCHECK(collGetUniqueId(&id));
    PCHECK(collCommInitRank(&comm, 4, id, rank));
    std::vector<int32_t> buf(100, rank + 1);
    PCHECK(collAllReduce(buf.data(), buf.data(), buf.size(), collInt32, collSum, comm, nullptr));
    if (buf[99] != 10) report += "allreduce wrong; ";
    const std::string closed = dir + "/agent-closed";
    auto doneFile = [&dir](int r) { return dir + "/allreduce-done-" + std::to_string(r); };
    if (rank >= 2) std::ofstream(doneFile(rank)) << "1";
    if (rank == 1) {
      for (int i = 0; i < 3000 && !(std::ifstream(doneFile(2)).good() && std::ifstream(doneFile(3)).good()); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      PCHECK(collCommDestroy(comm));
      std::ofstream(closed) << "1";
      return report.empty() ? 0 : 1;
    }
    for (int i = 0; i < 3000 && rank != 0 && !std::ifstream(closed).good(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (rank != 0 && !std::ifstream(closed).good()) report += "rank 1 did not destroy its communicator in 30 s; ";
    if (rank != 0) {
      const int peer = rank == 2 ? 3 : 2;
      for (int round = 0; round < 20; ++round) {
        std::vector<int32_t> out(100, rank * 100 + round), in(100, -1);
        PCHECK(collGroupStart());
        PCHECK(collSend(out.data(), out.size(), collInt32, peer, comm, nullptr));
        PCHECK(collRecv(in.data(), in.size(), collInt32, peer, comm, nullptr));
        PCHECK(collGroupEnd());
        if (in[0] != peer * 100 + round || in[99] != peer * 100 + round) report += "exchange wrong; ";
      }
    }
    int32_t done = rank;
    if (rank == 2) PCHECK(collSend(&done, 1, collInt32, 0, comm, nullptr));
    if (rank == 0) PCHECK(collRecv(&done, 1, collInt32, 2, comm, nullptr));
    if (rank == 0 && done != 2) report += "the last message wrong; ";
    PCHECK(collCommDestroy(comm));
    std::ifstream f(dir + "/rank" + std::to_string(rank) + ".log");
    std::string line;
    int staged = 0, byAgent = 0;
    while (std::getline(f, line)) {
      staged += line.find("staged timing") != std::string::npos;
      byAgent += line.find("(copies by rank 1)") != std::string::npos;
    }
    if (rank >= 2 && (staged < 21 || byAgent != 1))
      report += std::to_string(staged) + " staged launches, " + std::to_string(byAgent) + " copied by rank 1; ";
    return report.empty() ? 0 : 1;
      },
      o);
  (void)std::system(("rm -rf " + dir).c_str());
  INFO(describe(res));
  for (auto& r : res) REQUIRE(r.exitCode == 0);
}

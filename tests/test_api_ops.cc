// The coll API that the NCCL drop-in needs: configs, non-blocking init, simulated groups,
// PreMulSum ops, alltoall/gather/scatter, registration, revoke and shrink. (The drop-in's
// own tests in tests/nccl run the same features through NCCL's names, as processes too.)
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/collectives.h"
#include "comm/comm.h"
#include "harness.h"
#include "transport/net/net.h"

using testing::ScopedEnv;

namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("collConfig_t: size, magic and version are checked and named", "[api][config]") {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  collComm_t c = reinterpret_cast<collComm_t>(0x1);
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.magic = 0x1234;
  REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collInvalidArgument);
  REQUIRE(c == nullptr);
  REQUIRE(contains(collGetLastError(nullptr), "config->magic 0x1234"));
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.size = 3;
  REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "config->size 3"));
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.version = 99999;
  REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "config->version 99999"));
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.minCTAs = 0;
  REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "minCTAs 0"));
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.netName = "NoSuchNet";
  REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "netName"));
  // IB where this machine cannot use it (no RDMA device here): refused by name, saying why.
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.netName = "IB";
  if (coll::checkNetName("IB").ok()) {
    SUCCEED("this machine can use IB");
  } else {
    REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collInvalidArgument);
    REQUIRE(contains(collGetLastError(nullptr), "config->netName: IB"));
  }
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.deterministic = 2;
  REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "config->deterministic 2 is not 0 or 1"));
  // An older, smaller layout (NCCL 2.14's fields end at commName) is accepted.
  cfg = COLL_CONFIG_INITIALIZER;
  cfg.size = offsetof(collConfig_t, collnetEnable);
  cfg.version = 21403;
  cfg.commName = "old-layout";
  REQUIRE(collCommInitRankConfig(&c, 1, id, 0, &cfg) == collSuccess);
  REQUIRE(collCommDestroy(c) == collSuccess);
}

TEST_CASE("non-blocking init returns collInProgress and completes in the background", "[api][config]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  const int n = 3;
  collComm_t comms[n] = {};
  collConfig_t cfg = COLL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nb";
  // One thread starts every rank: only possible because none blocks.
  REQUIRE(collCommInitRankConfig(&comms[0], n, id, 0, &cfg) == collInProgress);
  // Rank 0 cannot finish joining before the others start: an operation is refused, not run.
  // (Asked once every rank had started, the init could end between the state check and the
  // call, and the operation would then wait for ranks that never join it.)
  float x = 1, y = 0;
  collResult_t early = collSuccess;
  REQUIRE(collCommGetAsyncError(comms[0], &early) == collSuccess);
  REQUIRE(early == collInProgress);
  REQUIRE(collAllReduce(&x, &y, 1, collFloat, collSum, comms[0], nullptr) == collInvalidUsage);
  CHECK(contains(collGetLastError(comms[0]), "still initializing"));
  for (int r = 1; r < n; ++r) REQUIRE(collCommInitRankConfig(&comms[r], n, id, r, &cfg) == collInProgress);
  for (int r = 0; r < n; ++r) {
    collResult_t state = collInProgress;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (state == collInProgress && std::chrono::steady_clock::now() < deadline)
      REQUIRE(collCommGetAsyncError(comms[r], &state) == collSuccess);
    REQUIRE(state == collSuccess);
  }
  std::vector<float> in(n), out(n);
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r) {
    in[r] = static_cast<float>(r + 1);
    REQUIRE(collAllReduce(&in[r], &out[r], 1, collFloat, collSum, comms[r], nullptr) == collSuccess);
  }
  REQUIRE(collGroupEnd() == collSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(out[r] == 6.0f);
  for (int r = 0; r < n; ++r) REQUIRE(collCommDestroy(comms[r]) == collSuccess);
}

TEST_CASE("collGroupSimulateEnd predicts, runs nothing and keeps ranks in step", "[api][group]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 2;
  collComm_t comms[n];
  REQUIRE(collCommInitAll(comms, n, nullptr) == collSuccess);
  std::vector<float> in(1 << 20, 1.0f);
  std::vector<std::vector<float>> out(n, std::vector<float>(in.size(), -1.0f));
  collSimInfo_t sim = COLL_SIM_INFO_INITIALIZER;
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collAllReduce(in.data(), out[r].data(), in.size(), collFloat, collSum, comms[r], nullptr) == collSuccess);
  REQUIRE(collGroupSimulateEnd(&sim) == collSuccess);
  REQUIRE(sim.estimatedTime > 0.0f);
  for (int r = 0; r < n; ++r) REQUIRE(out[r][12345] == -1.0f);
  // Only rank 0 simulates this time: the simulated operation must leave no trace (no data
  // moved, no sequence number taken) and the next real allreduce must pair up normally.
  REQUIRE(collGroupStart() == collSuccess);
  REQUIRE(collAllReduce(in.data(), out[0].data(), in.size(), collFloat, collSum, comms[0], nullptr) == collSuccess);
  REQUIRE(collGroupSimulateEnd(&sim) == collSuccess);
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collAllReduce(in.data(), out[r].data(), in.size(), collFloat, collSum, comms[r], nullptr) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(out[r][12345] == 2.0f);
  sim.magic = 0;
  REQUIRE(collGroupStart() == collSuccess);
  REQUIRE(collGroupSimulateEnd(&sim) == collInvalidArgument);
  REQUIRE(collGroupEnd() == collInvalidUsage);  // the bad simInfo still closed the group
  REQUIRE(collGroupSimulateEnd(&sim) == collInvalidArgument);
  for (int r = 0; r < n; ++r) REQUIRE(collCommDestroy(comms[r]) == collSuccess);
}

TEST_CASE("PreMulSum ops scale each input, belong to one communicator and type", "[api][premulsum]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 3;
  collComm_t comms[n], others[n];
  REQUIRE(collCommInitAll(comms, n, nullptr) == collSuccess);
  REQUIRE(collCommInitAll(others, n, nullptr) == collSuccess);
  const size_t count = 70001;  // several slices, odd
  std::vector<std::vector<double>> in(n, std::vector<double>(count)), out = in;
  std::vector<double> scalar(n);
  std::vector<collRedOp_t> ops(n);
  for (int r = 0; r < n; ++r) {
    scalar[r] = 0.25 * (r + 1);
    for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<double>(i % 7) + r;
    REQUIRE(collRedOpCreatePreMulSum(&ops[r], &scalar[r], collDouble, collScalarDevice, comms[r]) == collSuccess);
    REQUIRE(static_cast<int>(ops[r]) >= collNumOps);
  }
  for (double factor : {1.0, -2.0}) {  // collScalarDevice: read when the operation runs
    for (int r = 0; r < n; ++r) scalar[r] = 0.25 * (r + 1) * factor;
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r)  // in place on rank 1
      REQUIRE(collAllReduce(in[r].data(), r == 1 ? in[r].data() : out[r].data(), count, collDouble, ops[r], comms[r],
                            nullptr) == collSuccess);
    REQUIRE(collGroupEnd() == collSuccess);
    for (size_t i = 0; i < count; i += 101) {
      double want = 0;
      for (int q = 0; q < n; ++q) want += 0.25 * (q + 1) * factor * (static_cast<double>(i % 7) + q);
      REQUIRE(out[0][i] == want);
      REQUIRE(in[1][i] == want);
    }
    for (size_t i = 0; i < count; ++i) in[1][i] = static_cast<double>(i % 7) + 1;
  }
  float f[4] = {};
  REQUIRE(collAllReduce(f, f, 4, collFloat, ops[0], comms[0], nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(comms[0]), "PreMulSum op for float64"));
  REQUIRE(collAllReduce(in[0].data(), out[0].data(), 4, collDouble, ops[0], others[0], nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(others[0]), "another communicator"));
  REQUIRE(collRedOpDestroy(ops[0], comms[0]) == collSuccess);
  REQUIRE(collRedOpDestroy(ops[0], comms[0]) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(comms[0]), "destroyed"));
  REQUIRE(collRedOpDestroy(collSum, comms[0]) == collInvalidArgument);
  REQUIRE(collAllReduce(f, f, 4, collFloat, static_cast<collRedOp_t>(-1), comms[0], nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(comms[0]), "op -1 is not a collRedOp_t"));
  for (int r = 0; r < n; ++r) {
    REQUIRE(collCommDestroy(comms[r]) == collSuccess);
    REQUIRE(collCommDestroy(others[r]) == collSuccess);
  }
}

TEST_CASE("alltoall, gather and scatter move every block, in place too", "[api][p2p]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 4;
  const size_t count = 3001;
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    std::vector<int64_t> send(count * n), recv(count * n, -1);
    for (size_t i = 0; i < send.size(); ++i) send[i] = rank * 1000000 + static_cast<int64_t>(i);
    if (collAlltoAll(send.data(), recv.data(), count, collInt64, comm, nullptr) != collSuccess)
      return std::string("alltoall: ") + collGetLastError(comm);
    for (int p = 0; p < n; ++p)
      if (recv[p * count + 7] != p * 1000000 + rank * static_cast<int64_t>(count) + 7)
        return "alltoall block " + std::to_string(p);
    std::vector<int64_t> inplace = send;
    if (collAlltoAll(inplace.data(), inplace.data(), count, collInt64, comm, nullptr) != collSuccess)
      return std::string("alltoall in place: ") + collGetLastError(comm);
    if (inplace != recv) return "in-place alltoall differs";
    const int root = n - 1;
    std::vector<int64_t> gathered(count * n, -1);
    if (collGather(send.data(), rank == root ? gathered.data() : nullptr, count, collInt64, root, comm, nullptr) !=
        collSuccess)
      return std::string("gather: ") + collGetLastError(comm);
    if (rank == root)
      for (int p = 0; p < n; ++p)
        if (gathered[p * count + 5] != p * 1000000 + 5) return "gather block " + std::to_string(p);
    std::vector<int64_t> part(count, -1);
    if (collScatter(rank == root ? gathered.data() : nullptr, part.data(), count, collInt64, root, comm, nullptr) !=
        collSuccess)
      return std::string("scatter: ") + collGetLastError(comm);
    if (part[5] != rank * 1000000 + 5) return "scatter got " + std::to_string(part[5]);
    if (collGather(send.data(), nullptr, count, collInt64, root, comm, nullptr) !=
        (rank == root ? collInvalidArgument : collSuccess))
      return "gather with a NULL recvbuff on the root was not refused";
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

TEST_CASE("registration handles are checked, revoke stops a communicator and shrink replaces it", "[api][shrink]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 3;
  collComm_t comms[n];
  REQUIRE(collCommInitAll(comms, n, nullptr) == collSuccess);
  void* mem = nullptr;
  REQUIRE(collMemAlloc(&mem, 10000) == collSuccess);
  REQUIRE(reinterpret_cast<uintptr_t>(mem) % 4096 == 0);
  void* handle = nullptr;
  REQUIRE(collCommRegister(comms[0], mem, 10000, &handle) == collSuccess);
  REQUIRE(collCommDeregister(comms[1], handle) == collInvalidArgument);
  REQUIRE(collCommDeregister(comms[0], handle) == collSuccess);
  REQUIRE(collCommDeregister(comms[0], handle) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(comms[0]), "not a registration of this communicator"));
  int local = 0;
  REQUIRE(collMemFree(&local) == collInvalidArgument);
  REQUIRE(collMemFree(mem) == collSuccess);

  REQUIRE(collCommRevoke(comms[1], 0) == collSuccess);
  float x = 1, y = 0;
  REQUIRE(collAllReduce(&x, &y, 1, collFloat, collSum, comms[1], nullptr) == collInvalidUsage);
  REQUIRE(contains(collGetLastError(comms[1]), "revoked"));
  collResult_t async = collInternalError;
  REQUIRE(collCommGetAsyncError(comms[1], &async) == collSuccess);
  REQUIRE(async == collSuccess);  // revoked while healthy: an intended state

  // Ranks 0 and 2 stay; each thread calls shrink for its rank.
  collComm_t shrunk[n] = {};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int r : {0, 2})
    threads.emplace_back([&, r] {
      int exclude = 1;
      if (collCommShrink(comms[r], &exclude, 1, &shrunk[r], nullptr, COLL_SHRINK_DEFAULT) != collSuccess) ++failures;
    });
  for (auto& t : threads) t.join();
  REQUIRE(failures == 0);
  int size = 0, rank = -1;
  REQUIRE(collCommCount(shrunk[2], &size) == collSuccess);
  REQUIRE(collCommUserRank(shrunk[2], &rank) == collSuccess);
  REQUIRE((size == 2 && rank == 1));
  float a = 1, b = 2, ra = 0, rb = 0;
  REQUIRE(collGroupStart() == collSuccess);
  REQUIRE(collAllReduce(&a, &ra, 1, collFloat, collSum, shrunk[0], nullptr) == collSuccess);
  REQUIRE(collAllReduce(&b, &rb, 1, collFloat, collSum, shrunk[2], nullptr) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  REQUIRE((ra == 3.0f && rb == 3.0f));
  int self = 0;
  REQUIRE(collCommShrink(comms[0], &self, 1, &shrunk[1], nullptr, COLL_SHRINK_DEFAULT) == collInvalidUsage);
  REQUIRE(collCommShrink(comms[0], &self, 1, &shrunk[1], nullptr, 7) == collInvalidArgument);
  for (collComm_t c : {shrunk[0], shrunk[2], comms[0], comms[1], comms[2]}) REQUIRE(collCommDestroy(c) == collSuccess);
}

TEST_CASE("a split after gather and scatter still meets: management tags are not op numbers", "[api][split]") {
  // A gather queues n+1 operations on its root and 1 elsewhere; the split after it timed
  // out on every rank while its bootstrap tag came from the op sequence.
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 3;
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    std::vector<int> mine(4, rank), all(4 * n);
    if (collGather(mine.data(), all.data(), 4, collInt32, 0, comm, nullptr) != collSuccess)
      return std::string("gather: ") + collGetLastError(comm);
    if (collScatter(all.data(), mine.data(), 4, collInt32, 1, comm, nullptr) != collSuccess)
      return std::string("scatter: ") + collGetLastError(comm);
    collComm_t sub = nullptr;
    if (collCommSplit(comm, 0, rank, &sub, nullptr) != collSuccess)
      return std::string("split: ") + collGetLastError(comm);
    void* mem = nullptr;
    collWindow_t win = nullptr;
    if (collMemAlloc(&mem, 8192) != collSuccess) return "collMemAlloc";
    if (collCommWindowRegister(sub, mem, 8192, &win, COLL_WIN_COLL_SYMMETRIC) != collSuccess)
      return std::string("window: ") + collGetLastError(sub);
    collCommWindowDeregister(sub, win);
    collMemFree(mem);
    collCommDestroy(sub);
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

TEST_CASE("collectives are numbered alike on every rank whatever sends and receives each made", "[api][p2p]") {
  // A gather is n sends and receives on its root and one elsewhere, an uneven exchange
  // more on some ranks than others: if those took operation numbers, the ranks would
  // name the next allreduce differently (and the hang report would compare unlike ops).
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 3;
  std::vector<uint64_t> next(n);
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    std::vector<float> mine(4, 1.f), all(4 * n);
    if (collGather(mine.data(), all.data(), 4, collFloat, 0, comm, nullptr) != collSuccess)
      return std::string("gather: ") + collGetLastError(comm);
    collGroupStart();  // rank 0 sends to every other rank, which receive
    for (int p = 1; rank == 0 && p < n; ++p) collSend(mine.data(), 4, collFloat, p, comm, nullptr);
    if (rank > 0) collRecv(all.data(), 4, collFloat, 0, comm, nullptr);
    if (collGroupEnd() != collSuccess) return std::string("exchange: ") + collGetLastError(comm);
    if (collAllReduce(mine.data(), mine.data(), 4, collFloat, collSum, comm, nullptr) != collSuccess)
      return std::string("allreduce: ") + collGetLastError(comm);
    next[static_cast<size_t>(rank)] = comm->seq;
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
  for (int r = 1; r < n; ++r) CHECK(next[static_cast<size_t>(r)] == next[0]);
  CHECK(next[0] == 1);  // the allreduce was the first collective
}

TEST_CASE("one thread registers every rank's symmetric window inside a group", "[api][group]") {
  // As nccl-tests -R 2 does: each registration is collective, so outside a group the
  // first would wait for the others forever.
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 3;
  collComm_t comms[n];
  REQUIRE(collCommInitAll(comms, n, nullptr) == collSuccess);
  std::vector<void*> mem(n);
  std::vector<collWindow_t> win(n);
  for (int r = 0; r < n; ++r) REQUIRE(collMemAlloc(&mem[r], 1 << 16) == collSuccess);
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collCommWindowRegister(comms[r], mem[r], 1 << 16, &win[r], COLL_WIN_COLL_SYMMETRIC) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  for (int r = 0; r < n; ++r) REQUIRE(collCommWindowDeregister(comms[r], win[r]) == collSuccess);
  // Sizes that differ fail the group on every rank, naming the rank.
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collCommWindowRegister(comms[r], mem[r], r == 2 ? 4096 : 1 << 16, &win[r], COLL_WIN_COLL_SYMMETRIC) ==
            collSuccess);
  REQUIRE(collGroupEnd() == collInvalidUsage);
  REQUIRE(contains(collGetLastError(nullptr), "rank 2 registered 4096 bytes"));
  for (int r = 0; r < n; ++r) {
    REQUIRE(collMemFree(mem[r]) == collSuccess);
    REQUIRE(collCommDestroy(comms[r]) == collSuccess);
  }
}

TEST_CASE("a rank initialized inside a group and destroyed before its end is reported, not used", "[api][group]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv timeout("COLL_BOOTSTRAP_TIMEOUT_S", "2");
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  collComm_t c = nullptr;
  REQUIRE(collGroupStart() == collSuccess);
  REQUIRE(collCommInitRank(&c, 2, id, 0) == collSuccess);  // rank 1 never comes
  REQUIRE(collCommDestroy(c) == collSuccess);
  REQUIRE(collGroupEnd() == collInvalidUsage);
  REQUIRE(contains(collGetLastError(nullptr), "destroyed before collGroupEnd"));
}

TEST_CASE("collCommSetTimeout: an operation a rank never joins fails with collTimeout, naming it", "[api][timeout]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 3;
  for (size_t count : {size_t{1}, size_t{1} << 20}) {  // one-shot and ring
    auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
      if (collCommSetTimeout(comm, -1) != collInvalidArgument) return "a negative timeout was accepted";
      if (!contains(collGetLastError(comm), "seconds -1")) return std::string("error text: ") + collGetLastError(comm);
      if (collCommSetTimeout(comm, 0.5) != collSuccess) return std::string("set: ") + collGetLastError(comm);
      std::vector<float> buf(count, 1.0f);
      if (collAllReduce(buf.data(), buf.data(), count, collFloat, collSum, comm, nullptr) != collSuccess)
        return std::string("first allreduce: ") + collGetLastError(comm);
      if (rank == n - 1) return "";  // never calls the second one
      const auto t0 = std::chrono::steady_clock::now();
      const collResult_t r = collAllReduce(buf.data(), buf.data(), count, collFloat, collSum, comm, nullptr);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string why = collGetLastError(comm);
      if (r != collTimeout) return "second allreduce returned " + std::to_string(r) + ": " + why;
      if (s < 0.45 || s > 5) return "timed out after " + std::to_string(s) + " s";
      if (!contains(why, "timed out") || !contains(why, "collAllReduce #1") || !contains(why, "waiting for"))
        return "error text: " + why;
      collResult_t async = collSuccess;
      if (collCommGetAsyncError(comm, &async) != collSuccess || async != collTimeout)
        return "async error " + std::to_string(async);
      return "";
    });
    for (auto& e : errors) FAIL_CHECK(e);
    REQUIRE(errors.empty());
  }
}

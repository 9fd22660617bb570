// The C ABI's contract: argument checking with messages that name the argument and its
// value, bootstrap refusals, abort from another thread, collCommInitAll driven by one
// thread in a group, collCommSplit, and mismatched calls reported instead of hanging.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "bootstrap/wire.h"
#include "collectives/collectives.h"
#include "harness.h"

using testing::ScopedEnv;

namespace {

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// A C caller can pass any int in an enum parameter. Each entry point must read such a
// value as the int it is and refuse it by its value (under UBSan, scripts/sanitize.sh, a
// load of it as the enum ends the process).
void checkEnumArgsRefused(collComm_t c) {
  float buf[8] = {};
  for (int v : {-1, 99, 1 << 20}) {
    INFO("value " << v);
    const auto t = static_cast<collDataType_t>(v);  // as a C caller passes it
    const std::string type = "datatype " + std::to_string(v) + " is not a collDataType_t";
    auto refused = [&](collResult_t r, const std::string& what) {
      REQUIRE(r == collInvalidArgument);
      REQUIRE(contains(collGetLastError(c), what));
    };
    refused(collAllReduce(buf, buf, 1, t, collSum, c, nullptr), type);
    refused(collBroadcast(buf, buf, 1, t, 0, c, nullptr), type);
    refused(collReduce(buf, buf, 1, t, collSum, 0, c, nullptr), type);
    refused(collAllGather(buf, buf, 1, t, c, nullptr), type);
    refused(collReduceScatter(buf, buf, 1, t, collSum, c, nullptr), type);
    refused(collSend(buf, 1, t, 1, c, nullptr), type);
    refused(collRecv(buf, 1, t, 1, c, nullptr), type);
    refused(collAlltoAll(buf, buf, 1, t, c, nullptr), type);
    refused(collGather(buf, buf, 1, t, 0, c, nullptr), type);
    refused(collScatter(buf, buf, 1, t, 0, c, nullptr), type);
    refused(collAllReduceCompressed(buf, buf, 1, t, collBfloat16, collSum, c, nullptr), type);
    refused(collAllGatherCompressed(buf, buf, 1, collFloat, t, c, nullptr), "wiretype " + std::to_string(v));
    float scalar = 2;
    collRedOp_t made;
    refused(collRedOpCreatePreMulSum(&made, &scalar, t, collScalarHostImmediate, c), type);
    refused(collRedOpCreatePreMulSum(&made, &scalar, collFloat, static_cast<collScalarResidence_t>(v), c),
            "residence " + std::to_string(v));
    const auto op = static_cast<collRedOp_t>(v);
    const std::string named = "op " + std::to_string(v);
    refused(collAllReduce(buf, buf, 1, collFloat, op, c, nullptr), named);
    refused(collReduce(buf, buf, 1, collFloat, op, 0, c, nullptr), named);
    refused(collReduceScatter(buf, buf, 1, collFloat, op, c, nullptr), named);
    refused(collReduceCompressed(buf, buf, 1, collFloat, collBfloat16, op, 0, c, nullptr), named);
    refused(collRedOpDestroy(op, c), named);
    REQUIRE(std::string(collGetErrorString(static_cast<collResult_t>(v))) == "unknown result code");
  }
}

}  // namespace

TEST_CASE("enum values and version match the NCCL ABI", "[api]") {
  STATIC_REQUIRE(collSuccess == 0);
  STATIC_REQUIRE(collRemoteError == 6);
  STATIC_REQUIRE(collNumResults == 9);
  STATIC_REQUIRE(collBfloat16 == 9);
  STATIC_REQUIRE(collFloat8e5m2 == 11);
  STATIC_REQUIRE(collAvg == 4);
  STATIC_REQUIRE(sizeof(collUniqueId) == 128);
  STATIC_REQUIRE(COLL_VERSION(1, 2, 3) == 10203);
  int v = 0;
  REQUIRE(collGetVersion(&v) == collSuccess);
  REQUIRE(v == COLL_VERSION_CODE);
  REQUIRE(collGetVersion(nullptr) == collInvalidArgument);
  REQUIRE(std::string(collGetErrorString(collInvalidArgument)).size() > 0);
  REQUIRE(std::string(collGetErrorString(static_cast<collResult_t>(99))) == "unknown result code");
}

TEST_CASE("invalid arguments are refused with the argument and value named", "[api]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  collComm_t comms[2];
  REQUIRE(collCommInitAll(comms, 2, nullptr) == collSuccess);
  collComm_t c = comms[0];
  float buf[4] = {};

  REQUIRE(collAllReduce(buf, buf, 4, collFloat, collSum, nullptr, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "comm is NULL"));

  REQUIRE(collAllReduce(buf, buf, 4, static_cast<collDataType_t>(12), collSum, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "datatype 12"));

  REQUIRE(collAllReduce(buf, buf, 4, collFloat, static_cast<collRedOp_t>(-1), c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "op -1"));

  REQUIRE(collAllReduce(nullptr, buf, 4, collFloat, collSum, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "sendbuff is NULL with count 4"));

  REQUIRE(collBroadcast(buf, buf, 4, collFloat, 2, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "root 2 is out of range"));

  REQUIRE(collReduce(buf, buf, 4, collFloat, collSum, -1, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "root -1"));

  REQUIRE(collSend(buf, 4, collFloat, 5, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "peer 5"));

  REQUIRE(collAllReduce(buf, buf, SIZE_MAX / 2, collFloat, collSum, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "overflows size_t"));

  REQUIRE(collAllGather(buf, buf, SIZE_MAX / 2 + 1, collInt8, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "sendcount"));

  REQUIRE(collSend(buf, 1, collFloat, 0, c, nullptr) == collInvalidUsage);
  REQUIRE(contains(collGetLastError(c), "oneself"));

  checkEnumArgsRefused(c);

  // count 0 with NULL buffers is fine (nothing to do), on every rank.
  REQUIRE(collAllReduce(nullptr, nullptr, 0, collFloat, collSum, c, nullptr) == collSuccess);

  int n = 0, rank = -1, dev = 0;
  REQUIRE(collCommCount(c, &n) == collSuccess);
  REQUIRE(n == 2);
  REQUIRE(collCommUserRank(comms[1], &rank) == collSuccess);
  REQUIRE(rank == 1);
  REQUIRE(collCommCuDevice(c, &dev) == collSuccess);
  REQUIRE(dev == -1);
  REQUIRE(collCommCount(c, nullptr) == collInvalidArgument);
  collResult_t async = collInternalError;
  REQUIRE(collCommGetAsyncError(c, &async) == collSuccess);
  REQUIRE(async == collSuccess);
  REQUIRE(collCommFinalize(c) == collSuccess);

  REQUIRE(collCommDestroy(comms[0]) == collSuccess);
  REQUIRE(collCommDestroy(comms[1]) == collSuccess);
  // A destroyed communicator is refused, not dereferenced.
  REQUIRE(collAllReduce(buf, buf, 4, collFloat, collSum, c, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(c), "not a live communicator"));
  REQUIRE(collCommDestroy(c) == collInvalidArgument);

  REQUIRE(collCommInitAll(comms, 0, nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "ndev 0"));
  int dl[1] = {0};
  REQUIRE(collCommInitAll(comms, 1, dl) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(nullptr), "devlist[0]=0"));
}

TEST_CASE("group nesting is checked", "[api]") {
  REQUIRE(collGroupEnd() == collInvalidUsage);
  REQUIRE(contains(collGetLastError(nullptr), "without a matching collGroupStart"));
  REQUIRE(collGroupStart() == collSuccess);
  REQUIRE(collGroupStart() == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  REQUIRE(collGroupEnd() == collInvalidUsage);
}

TEST_CASE("bootstrap refuses bad ids and duplicate or missing ranks", "[api][bootstrap]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv to("COLL_BOOTSTRAP_TIMEOUT_S", "2");
  collComm_t comm = nullptr;

  SECTION("not an id") {
    collUniqueId junk;
    std::memset(&junk, 7, sizeof(junk));
    REQUIRE(collCommInitRank(&comm, 1, junk, 0) == collInvalidArgument);
    REQUIRE(contains(collGetLastError(nullptr), "bad magic"));
    REQUIRE(collCommInitRank(&comm, 0, junk, 0) == collInvalidArgument);
    REQUIRE(contains(collGetLastError(nullptr), "nranks 0"));
    REQUIRE(collCommInitRank(&comm, 2, junk, 2) == collInvalidArgument);
    REQUIRE(contains(collGetLastError(nullptr), "rank 2 is out of range"));
    REQUIRE(collCommInitRank(&comm, (1 << 20) + 1, junk, 0) == collInvalidArgument);
    REQUIRE(contains(collGetLastError(nullptr), "nranks 1048577 is above the limit"));
  }
  SECTION("an id with the right magic but a root no socket can have") {
    collUniqueId id;
    REQUIRE(collGetUniqueId(&id) == collSuccess);
    coll::UniqueIdData data;
    std::memcpy(&data, id.internal, sizeof(data));
    data.root.u.sa.sa_family = AF_UNIX;
    std::memcpy(id.internal, &data, sizeof(data));
    REQUIRE(collCommInitRank(&comm, 1, id, 0) == collInvalidArgument);
    REQUIRE(contains(collGetLastError(nullptr), "commId: the unique id's root has address family 1"));
    data.root.u.sa.sa_family = AF_INET;
    data.flags = 0x40;
    std::memcpy(id.internal, &data, sizeof(data));
    REQUIRE(collCommInitRank(&comm, 1, id, 0) == collInvalidArgument);
    REQUIRE(contains(collGetLastError(nullptr), "unknown flags 64"));
  }
  SECTION("wrong key") {
    collUniqueId id;
    REQUIRE(collGetUniqueId(&id) == collSuccess);
    id.internal[8] ^= 0x5a;  // the key follows magic and flags
    REQUIRE(collCommInitRank(&comm, 1, id, 0) == collRemoteError);
    REQUIRE(contains(collGetLastError(nullptr), "does not know this communicator's key"));
  }
  SECTION("duplicate rank, then the missing rank is named") {
    collUniqueId id;
    REQUIRE(collGetUniqueId(&id) == collSuccess);
    std::string e[2];
    collResult_t res[2];
    std::thread t[2];
    for (int i = 0; i < 2; ++i)
      t[i] = std::thread([&, i] {
        collComm_t c = nullptr;
        res[i] = collCommInitRank(&c, 2, id, 0);
        e[i] = collGetLastError(nullptr);
      });
    for (auto& th : t) th.join();
    REQUIRE(res[0] != collSuccess);
    REQUIRE(res[1] != collSuccess);
    std::string both = e[0] + "\n" + e[1];
    INFO(both);
    REQUIRE(contains(both, "rank 0 joined twice"));
    REQUIRE(contains(both, "rank(s) 1 of 2 never joined"));
  }
  SECTION("a missing rank, named within the communicator's timeout") {
    ScopedEnv longer("COLL_BOOTSTRAP_TIMEOUT_S", "30");
    collUniqueId id;
    REQUIRE(collGetUniqueId(&id) == collSuccess);
    collConfig_t config = COLL_CONFIG_INITIALIZER;
    config.timeoutMs = 1500;
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(collCommInitRankConfig(&comm, 2, id, 0, &config) != collSuccess);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string e = collGetLastError(nullptr);
    INFO(e << " after " << took << " s");
    REQUIRE(contains(e, "rank(s) 1 of 2 never joined within 1.5 s"));
    REQUIRE(took < 10);
  }
  SECTION("mismatched nranks") {
    collUniqueId id;
    REQUIRE(collGetUniqueId(&id) == collSuccess);
    std::string e[2];
    std::thread a([&] {
      collComm_t c = nullptr;
      collCommInitRank(&c, 2, id, 0);
      e[0] = collGetLastError(nullptr);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::thread b([&] {
      collComm_t c = nullptr;
      collCommInitRank(&c, 3, id, 1);
      e[1] = collGetLastError(nullptr);
    });
    a.join();
    b.join();
    INFO(e[0] << "\n" << e[1]);
    REQUIRE(contains(e[1], "says nranks=3 but ranks before it said nranks=2"));
    REQUIRE(contains(e[0], "never joined"));
  }
}

TEST_CASE("collCommAbort from another thread unblocks a waiting call within 1 s", "[api][failure]") {
  // The host executor, and the device executor emulated on host threads.
  const char* emulate = GENERATE("0", "1");
  ScopedEnv em("COLL_DEVICE_EMULATE", emulate);
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  for (const char* shmDisable : {"0", "1"}) {
    ScopedEnv shm("COLL_SHM_DISABLE", shmDisable);
    collComm_t comms[2];
    REQUIRE(collCommInitAll(comms, 2, nullptr) == collSuccess);
    std::vector<float> buf(1000, 1.0f);
    std::atomic<bool> returned{false};
    collResult_t res = collSuccess;
    std::chrono::steady_clock::time_point abortedAt, returnedAt;
    // Rank 0 calls allreduce alone: it can never complete.
    std::thread blocked([&] {
      res = collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comms[0], nullptr);
      returnedAt = std::chrono::steady_clock::now();
      returned = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE_FALSE(returned.load());
    abortedAt = std::chrono::steady_clock::now();
    REQUIRE(collCommAbort(comms[0]) == collSuccess);
    blocked.join();
    double took = std::chrono::duration<double>(returnedAt - abortedAt).count();
    INFO("COLL_SHM_DISABLE=" << shmDisable << " returned after " << took << " s");
    REQUIRE(res != collSuccess);
    REQUIRE(took < 1.0);
    // The peer learns that rank 0 left: its operations fail instead of hanging. Over a
    // one-shot mailbox rank 0's contribution was published before the abort, so the
    // first one may still complete with it; the one after cannot.
    collResult_t r1 = collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comms[1], nullptr);
    if (r1 == collSuccess)
      r1 = collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comms[1], nullptr);
    REQUIRE(r1 == collRemoteError);
    REQUIRE(contains(collGetLastError(comms[1]), "rank 0"));
    REQUIRE(collCommDestroy(comms[1]) == collSuccess);
  }
}

TEST_CASE("one thread drives all ranks of collCommInitAll inside a group", "[api][group]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  for (const char* shmDisable : {"0", "1"}) {
    ScopedEnv shm("COLL_SHM_DISABLE", shmDisable);
    const int n = 4;
    collComm_t comms[n];
    REQUIRE(collCommInitAll(comms, n, nullptr) == collSuccess);
    const size_t count = 100000;
    std::vector<std::vector<double>> in(n, std::vector<double>(count)), out = in;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i) in[r][i] = r + 1 + static_cast<double>(i % 5);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r)
      REQUIRE(collAllReduce(in[r].data(), out[r].data(), count, collDouble, collSum, comms[r], nullptr) == collSuccess);
    REQUIRE(collGroupEnd() == collSuccess);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; i += 997) REQUIRE(out[r][i] == 10 + 4.0 * (i % 5));
    // Send/recv in reverse order in one group: each rank sends to every other rank.
    std::vector<std::vector<int>> recv(n, std::vector<int>(n * 10, -1));
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = n - 1; r >= 0; --r)
      for (int p = 0; p < n; ++p) {
        REQUIRE(collRecv(recv[r].data() + p * 10, 10, collInt32, p, comms[r], nullptr) == collSuccess);
      }
    std::vector<std::vector<int>> sendBufs(n * n, std::vector<int>(10));
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) {
        sendBufs[r * n + p].assign(10, r * 100 + p);
        REQUIRE(collSend(sendBufs[r * n + p].data(), 10, collInt32, p, comms[r], nullptr) == collSuccess);
      }
    REQUIRE(collGroupEnd() == collSuccess);
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) REQUIRE(recv[r][p * 10 + 3] == p * 100 + r);
    for (int r = 0; r < n; ++r) REQUIRE(collCommDestroy(comms[r]) == collSuccess);
  }
}

// A device reduction loads whole elements: on a GPU a buffer off its element's alignment
// faults the kernel, so it is refused by name before anything runs (emulated here: host
// buffers take the device path). Copies take any alignment (the widest unit the pointers
// share), checked by value.
TEST_CASE("device reductions refuse buffers off their element's alignment and copies take them", "[api][device]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  const int n = 2;
  collComm_t comms[n];
  REQUIRE(collCommInitAll(comms, n, nullptr) == collSuccess);
  alignas(16) char raw[n][4096] = {};
  auto at = [&](int r, size_t off) { return static_cast<void*>(raw[r] + off); };
  REQUIRE(collAllReduce(at(0, 2), at(0, 2), 8, collFloat, collSum, comms[0], nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(comms[0]), "sendbuff"));
  REQUIRE(contains(collGetLastError(comms[0]), "not aligned to its 4-byte float32 elements"));
  REQUIRE(collReduceScatter(at(0, 0), at(0, 1), 4, collFloat16, collSum, comms[0], nullptr) == collInvalidArgument);
  REQUIRE(contains(collGetLastError(comms[0]), "recvbuff"));
  // Bytes and an aligned fp16 buffer pass; so does a gather of floats 1 byte off.
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collAllReduce(at(r, 2), at(r, 2), 8, collFloat16, collSum, comms[r], nullptr) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  std::vector<float> mine(7);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(r * 10 + i);
    std::memcpy(at(r, 1001), mine.data(), sizeof(float) * mine.size());
  }
  REQUIRE(collGroupStart() == collSuccess);
  for (int r = 0; r < n; ++r)
    REQUIRE(collAllGather(at(r, 1001), at(r, 2049), mine.size(), collFloat, comms[r], nullptr) == collSuccess);
  REQUIRE(collGroupEnd() == collSuccess);
  for (int r = 0; r < n; ++r) {
    std::vector<float> got(mine.size() * n);
    std::memcpy(got.data(), at(r, 2049), sizeof(float) * got.size());
    for (size_t i = 0; i < got.size(); ++i)
      REQUIRE(got[i] == static_cast<float>(i / mine.size() * 10 + i % mine.size()));
  }
  for (int r = 0; r < n; ++r) REQUIRE(collCommDestroy(comms[r]) == collSuccess);
}

TEST_CASE("collCommSplit orders by key and honours COLL_SPLIT_NOCOLOR", "[api][split]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 5;
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    int color = rank == 4 ? COLL_SPLIT_NOCOLOR : rank % 2;
    collComm_t sub = nullptr;
    if (collCommSplit(comm, color, -rank, &sub, nullptr) != collSuccess)
      return std::string("split: ") + collGetLastError(comm);
    if (rank == 4) return sub == nullptr ? "" : "NOCOLOR gave a communicator";
    int subRank = -1, subN = 0;
    collCommUserRank(sub, &subRank);
    collCommCount(sub, &subN);
    int wantN = 2;                    // evens {0,2}, odds {1,3}
    int wantRank = rank < 2 ? 1 : 0;  // key -rank: higher old rank first
    if (subN != wantN || subRank != wantRank)
      return "split gave rank " + std::to_string(subRank) + "/" + std::to_string(subN);
    int v = rank, sum = 0;
    if (collAllReduce(&v, &sum, 1, collInt32, collSum, sub, nullptr) != collSuccess)
      return std::string("allreduce on split comm: ") + collGetLastError(sub);
    int want = rank % 2 ? 1 + 3 : 0 + 2;
    collCommDestroy(sub);
    return sum == want ? "" : "sum " + std::to_string(sum);
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

TEST_CASE("ranks calling different counts get an error, not a hang", "[api][failure]") {
  // The host executor, and the device executor emulated on host threads: on the ring, on
  // the direct route (thread ranks read each other's buffers, direct.cc), and with the
  // direct route from 50000 bytes (so the last pair's ranks take different routes).
  const auto [emulate, direct] = GENERATE(std::pair<const char*, const char*>{"0", "-1"}, std::pair{"1", "-1"},
                                          std::pair{"1", "1"}, std::pair{"1", "50000"});
  ScopedEnv em("COLL_DEVICE_EMULATE", emulate);
  ScopedEnv dm("COLL_DEVICE_DIRECT_MIN_BYTES", direct);
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv ex("COLL_DEVICE_EXCHANGE_BYTES", "262144");  // off by default
  // Both one-shot, both ring, and one of each (the ranks then pick different algorithms),
  // over shared memory and over the network. (Ring counts that differ in their number
  // of channels are not detected yet: a channel only one rank uses waits forever.)
  // And on the device path's 2-rank exchange (up to 256 KiB) against the ring above it,
  // at twice the count: the ring's block then equals the exchange's whole buffer.
  const std::pair<size_t, size_t> counts[] = {{100, 200}, {9000, 12000}, {100, 40000}, {40000, 80000}};
  for (const char* shmDisable : {"0", "1"}) {
    ScopedEnv shm("COLL_SHM_DISABLE", shmDisable);
    for (auto [c0, c1] : counts) {
      auto errors = testing::runRanks(2, [&](int rank, collComm_t comm) -> std::string {
        std::vector<float> buf(80000, 1.0f);
        size_t count = rank == 0 ? c0 : c1;
        collResult_t r = collAllReduce(buf.data(), buf.data(), count, collFloat, collSum, comm, nullptr);
        if (r == collSuccess) return "mismatched allreduce succeeded";
        if (!contains(collGetLastError(comm), "different operations or counts"))
          return std::string("unexpected error: ") + collGetLastError(comm);
        return "";
      });
      INFO("COLL_DEVICE_EMULATE=" << emulate << ", COLL_DEVICE_DIRECT_MIN_BYTES=" << direct
                                  << ", COLL_SHM_DISABLE=" << shmDisable << ", counts " << c0 << " and " << c1);
      for (auto& e : errors) FAIL_CHECK(e);
      REQUIRE(errors.empty());
    }
  }
}

TEST_CASE("one thread drives small and large collectives of all ranks in one group", "[api][group]") {
  // The host executor, and the device executor emulated on host threads, on the ring and
  // with the larger allreduces on the direct route (one kernel's lanes read each other).
  const auto [emulate, direct] = GENERATE(std::pair<const char*, const char*>{"0", "-1"}, std::pair{"1", "-1"},
                                          std::pair{"1", "100000"});
  ScopedEnv em("COLL_DEVICE_EMULATE", emulate);
  ScopedEnv dm("COLL_DEVICE_DIRECT_MIN_BYTES", direct);
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  for (const char* shmDisable : {"0", "1"}) {
    ScopedEnv shm("COLL_SHM_DISABLE", shmDisable);
    const int n = 3;
    collComm_t comms[n];
    REQUIRE(collCommInitAll(comms, n, nullptr) == collSuccess);
    // Large (ring) and small (one-shot) operations interleaved; every rank's group in
    // the same order, all driven by this one thread.
    const size_t counts[] = {100000, 5, 70000, 1000, 3};
    const size_t k = std::size(counts);
    std::vector<std::vector<std::vector<int>>> in(n), out(n);
    REQUIRE(collGroupStart() == collSuccess);
    for (int r = 0; r < n; ++r) {
      in[r].resize(k);
      out[r].resize(k);
      for (size_t j = 0; j < k; ++j) {
        in[r][j].assign(counts[j], r + 1);
        out[r][j].assign(counts[j], -1);
        if (j % 2 == 0)
          REQUIRE(collAllReduce(in[r][j].data(), out[r][j].data(), counts[j], collInt32, collSum, comms[r], nullptr) ==
                  collSuccess);
        else
          REQUIRE(collBroadcast(in[r][j].data(), out[r][j].data(), counts[j], collInt32, 1, comms[r], nullptr) ==
                  collSuccess);
      }
    }
    collResult_t res = collGroupEnd();
    INFO(collGetLastError(nullptr) << " / " << collGetLastError(comms[0]));
    REQUIRE(res == collSuccess);
    for (int r = 0; r < n; ++r)
      for (size_t j = 0; j < k; ++j) {
        int want = j % 2 == 0 ? 1 + 2 + 3 : 2;
        INFO("shm disabled " << shmDisable << ", rank " << r << ", op " << j);
        REQUIRE(out[r][j].front() == want);
        REQUIRE(out[r][j].back() == want);
      }
    for (int r = 0; r < n; ++r) REQUIRE(collCommDestroy(comms[r]) == collSuccess);
  }
}

TEST_CASE("COLL_ALGO and COLL_PROTO filter algorithms and name what they exclude", "[api][tuner]") {
  SECTION("an unknown name fails init naming it") {
    ScopedEnv algo("COLL_ALGO", "Ring,Bogus");
    collComm_t comms[2] = {nullptr, nullptr};
    CHECK(collCommInitAll(comms, 2, nullptr) == collInvalidArgument);
    CHECK(contains(collGetLastError(nullptr), "COLL_ALGO=\"Ring,Bogus\": unknown name \"Bogus\""));
  }
  SECTION("names NCCL has and this library lacks are ignored; a filter leaving nothing is an error") {
    ScopedEnv algo("COLL_ALGO", "allreduce:tree,nvls;broadcast:^ring");
    auto errors = testing::runRanks(3, [&](int rank, collComm_t comm) -> std::string {
      std::vector<int> v(5000, rank + 1), sum(5000);
      if (collAllReduce(v.data(), sum.data(), v.size(), collInt32, collSum, comm, nullptr) != collSuccess)
        return std::string("tree allreduce: ") + collGetLastError(comm);
      if (sum[4999] != 6) return "tree allreduce sum " + std::to_string(sum[4999]);
      collResult_t r = collBroadcast(v.data(), v.data(), v.size(), collInt32, 0, comm, nullptr);
      if (r != collInvalidUsage) return "broadcast with every algorithm excluded did not fail";
      if (!contains(collGetLastError(comm), "leave no algorithm for collBroadcast"))
        return std::string("unexpected error: ") + collGetLastError(comm);
      return "";
    });
    for (auto& e : errors) FAIL_CHECK(e);
    REQUIRE(errors.empty());
  }
}

TEST_CASE("COLL_TOPO_DUMP_FILE is written at init and COLL_TOPO_FILE is checked", "[api][topology]") {
  char path[] = "/tmp/coll-topo-dump-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  std::remove(path);
  {
    ScopedEnv dump("COLL_TOPO_DUMP_FILE", path);
    collComm_t comms[2] = {nullptr, nullptr};
    REQUIRE(collCommInitAll(comms, 2, nullptr) == collSuccess);
    for (auto* c : comms) collCommDestroy(c);
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(contains(text, "<system version=\"1\">"));
  CHECK(contains(text, "<cpu numaid="));
  {
    ScopedEnv file("COLL_TOPO_FILE", path);  // the dump loads back
    collComm_t comms[2] = {nullptr, nullptr};
    REQUIRE(collCommInitAll(comms, 2, nullptr) == collSuccess);
    for (auto* c : comms) collCommDestroy(c);
  }
  std::ofstream(path) << "<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n";
  {
    ScopedEnv file("COLL_TOPO_FILE", path);
    collComm_t comms[2] = {nullptr, nullptr};
    CHECK(collCommInitAll(comms, 2, nullptr) == collInvalidArgument);
    CHECK(contains(collGetLastError(nullptr), path));
    CHECK(contains(collGetLastError(nullptr), "line 3: </system> closes <cpu>"));
  }
  std::remove(path);
}

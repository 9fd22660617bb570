// The job-wide hang report (bootstrap/hang_report.h): the root's analysis over made-up
// views of the ranks, the wire checks of a rank's state, and threads-as-ranks jobs that
// stall: a rank that stops calling, a rank that calls another collective, and a report
// asked on demand (collstat's query) while a job waits.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "bootstrap/hang_report.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"
#include "collectives/collectives.h"

using namespace coll;

namespace {

RankView answered(uint64_t seq, OpPhase phase, const char* what, int32_t kind = 0, int peer = -1) {
  RankView v;
  v.kind = RankView::Kind::kAnswered;
  v.known = true;
  v.state.seq = seq;
  v.state.phase = phase;
  v.state.kind = kind;
  v.state.count = 1024;
  v.state.waitPeer = peer;
  v.state.seconds = 2.5;
  std::snprintf(v.state.what, sizeof(v.state.what), "%s", what);
  return v;
}

std::vector<RankView> named(std::vector<RankView> views) {
  for (size_t r = 0; r < views.size(); ++r) views[r].who = "rank " + std::to_string(r) + " (pid 1 on h)";
  return views;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("hang report: rankList collapses runs", "[unit][report]") {
  CHECK(rankList({}).empty());
  CHECK(rankList({3}) == "3");
  CHECK(rankList({0, 1}) == "0,1");
  CHECK(rankList({0, 1, 2, 5, 7, 8, 9}) == "0-2,5,7-9");
}

TEST_CASE("hang report: the cause names what went wrong, most telling first", "[unit][report]") {
  const char* ar = "collAllReduce #4 (count 1024, float32, sum)";
  SECTION("a rank that called another collective") {
    auto v = named({answered(4, OpPhase::kRunning, ar, 0, 2), answered(4, OpPhase::kRunning, ar, 0, 2),
                    answered(4, OpPhase::kFailed, "collBroadcast #4 (count 1024, float32, root 0)", 1)});
    HangReport rep = analyzeHang(v, "header");
    CHECK(rep.cause == std::string("rank 2 called collBroadcast #4 (count 1024, float32, root 0) where ranks 0,1 "
                                   "called ") +
                           ar + ": the ranks called different operations or counts");
    CHECK(contains(rep.text, "header\n  rank 0 (pid 1 on h): in collAllReduce #4"));
    CHECK(contains(rep.text, "rank 2 (pid 1 on h): failed in collBroadcast #4"));
  }
  SECTION("a rank that stopped calling") {
    auto v = named({answered(4, OpPhase::kTimedOut, ar), answered(4, OpPhase::kRunning, ar),
                    answered(4, OpPhase::kIdle, "collAllReduce #3 (count 1024, float32, sum)"),
                    answered(4, OpPhase::kRunning, ar)});
    HangReport rep = analyzeHang(v, "h");
    CHECK(rep.cause == std::string("rank 2 never called ") + ar + ": it is idle; ranks 0,1,3 wait in it");
    CHECK(contains(rep.text, "rank 2 (pid 1 on h): idle for 2.5 s since collAllReduce #3"));
    CHECK(contains(rep.text, "rank 0 (pid 1 on h): timed out in " + std::string(ar)));
  }
  SECTION("a rank that is gone outranks an idle one; its last state is shown") {
    auto v = named({answered(4, OpPhase::kRunning, ar), answered(4, OpPhase::kRunning, ar),
                    answered(5, OpPhase::kIdle, ar)});
    v[1].kind = RankView::Kind::kGone;
    v[1].gone = "exited or was killed";
    HangReport rep = analyzeHang(v, "h");
    CHECK(rep.cause == std::string("rank 1 (pid 1 on h) exited or was killed while ranks 0,1 were in ") + ar);
    CHECK(contains(rep.text, "rank 1 (pid 1 on h): exited or was killed; last seen in " + std::string(ar)));
  }
  SECTION("one rank in the operation when another died is one rank, not ranks") {
    auto v = named({answered(4, OpPhase::kIdle, "collAllReduce #3 (count 1024, float32, sum)"),
                    answered(4, OpPhase::kFailed, ar), answered(4, OpPhase::kIdle, "x")});
    v[2].kind = RankView::Kind::kGone;
    v[2].gone = "exited or was killed";
    CHECK(analyzeHang(v, "h").cause ==
          std::string("rank 2 (pid 1 on h) exited or was killed while rank 1 was in ") + ar);
  }
  SECTION("a gone rank's last state still shows a mismatch") {
    auto v = named({answered(4, OpPhase::kRunning, ar), answered(4, OpPhase::kRunning, ar),
                    answered(4, OpPhase::kFailed, "collReduce #4 (count 1024, float32, sum, root 1)", 2)});
    v[2].kind = RankView::Kind::kLeft;
    v[2].gone = "left by an abort: x";
    CHECK(analyzeHang(v, "h").cause ==
          std::string("rank 2 called collReduce #4 (count 1024, float32, sum, root 1) where ranks 0,1 called ") + ar +
              ": the ranks called different operations or counts");
  }
  SECTION("sends and receives to different peers are no mismatch") {
    auto v = named({answered(4, OpPhase::kRunning, "collSend #4 (count 1, int32, peer 1)", 5),
                    answered(4, OpPhase::kRunning, "collSend #4 (count 8, int32, peer 2)", 5),
                    answered(4, OpPhase::kRunning, "collRecv #4 (count 1, int32, peer 1)", 6)});
    for (auto& r : v) r.state.p2p = 1;
    CHECK(contains(analyzeHang(v, "h").cause, "every rank that answered is in"));
    v[2].state.p2p = 0;  // an allreduce where the others send
    CHECK(contains(analyzeHang(v, "h").cause, "rank 2 called"));
  }
  SECTION("ranks that do not answer, and ranks all waiting") {
    auto v = named({answered(4, OpPhase::kRunning, ar), answered(4, OpPhase::kRunning, ar), RankView{}});
    CHECK(analyzeHang(v, "h").cause == "rank 2 did not answer the root (stopped, frozen or not progressing)");
    v.pop_back();
    CHECK(contains(analyzeHang(v, "h").cause, "every rank that answered is in " + std::string(ar)));
    auto idle = named({answered(5, OpPhase::kIdle, ar), answered(5, OpPhase::kIdle, ar)});
    CHECK(analyzeHang(idle, "h").cause == "no operation is in progress");
  }
}

TEST_CASE("hang report: a rank's state is checked before use", "[unit][report]") {
  OpStateMsg m{};
  m.waitPeer = -1;
  OpStateMsg out{};
  REQUIRE(parseOpState(&m, sizeof(m), 4, &out).ok());
  CHECK(!parseOpState(&m, sizeof(m) - 1, 4, &out).ok());
  OpStateMsg bad = m;
  bad.phase = static_cast<OpPhase>(9);
  CHECK(contains(parseOpState(&bad, sizeof(bad), 4, &out).message(), "phase 9"));
  bad = m;
  bad.waitPeer = 4;
  CHECK(contains(parseOpState(&bad, sizeof(bad), 4, &out).message(), "waits for rank 4"));
  bad = m;
  std::memset(bad.where, 'x', sizeof(bad.where));
  CHECK(contains(parseOpState(&bad, sizeof(bad), 4, &out).message(), "not NUL-terminated"));
  bad = m;
  bad.seconds = -1;
  CHECK(!parseOpState(&bad, sizeof(bad), 4, &out).ok());
}

TEST_CASE("hang report: a finding that came during the failing launch is kept for its error", "[unit][report]") {
  // The root may be gone when a rank fails (it lived in a rank that failed first and
  // exited); the report it sent while this launch ran still explains the failure.
  OpStateBox box;
  OpSignature call;
  call.seq = 7;
  box.setFinding("job-wide report: before any launch");
  CHECK(box.findingOfLaunch().empty());
  box.started(call, 1);
  CHECK(box.findingOfLaunch().empty());
  box.setFinding("job-wide report: rank 2 exited");
  REQUIRE(box.failed(false, "waiting for room at rank 2"));
  CHECK(box.findingOfLaunch() == "job-wide report: rank 2 exited");
  CHECK(box.awaitFinding(box.findings(), 0.01).empty());
  box.finished(8);
  CHECK(box.findingOfLaunch().empty());
  call.seq = 8;
  box.started(call, 1);
  CHECK(box.findingOfLaunch().empty());  // the next launch starts without one
}

namespace {

struct Outcome {
  collResult_t result = collSuccess;
  std::string error;
  double seconds = 0;  // how long the failing call took
};

// Ranks as threads of one communicator made from `id`; each runs body(rank, comm) and
// reports its first failed call.
std::vector<Outcome> runJob(const collUniqueId& id, int n, collConfig_t* config,
                            const std::function<collResult_t(int, collComm_t, Outcome*)>& body) {
  std::vector<Outcome> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      collComm_t comm = nullptr;
      out[r].result = collCommInitRankConfig(&comm, n, id, r, config);
      if (out[r].result != collSuccess) {
        out[r].error = collGetLastError(nullptr);
        return;
      }
      out[r].result = body(r, comm, &out[r]);
      if (out[r].result != collSuccess) out[r].error = collGetLastError(comm);
      collCommAbort(comm);
    });
  for (auto& t : threads) t.join();
  return out;
}

// Allreduces #0..#k-1 on every rank, then the call `last` makes (timed).
collResult_t allReduces(collComm_t comm, int k, std::vector<float>& buf, Outcome* o,
                        const std::function<collResult_t()>& last) {
  for (int i = 0; i < k; ++i) {
    collResult_t r = collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr);
    if (r != collSuccess) return r;
  }
  auto t0 = std::chrono::steady_clock::now();
  collResult_t r = last();
  o->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string describeAll(const std::vector<Outcome>& out) {
  std::string s;
  for (size_t r = 0; r < out.size(); ++r)
    s += "rank " + std::to_string(r) + ": " + collGetErrorString(out[r].result) + " after " +
         std::to_string(out[r].seconds) + " s: " + out[r].error + "\n";
  return s;
}

}  // namespace

TEST_CASE("hang report: a rank that stops calling fails every rank with collTimeout naming it", "[threads][report]") {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  collConfig_t config = COLL_CONFIG_INITIALIZER;
  config.timeoutMs = 1500;
  auto out = runJob(id, 3, &config, [](int rank, collComm_t comm, Outcome* o) {
    std::vector<float> buf(1024, 1.0f);
    return allReduces(comm, 2, buf, o, [&] {
      if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(5000));
      return collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr);
    });
  });
  INFO(describeAll(out));
  for (int r = 0; r < 3; ++r) {
    CHECK(out[r].result == collTimeout);
    CHECK(contains(out[r].error, "job-wide report: rank 2 never called collAllReduce #2 (count 1024, float32, sum): "
                                 "it is idle; ranks 0,1 wait in it"));
  }
  for (int r = 0; r < 2; ++r) CHECK(out[r].seconds < 1.5 + 3.0);
}

TEST_CASE("hang report: a rank that calls broadcast where the others call allreduce is named on every rank",
          "[threads][report]") {
  for (size_t count : {size_t{1024}, size_t{1} << 20}) {
    collUniqueId id;
    REQUIRE(collGetUniqueId(&id) == collSuccess);
    collConfig_t config = COLL_CONFIG_INITIALIZER;
    config.timeoutMs = 3000;
    auto out = runJob(id, 3, &config, [count](int rank, collComm_t comm, Outcome* o) {
      std::vector<float> buf(count, 1.0f);
      return allReduces(comm, 1, buf, o, [&] {
        if (rank == 2) return collBroadcast(buf.data(), buf.data(), buf.size(), collFloat, 0, comm, nullptr);
        return collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr);
      });
    });
    INFO("count " << count << "\n" << describeAll(out));
    const std::string c = std::to_string(count);
    // Every rank fails within milliseconds: one whose own check named the mismatch may
    // return before a report is gathered (its error then says "where this rank called"),
    // and a report gathered before rank 1 entered its allreduce names rank 0 alone. Either
    // way each error names both calls.
    for (int r = 0; r < 3; ++r) {
      CHECK(out[r].result != collSuccess);
      CHECK(contains(out[r].error, "collBroadcast"));
      CHECK(contains(out[r].error, "(count " + c + ", float32, root 0)"));
      CHECK(contains(out[r].error, "collAllReduce"));
      CHECK(contains(out[r].error, "the ranks called different operations or counts"));
    }
  }
}

TEST_CASE("hang report: asked on demand (collstat) while a rank is late, without disturbing the job",
          "[threads][report]") {
  collUniqueId id;
  REQUIRE(collGetUniqueId(&id) == collSuccess);
  UniqueIdData data{};
  REQUIRE(parseUniqueId(&id, sizeof(id), &data).ok());
  std::string report, refused;
  std::thread asker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    AuthKey wrong = data.key;
    wrong.bytes[0] ^= 1;
    auto bad = queryHangReport(data.root, wrong, 5);
    refused = bad.ok() ? "answered: " + bad.value() : bad.status().message();
    auto r = queryHangReport(data.root, data.key, 10);
    report = r.ok() ? r.value() : "error: " + r.status().message();
  });
  auto out = runJob(id, 3, nullptr, [](int rank, collComm_t comm, Outcome* o) {
    std::vector<float> buf(256, 1.0f);
    return allReduces(comm, 1, buf, o, [&] {
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3000));
      return collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr);
    });
  });
  asker.join();
  INFO(describeAll(out) << report);
  for (int r = 0; r < 3; ++r) CHECK(out[r].result == collSuccess);
  CHECK(contains(report, "asked by collstat"));
  CHECK(contains(report, "rank 0 (pid "));
  CHECK(contains(report, "rank 1 (pid "));
  CHECK(contains(report, "cause: rank 1 never called collAllReduce #1 (count 256, float32, sum): it is idle; ranks "
                         "0,2 wait in it"));
  INFO(refused);
  CHECK(!contains(refused, "answered"));
}

TEST_CASE("hang report: a rank that times out while its peers read its buffers directly lets them finish first",
          "[threads][report][failure]") {
  // Large operations between threads of one process read the peers' buffers in place
  // (algorithms/oneshot.h, "direct"). Rank 0 arrives last and times out as soon as it
  // waits for the others, who may still read its input: its call must not return (and
  // its caller free that input) while they do. Before the fix, a peer read freed memory.
  // A broadcast from rank 0 times out every time: rank 0 reads nothing, then waits while
  // the others copy 96 MiB from its buffer. An allreduce crosses the other phases, where
  // whether rank 0 waits long enough depends on who reads fastest.
  constexpr int kRanks = 3;
  constexpr size_t kCount = size_t{24} << 20;  // 96 MiB of floats: unmapped when freed
  int broadcastsTimedOut = 0;
  for (int attempt = 0; attempt < 6; ++attempt) {
    const bool broadcast = attempt % 2 == 0;
    collUniqueId id;
    REQUIRE(collGetUniqueId(&id) == collSuccess);
    std::vector<Outcome> out(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        collComm_t comm = nullptr;
        out[r].result = collCommInitRank(&comm, kRanks, id, r);
        if (out[r].result != collSuccess) return;
        float warm = 1.0f;
        out[r].result = collAllReduce(&warm, &warm, 1, collFloat, collSum, comm, nullptr);
        const float mine = broadcast ? (r == 0 ? 7.0f : 0.0f) : 1.0f, want = broadcast ? 7.0f : 3.0f;
        auto buf = std::make_unique<std::vector<float>>(kCount, mine);
        if (out[r].result == collSuccess && r == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          out[r].result = collCommSetTimeout(comm, 0.001);
        }
        if (out[r].result == collSuccess)
          out[r].result = broadcast
                              ? collBroadcast(buf->data(), buf->data(), kCount, collFloat, 0, comm, nullptr)
                              : collAllReduce(buf->data(), buf->data(), kCount, collFloat, collSum, comm, nullptr);
        if (out[r].result != collSuccess) out[r].error = collGetLastError(comm);
        // A rank may complete: rank 0 may give up once its result was whole, or not stall.
        if (out[r].result == collSuccess)
          for (size_t i = 0; i < kCount; i += 4093)
            if ((*buf)[i] != want) out[r].error = "element " + std::to_string(i) + " is " + std::to_string((*buf)[i]);
        buf.reset();  // what a caller may do once the call returned
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        collCommAbort(comm);
      });
    for (auto& t : threads) t.join();
    INFO("attempt " << attempt << (broadcast ? " (broadcast)" : " (allreduce)") << "\n" << describeAll(out));
    if (broadcast) broadcastsTimedOut += out[0].result == collTimeout;
    for (int r = 0; r < kRanks; ++r)
      if (out[r].result == collSuccess) CHECK(out[r].error.empty());
  }
  CHECK(broadcastsTimedOut >= 1);
}

// Threads-as-ranks: every collective x dtype x op x count x in/out-of-place, for 1..8
// ranks, over shared memory only and over the network only, on fresh non-zero data,
// checked element by element (bitwise) against a reference that combines contributions
// in the chain order the algorithms use (ring and one-shot alike). COLL_BUFFSIZE is shrunk so that small counts
// walk the multi-slice, multi-loop and multi-channel paths.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <memory>
#include <sstream>
#include <vector>

#include <catch2/catch.hpp>

#include "comm/comm.h"
#include "base/datatype.h"
#include "algorithms/algorithms.h"
#include "device/device_lane.h"
#include "device/device_exec.h"
#include "device/proxy.h"
#include "harness.h"
#include "transport/p2p/p2p.h"

using testing::ScopedEnv;

namespace {

enum class Coll { kAllReduce, kReduceScatter, kReduce, kBroadcast, kAllGather, kSendRecv, kAllToAll };
const char* collName(Coll c) {
  static const char* k[] = {"allreduce", "reducescatter", "reduce", "broadcast", "allgather", "sendrecv", "alltoall"};
  return k[static_cast<int>(c)];
}

size_t partBegin(size_t total, size_t n, size_t i) { return i * (total / n) + std::min(i, total % n); }

// A sum allreduce's OpDesc, as the API would hand it down.
coll::OpDesc sumAllReduce(const void* send, void* recv, size_t count, collDataType_t t) {
  coll::OpDesc od;
  od.kind = coll::CollKind::kAllReduce;
  od.sendbuff = send;
  od.recvbuff = recv;
  od.count = count;
  od.dtype = t;
  od.op = collSum;
  return od;
}

// Chain of ranks that reduces block k (allreduce / reduce-scatter): k+1, k+2, ..., k.
std::vector<int> chainEndingAt(int last, int n) {
  std::vector<int> o(n);
  for (int j = 0; j < n; ++j) o[j] = (last + 1 + j) % n;
  return o;
}

struct Case {
  Coll coll;
  collDataType_t dt;
  collRedOp_t op;
  size_t count;
  bool inPlace;
  int root;
  uint64_t seed;
  bool tree = false;  // allreduce on the tree (COLL_ALGO=allreduce:tree): chain order n-1..0
  std::string str() const {
    std::ostringstream s;
    s << collName(coll) << " " << coll::dataTypeName(dt) << " " << coll::redOpName(op) << " count " << count
      << (inPlace ? " in-place" : " out-of-place") << " root " << root;
    return s.str();
  }
};

#define RCHECK(call)                                                                               \
  do {                                                                                             \
    collResult_t r_ = (call);                                                                      \
    if (r_ != collSuccess)                                                                         \
      return c.str() + ": " #call " -> " + collGetErrorString(r_) + ": " + collGetLastError(comm); \
  } while (0)

std::string mismatch(const Case& c, const char* what, size_t i, const void* got, const void* want) {
  return c.str() + ": " + what + " element " + std::to_string(i) + " is " + testing::elementString(got, 0, c.dt) +
         ", expected " + testing::elementString(want, 0, c.dt);
}

// memcmp and memcpy take no null pointer even for 0 bytes (UBSan's nonnull check), and an
// empty vector's data() is null: count-0 cases compare and copy through these.
bool sameBytes(const void* a, const void* b, size_t n) { return n == 0 || std::memcmp(a, b, n) == 0; }
void copyBytes(void* dst, const void* src, size_t n) {
  if (n > 0) std::memcpy(dst, src, n);
}

// Runs one case on this rank and checks its result; "" when correct.
std::string runCase(const Case& c, int rank, int n, collComm_t comm) {
  const size_t es = coll::dataTypeSize(c.dt);
  const size_t cnt = c.count;
  std::vector<unsigned char> want(es);
  auto at = [&](std::vector<unsigned char>& v, size_t i) { return v.data() + i * es; };
  const unsigned char kSentinel = 0xA5;

  switch (c.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: {
      std::vector<unsigned char> in(cnt * es), out(cnt * es, kSentinel);
      testing::fillInput(in.data(), cnt, c.dt, c.op, rank, c.seed);
      std::vector<unsigned char> keep = in;
      void* send = in.data();
      void* recv = c.inPlace ? in.data() : out.data();
      if (c.coll == Coll::kAllReduce) RCHECK(collAllReduce(send, recv, cnt, c.dt, c.op, comm, nullptr));
      else RCHECK(collReduce(send, recv, cnt, c.dt, c.op, c.root, comm, nullptr));
      const unsigned char* res = static_cast<unsigned char*>(recv);
      bool hasResult = c.coll == Coll::kAllReduce || rank == c.root;
      for (size_t i = 0; i < cnt; ++i) {
        if (hasResult) {
          int last = c.root;
          if (c.coll == Coll::kAllReduce) {
            last = 0;
            while (partBegin(cnt, n, last + 1) <= i) ++last;
          }
          std::vector<int> order = chainEndingAt(last, n);
          if (c.tree) {  // one host: the tree is the chain 0 <- 1 <- ... <- n-1
            for (int j = 0; j < n; ++j) order[static_cast<size_t>(j)] = n - 1 - j;
          }
          testing::referenceReduce(want.data(), c.dt, c.op, order, i, c.seed, n);
          if (std::memcmp(res + i * es, want.data(), es) != 0)
            return mismatch(c, "result", i, res + i * es, want.data());
        } else if (!c.inPlace && out[i * es] != kSentinel) {
          return c.str() + ": non-root recvbuff was written at element " + std::to_string(i);
        }
        if (!c.inPlace && std::memcmp(at(in, i), at(keep, i), es) != 0)
          return c.str() + ": sendbuff was modified at element " + std::to_string(i);
      }
      return "";
    }
    case Coll::kReduceScatter: {
      std::vector<unsigned char> in(cnt * n * es), out(cnt * es, kSentinel);
      testing::fillInput(in.data(), cnt * n, c.dt, c.op, rank, c.seed);
      std::vector<unsigned char> keep = in;
      void* recv = c.inPlace ? in.data() + rank * cnt * es : out.data();
      RCHECK(collReduceScatter(in.data(), recv, cnt, c.dt, c.op, comm, nullptr));
      const unsigned char* res = static_cast<unsigned char*>(recv);
      for (size_t i = 0; i < cnt; ++i) {
        testing::referenceReduce(want.data(), c.dt, c.op, chainEndingAt(rank, n), rank * cnt + i, c.seed, n);
        if (std::memcmp(res + i * es, want.data(), es) != 0) return mismatch(c, "result", i, res + i * es, want.data());
      }
      if (!c.inPlace && in != keep) return c.str() + ": sendbuff was modified";
      return "";
    }
    case Coll::kBroadcast: {
      std::vector<unsigned char> in(cnt * es), out(cnt * es, kSentinel), expect(cnt * es);
      testing::fillInput(expect.data(), cnt, c.dt, c.op, c.root, c.seed);
      if (rank == c.root) in = expect;
      void* recv = c.inPlace ? in.data() : out.data();
      RCHECK(collBroadcast(in.data(), recv, cnt, c.dt, c.root, comm, nullptr));
      if (!sameBytes(recv, expect.data(), cnt * es)) {
        for (size_t i = 0; i < cnt; ++i)
          if (!testing::sameElement(recv, expect.data(), i, c.dt))
            return mismatch(c, "result", i, static_cast<char*>(recv) + i * es, at(expect, i));
      }
      return "";
    }
    case Coll::kAllGather: {
      std::vector<unsigned char> out(cnt * n * es, kSentinel), mine(cnt * es);
      testing::fillInput(mine.data(), cnt, c.dt, c.op, rank, c.seed);
      void* send = mine.data();
      if (c.inPlace) {
        copyBytes(out.data() + rank * cnt * es, mine.data(), cnt * es);
        send = out.data() + rank * cnt * es;
      }
      RCHECK(collAllGather(send, out.data(), cnt, c.dt, comm, nullptr));
      std::vector<unsigned char> expect(cnt * es);
      for (int r = 0; r < n; ++r) {
        testing::fillInput(expect.data(), cnt, c.dt, c.op, r, c.seed);
        if (!sameBytes(out.data() + r * cnt * es, expect.data(), cnt * es))
          return c.str() + ": block of rank " + std::to_string(r) + " is wrong";
      }
      return "";
    }
    case Coll::kSendRecv: {
      // Ring shift inside a group: receive posted before send on odd ranks.
      std::vector<unsigned char> in(cnt * es), out(cnt * es, kSentinel), expect(cnt * es);
      int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      testing::fillInput(in.data(), cnt, c.dt, c.op, rank, c.seed);
      RCHECK(collGroupStart());
      if (rank % 2) RCHECK(collRecv(out.data(), cnt, c.dt, prev, comm, nullptr));
      RCHECK(collSend(in.data(), cnt, c.dt, next, comm, nullptr));
      if (rank % 2 == 0) RCHECK(collRecv(out.data(), cnt, c.dt, prev, comm, nullptr));
      RCHECK(collGroupEnd());
      testing::fillInput(expect.data(), cnt, c.dt, c.op, prev, c.seed);
      if (out != expect) return c.str() + ": received data is wrong";
      return "";
    }
    case Coll::kAllToAll: {
      // Every pair in one group, peers in a rank-dependent order.
      std::vector<unsigned char> in(cnt * n * es), out(cnt * n * es, kSentinel);
      testing::fillInput(in.data(), cnt * n, c.dt, c.op, rank, c.seed);
      RCHECK(collGroupStart());
      for (int k = 0; k < n; ++k) {
        int p = (rank * 3 + k) % n;
        RCHECK(collRecv(out.data() + p * cnt * es, cnt, c.dt, p, comm, nullptr));
        int q = (n - 1 - k + rank) % n;
        RCHECK(collSend(in.data() + q * cnt * es, cnt, c.dt, q, comm, nullptr));
      }
      RCHECK(collGroupEnd());
      std::vector<unsigned char> theirs(cnt * n * es);
      for (int p = 0; p < n; ++p) {
        testing::fillInput(theirs.data(), cnt * n, c.dt, c.op, p, c.seed);
        if (!sameBytes(out.data() + p * cnt * es, theirs.data() + rank * cnt * es, cnt * es))
          return c.str() + ": block from rank " + std::to_string(p) + " is wrong";
      }
      return "";
    }
  }
  return "unknown collective";
}

std::vector<Case> sweepCases(int n) {
  std::vector<Case> cases;
  const size_t counts[] = {0, 1, 7, 13, 1000, 4099};
  uint64_t seed = 1;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce, Coll::kBroadcast, Coll::kAllGather,
                    Coll::kSendRecv, Coll::kAllToAll}) {
    bool reduces = coll == Coll::kAllReduce || coll == Coll::kReduceScatter || coll == Coll::kReduce;
    bool p2p = coll == Coll::kSendRecv || coll == Coll::kAllToAll;
    for (int dt = 0; dt < collNumTypes; ++dt) {
      for (int op = 0; op < (reduces ? collNumOps : 1); ++op) {
        for (size_t count : counts) {
          for (bool inPlace : {false, true}) {
            if (p2p && inPlace) continue;
            Case c{coll,
                   static_cast<collDataType_t>(dt),
                   static_cast<collRedOp_t>(op),
                   count,
                   inPlace,
                   static_cast<int>((seed * 7) % n),
                   seed};
            ++seed;
            cases.push_back(c);
          }
        }
      }
    }
  }
  return cases;
}

// Runs every case on n threads-as-ranks, in order; each rank's first wrong result.
std::vector<std::string> runCases(int n, const std::vector<Case>& cases) {
  return testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    for (const Case& c : cases) {
      std::string e = runCase(c, rank, n, comm);
      if (!e.empty()) return e;
    }
    return "";
  });
}

// Under COLL_TEST_SHARE=N one case in N runs (testing::sampled), a different share for
// each rank count and transport; `salt` tells apart further runs with the same ones.
void sweep(int nranks, bool net, bool tree = false, size_t salt = 0) {
  ScopedEnv algo("COLL_ALGO", tree ? "allreduce:tree" : "");
  ScopedEnv shm("COLL_SHM_DISABLE", net ? "1" : "0");
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv buff("COLL_BUFFSIZE", "4096");          // 512-byte slices
  ScopedEnv chunk("COLL_CHUNK_MIN_BYTES", "1024");  // several channels from 2 KiB up
  ScopedEnv maxch("COLL_MAX_NCHANNELS", "2");
  // Small thresholds, so the counts below straddle them: one-shot and ring operations
  // alternate within one run.
  ScopedEnv oneShot("COLL_ONESHOT_BYTES", "2048");
  ScopedEnv netOneShot("COLL_NET_ONESHOT_BYTES", "1024");
  // Above the mailbox: direct reads of the peers' buffers for even rank counts, the
  // shared-memory FIFOs (ring and chain) for odd ones.
  ScopedEnv direct("COLL_DIRECT", nranks % 2 == 0 ? "1" : "0");
  auto cases = sweepCases(nranks);
  if (tree) {  // allreduce only, every one on the tree
    std::vector<Case> t;
    for (Case c : cases)
      if (c.coll == Coll::kAllReduce) {
        c.tree = true;
        t.push_back(c);
      }
    cases.swap(t);
  }
  std::vector<Case> share;
  for (size_t i = 0; i < cases.size(); ++i)
    if (testing::sampled(i, static_cast<size_t>(nranks) + (net ? 3 : 0) + (tree ? 5 : 0) + salt))
      share.push_back(cases[i]);
  cases.swap(share);
  auto errors = runCases(nranks, cases);
  INFO("nranks " << nranks << (net ? " net" : " shm") << (tree ? " tree" : "") << ", " << cases.size() << " cases");
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

}  // namespace

TEST_CASE("collective sweep over shm", "[collectives][shm]") {
  for (int n = 1; n <= 8; ++n) {
    SECTION("nranks " + std::to_string(n)) { sweep(n, false); }
  }
}

TEST_CASE("collective sweep over net", "[collectives][net]") {
  for (int n = 1; n <= 8; ++n) {
    SECTION("nranks " + std::to_string(n)) { sweep(n, true); }
  }
}

TEST_CASE("allreduce sweep on the tree over shm and net", "[collectives][tree]") {
  for (int n = 1; n <= 8; ++n) {
    SECTION("nranks " + std::to_string(n)) {
      sweep(n, false, true);
      sweep(n, true, true);
    }
  }
}

namespace {

// Reductions whose bits depend on the order of combination (fp32 with k/37 inputs, fp16
// averages, bf16, fp64 products), at sizes on both sides of the one-shot limits.
std::vector<Case> orderSensitiveCases(int n) {
  std::vector<Case> cases;
  uint64_t seed = testing::kOrderSensitiveSeed;
  for (size_t count : {size_t{37}, size_t{3001}}) {
    const int root = n - 1;
    cases.push_back({Coll::kAllReduce, collFloat, collSum, count, false, root, seed++});
    cases.push_back({Coll::kAllReduce, collHalf, collAvg, count, true, root, seed++});
    cases.push_back({Coll::kAllReduce, collBfloat16, collSum, count, false, root, seed++});
    cases.push_back({Coll::kAllReduce, collDouble, collProd, count, false, root, seed++});
    cases.push_back({Coll::kReduceScatter, collFloat, collSum, count / 3, false, root, seed++});
    cases.push_back({Coll::kReduce, collFloat, collSum, count, true, root, seed++});
  }
  // Beyond the one-shot limits, several loops: the path compression takes.
  cases.push_back({Coll::kAllReduce, collFloat, collSum, 70001, false, 0, seed++});
  cases.push_back({Coll::kReduceScatter, collFloat, collAvg, 20001, true, 0, seed++});
  return cases;
}

// Runs `cases` on n ranks with the given environment added; every rank's first error.
std::vector<std::string> runWith(int n, const std::vector<std::pair<const char*, const char*>>& env,
                                 const std::vector<Case>& cases) {
  std::vector<std::unique_ptr<ScopedEnv>> set;
  for (auto [k, v] : env) set.push_back(std::make_unique<ScopedEnv>(k, v));
  return runCases(n, cases);
}

}  // namespace

// Every result is checked against the ring's order (runCase's reference), so equal
// across settings bit for bit: the tree and compression would change the order or round
// partial sums, the others change the path (one-shot sizes, channels, slices, loops,
// shared memory or TCP, the device executor).
TEST_CASE("COLL_DETERMINISTIC=1: the same bits under every algorithm, protocol, channel, slice and transport setting",
          "[collectives][deterministic]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const std::vector<std::vector<std::pair<const char*, const char*>>> settings = {
      {},
      {{"COLL_ALGO", "allreduce:tree"}},
      {{"COLL_PROTO", "LL"}, {"COLL_ONESHOT_BYTES", "1048576"}},
      {{"COLL_MAX_NCHANNELS", "1"}},
      {{"COLL_MIN_NCHANNELS", "4"}, {"COLL_CHUNK_MIN_BYTES", "1024"}, {"COLL_BUFFSIZE", "4096"}},
      {{"COLL_SHM_DISABLE", "1"}, {"COLL_ALGO", "Tree"}, {"COLL_NET_ONESHOT_BYTES", "65536"}},
      {{"COLL_DEVICE_EMULATE", "1"}, {"COLL_ALGO", "allreduce:tree"}},
      {{"COLL_DEVICE_EMULATE", "1"}, {"COLL_DEVICE_DIRECT_MIN_BYTES", "1"}},
      {{"COLL_COMPRESS", "fp16"}, {"COLL_SHM_DISABLE", "1"}},
  };
  for (int n = 1; n <= 8; ++n) {
    const auto cases = orderSensitiveCases(n);
    for (size_t i = 0; i < settings.size(); ++i) {
      if (!testing::sampled(i, static_cast<size_t>(n))) continue;  // COLL_TEST_SHARE: each setting at some n
      ScopedEnv det("COLL_DETERMINISTIC", "1");
      auto errors = runWith(n, settings[i], cases);
      INFO("nranks " << n << ", setting " << i);
      for (auto& e : errors) FAIL_CHECK(e);
      REQUIRE(errors.empty());
    }
  }
  // Without it the tree and compression do change the bits: what the mode is for.
  for (auto env :
       {std::vector<std::pair<const char*, const char*>>{{"COLL_ALGO", "allreduce:tree"}},
        std::vector<std::pair<const char*, const char*>>{{"COLL_COMPRESS", "fp16"}, {"COLL_SHM_DISABLE", "1"}}}) {
    ScopedEnv det("COLL_DETERMINISTIC", "0");
    REQUIRE_FALSE(runWith(4, env, orderSensitiveCases(4)).empty());
  }
}

// The device executor's interpreter, lowering, FIFO protocol and proxy thread, run on host
// threads (COLL_DEVICE_EMULATE=1: host buffers take the device path): the same sweep,
// where every operation runs as lowered lanes (ring, chain, tree, send/recv) instead of
// the one-shot or host executor. On a GPU, tests/test_gpu.cc runs the same code in the kernel.
TEST_CASE("device executor emulated on host threads: every collective over shm, net and the tree",
          "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv channels("COLL_DEVICE_NCHANNELS", "3");  // the host set has 2 (sweep): 3 lanes per rank
  // An H100's 132 resident blocks: 8 ranks get 16 lanes each, so 7 peers share 6 send
  // (and 6 receive) lanes and some lanes serve two peers, as on the GPU.
  ScopedEnv blocks("COLL_DEVICE_EMULATE_BLOCKS", "132");
  for (int n = 1; n <= 8; ++n) {
    SECTION("shm, nranks " + std::to_string(n)) { sweep(n, false); }
  }
  for (int n : {2, 3, 5, 8}) {
    SECTION("net, nranks " + std::to_string(n)) { sweep(n, true); }
  }
  for (int n : {4, 6}) {
    SECTION("tree, nranks " + std::to_string(n)) {
      sweep(n, false, true);
      sweep(n, true, true);
    }
  }
  // 2 ranks' small allreduces exchanging their blocks (off by default since the H100 found
  // it no faster than the ring), the bits checked against the ring's order.
  SECTION("exchange, nranks 2") {
    ScopedEnv exchange("COLL_DEVICE_EXCHANGE_BYTES", "262144");
    sweep(2, false, false, 1);
    sweep(2, true, false, 1);
  }
  // Thread ranks of one process: allreduces of any size read each other's buffers
  // (direct.cc), the bits checked against the ring's order as everywhere.
  for (int n = 2; n <= 8; ++n) {
    SECTION("direct allreduce, nranks " + std::to_string(n)) {
      ScopedEnv direct("COLL_DEVICE_DIRECT_MIN_BYTES", "1");
      sweep(n, false, false, 2);
    }
  }
}

// A GPU keeps only so many blocks resident, and lanes wait on each other: if the lanes of
// all ranks sharing it outnumber its resident blocks, the ones left queued are never run
// and the resident ones wait for them forever. COLL_DEVICE_EMULATE_BLOCKS gives the
// emulation such a GPU (lanes beyond it wait for a running one to end). 8 ranks on 40
// blocks: 5 lanes each, while an all-to-all alone used to take 7 send + 7 receive lanes
// per rank and hung here. With 8 channels asked for: 3 channels and one send and one
// receive lane for all peers; with 1: two of each, peers at odd and even distances.
TEST_CASE("device lanes of all ranks on a GPU fit its resident blocks (emulated GPU of 40 blocks)",
          "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv blocks("COLL_DEVICE_EMULATE_BLOCKS", "40");
  const char* channels = GENERATE("8", "1");
  ScopedEnv nch("COLL_DEVICE_NCHANNELS", channels);
  INFO("COLL_DEVICE_NCHANNELS=" << channels);
  ScopedEnv buff("COLL_BUFFSIZE", "4096");  // 512-byte slots: every message below spans many
  ScopedEnv oneShot("COLL_ONESHOT_BYTES", "0");
  const int n = 8;
  const size_t cnt = 3001;  // int32 per peer: 12 KiB, 24 slots
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    for (bool withAllReduce : {false, true}) {
      const std::string what = withAllReduce ? "all-to-all with an allreduce in one group: " : "all-to-all: ";
      std::vector<int32_t> in(cnt * n), out(cnt * n, -1), red(cnt), sum(cnt, -1);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(rank * 1000003 + i);
      for (size_t i = 0; i < cnt; ++i) red[i] = static_cast<int32_t>(rank + i);
      collResult_t r = collGroupStart();
      if (withAllReduce && r == collSuccess)
        r = collAllReduce(red.data(), sum.data(), cnt, collInt32, collSum, comm, nullptr);
      for (int k = 0; k < n && r == collSuccess; ++k) {
        const int p = (rank * 3 + k) % n, q = (rank * 5 + 3 * k) % n;  // rank-dependent orders (n = 8)
        r = collSend(in.data() + p * cnt, cnt, collInt32, p, comm, nullptr);
        if (r == collSuccess) r = collRecv(out.data() + q * cnt, cnt, collInt32, q, comm, nullptr);
      }
      collResult_t e = collGroupEnd();
      if (r == collSuccess) r = e;
      if (r != collSuccess) return what + collGetErrorString(r) + ": " + collGetLastError(comm);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < cnt; ++i)
          if (out[p * cnt + i] != static_cast<int32_t>(p * 1000003 + rank * cnt + i))
            return what + "element " + std::to_string(i) + " from rank " + std::to_string(p) + " is wrong";
      for (size_t i = 0; withAllReduce && i < cnt; ++i)
        if (sum[i] != static_cast<int32_t>(n * i + n * (n - 1) / 2))
          return what + "allreduce element " + std::to_string(i) + " is " + std::to_string(sum[i]);
    }
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

// Ranks of processes time-sliced on one GPU (no MPS) never run their kernels at once, so
// a lane that waits for such a peer gives its block up (kDeviceYielded) and the launch runs
// again from where each lane stopped, until all are done. With COLL_DEVICE_YIELD_US=1
// the emulated lanes yield at nearly every wait: the sweep's results stay right over shm,
// net and the tree; and a group of collectives and sends with 256-byte slots (many
// slices per step, so lanes stop in the middle of steps) counts the runs it took.
TEST_CASE("device lanes that yield resume where they stopped: the sweep (COLL_DEVICE_YIELD_US, emulated)",
          "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv channels("COLL_DEVICE_NCHANNELS", "3");
  ScopedEnv yield("COLL_DEVICE_YIELD_US", "1");
  ScopedEnv stage("COLL_DEVICE_STAGE_BYTES", "0");  // the lanes, not the host path
  SECTION("shm, nranks 3") { sweep(3, false); }
  SECTION("net, nranks 2") { sweep(2, true); }
  SECTION("tree, nranks 4") { sweep(4, false, true); }
}

TEST_CASE("device lanes that yield resume where they stopped: a group, counted (COLL_DEVICE_YIELD_US, emulated)",
          "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv channels("COLL_DEVICE_NCHANNELS", "3");
  const char* yieldUs = GENERATE("1", "0");
  ScopedEnv yield("COLL_DEVICE_YIELD_US", yieldUs);
  ScopedEnv buff("COLL_DEVICE_BUFFSIZE", "2048");
  ScopedEnv oneShot("COLL_ONESHOT_BYTES", "0");
  ScopedEnv stage("COLL_DEVICE_STAGE_BYTES", "0");
  INFO("COLL_DEVICE_YIELD_US=" << yieldUs);
  const int n = 3;
  const size_t cnt = 4000;  // int32: 63 slices of 256 bytes
  std::atomic<uint64_t> reruns{0};
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    std::vector<int32_t> in(cnt), sum(cnt, -1), all(cnt * n, -1), got(cnt, -1);
    for (size_t i = 0; i < cnt; ++i) in[i] = static_cast<int32_t>(rank * 11 + i);
    collResult_t r = collGroupStart();
    if (r == collSuccess) r = collAllReduce(in.data(), sum.data(), cnt, collInt32, collSum, comm, nullptr);
    if (r == collSuccess) r = collAllGather(in.data(), all.data(), cnt, collInt32, comm, nullptr);
    if (r == collSuccess) r = collSend(in.data(), cnt, collInt32, (rank + 1) % n, comm, nullptr);
    if (r == collSuccess) r = collRecv(got.data(), cnt, collInt32, (rank + n - 1) % n, comm, nullptr);
    const collResult_t e = collGroupEnd();
    if (r != collSuccess || e != collSuccess) return collGetLastError(comm);
    for (size_t i = 0; i < cnt; ++i) {
      if (sum[i] != static_cast<int32_t>(n * i + 11 * n * (n - 1) / 2)) return "allreduce element " + std::to_string(i);
      for (int q = 0; q < n; ++q)
        if (all[q * cnt + i] != static_cast<int32_t>(q * 11 + i)) return "allgather element " + std::to_string(i);
      if (got[i] != static_cast<int32_t>((rank + n - 1) % n * 11 + i)) return "received element " + std::to_string(i);
    }
    if (comm->dev.yieldNs != (*yieldUs == '1' ? 1000u : 0u)) return "yieldNs " + std::to_string(comm->dev.yieldNs);
    reruns += comm->dev.reruns.load();
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
  if (*yieldUs == '1') CHECK(reruns.load() > 0);
  else CHECK(reruns.load() == 0);
}

// Where lanes yield, small collectives go through host memory instead (device/stage.h):
// inputs copied out, the host path, outputs copied back. In place and out of place, roots
// whose output or input is unused, a group of them; a collective above
// COLL_DEVICE_STAGE_BYTES in its own launch takes the lanes (and yields); every rank
// decides alike. The sweep (one-shot, ring, chain sizes) runs staged too.
TEST_CASE("small device collectives run from host memory where lanes yield (emulated)", "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv yield("COLL_DEVICE_YIELD_US", "1");
  SECTION("sweep, nranks 3") {
    ScopedEnv stage("COLL_DEVICE_STAGE_BYTES", "1048576");
    sweep(3, false);
  }
  SECTION("in place, roots, a group, and one above the limit") {
    ScopedEnv stage("COLL_DEVICE_STAGE_BYTES", "4096");
    const int n = 3;
    const size_t cnt = 100, big = 5000;  // int32: 400 bytes each (a group of 5: 2.8 KiB); 20 KB
    auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
      std::vector<int32_t> ar(cnt), ag(cnt * n, -1), rs(cnt * n), bc(cnt, -1), rd(cnt), out(cnt, -7), large(big);
      for (size_t i = 0; i < cnt; ++i) {
        ar[i] = static_cast<int32_t>(rank + i);
        ag[rank * cnt + i] = static_cast<int32_t>(rank * 3 + i);
        for (int q = 0; q < n; ++q) rs[q * cnt + i] = static_cast<int32_t>(q * 1000 + rank + i);
        if (rank == 1) bc[i] = static_cast<int32_t>(7 * i);
        rd[i] = static_cast<int32_t>(rank * 5 + i);
      }
      for (size_t i = 0; i < big; ++i) large[i] = static_cast<int32_t>(rank + i);
      collResult_t r = collGroupStart();
      if (r == collSuccess) r = collAllReduce(ar.data(), ar.data(), cnt, collInt32, collSum, comm, nullptr);
      if (r == collSuccess) r = collAllGather(ag.data() + rank * cnt, ag.data(), cnt, collInt32, comm, nullptr);
      if (r == collSuccess)
        r = collReduceScatter(rs.data(), rs.data() + rank * cnt, cnt, collInt32, collSum, comm, nullptr);
      if (r == collSuccess) r = collBroadcast(bc.data(), bc.data(), cnt, collInt32, 1, comm, nullptr);
      if (r == collSuccess)
        r = collReduce(rd.data(), rank == 2 ? out.data() : nullptr, cnt, collInt32, collSum, 2, comm, nullptr);
      const collResult_t e = collGroupEnd();
      if (r != collSuccess || e != collSuccess) return collGetLastError(comm);
      if (collAllReduce(large.data(), large.data(), big, collInt32, collSum, comm, nullptr) != collSuccess)
        return collGetLastError(comm);
      for (size_t i = 0; i < cnt; ++i) {
        const auto I = static_cast<int32_t>(i);
        if (ar[i] != n * I + n * (n - 1) / 2) return "allreduce element " + std::to_string(i);
        for (int q = 0; q < n; ++q)
          if (ag[q * cnt + i] != q * 3 + I) return "allgather element " + std::to_string(i);
        if (rs[rank * cnt + i] != n * (rank * 1000 + I) + n * (n - 1) / 2) return "reduce-scatter " + std::to_string(i);
        if (bc[i] != 7 * I) return "broadcast element " + std::to_string(i);
        if (rank == 2 && out[i] != n * I + 5 * n * (n - 1) / 2) return "reduce element " + std::to_string(i);
      }
      for (size_t i = 0; i < big; ++i)
        if (large[i] != n * static_cast<int32_t>(i) + n * (n - 1) / 2) return "large element " + std::to_string(i);
      if (comm->dev.stageBytes != 4096 || comm->dev.stageMemoryBytes == 0) return "the group was not staged";
      if (comm->dev.reruns.load() == 0) return "the large allreduce did not run on yielding lanes";
      return "";
    });
    for (auto& e : errors) FAIL_CHECK(e);
    REQUIRE(errors.empty());
  }
  // Staging is decided per operation, alike on every rank: a group where only ranks 0 and
  // 1 also exchange a small and a large message (each end of a pair decides alike; the
  // large one stays on the lanes, split from the staged ones), rank 2 calls the
  // allreduce alone. Deciding per launch had rank 2 stage the allreduce and ranks 0 and
  // 1 not: a hang.
  SECTION("a group where only some ranks add sends and receives") {
    ScopedEnv stage("COLL_DEVICE_STAGE_BYTES", "4096");
    ScopedEnv buff("COLL_DEVICE_BUFFSIZE", "2048");  // 256-byte slots: the large message waits often
    const int n = 3;
    const size_t cnt = 100, big = 5000;
    auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
      std::vector<int32_t> ar(cnt), small(cnt), gotSmall(cnt, -1), large(big), gotLarge(big, -1);
      for (size_t i = 0; i < cnt; ++i) ar[i] = small[i] = static_cast<int32_t>(rank * 13 + i);
      for (size_t i = 0; i < big; ++i) large[i] = static_cast<int32_t>(rank * 17 + i);
      const int peer = 1 - rank;
      collResult_t r = collGroupStart();
      if (r == collSuccess) r = collAllReduce(ar.data(), ar.data(), cnt, collInt32, collSum, comm, nullptr);
      for (auto [buf, got, count] :
           {std::tuple{small.data(), gotSmall.data(), cnt}, {large.data(), gotLarge.data(), big}})
        if (rank < 2 && r == collSuccess) {
          r = collSend(buf, count, collInt32, peer, comm, nullptr);
          if (r == collSuccess) r = collRecv(got, count, collInt32, peer, comm, nullptr);
        }
      const collResult_t e = collGroupEnd();
      if (r != collSuccess || e != collSuccess) return collGetLastError(comm);
      for (size_t i = 0; i < cnt; ++i) {
        if (ar[i] != n * static_cast<int32_t>(i) + 13 * n * (n - 1) / 2)
          return "allreduce element " + std::to_string(i);
        if (rank < 2 && gotSmall[i] != static_cast<int32_t>(peer * 13 + i)) return "small message " + std::to_string(i);
      }
      for (size_t i = 0; rank < 2 && i < big; ++i)
        if (gotLarge[i] != static_cast<int32_t>(peer * 17 + i)) return "large message " + std::to_string(i);
      if (comm->dev.stageMemoryBytes == 0) return "nothing was staged";
      if (rank < 2 && comm->dev.reruns.load() == 0) return "the large message did not take yielding lanes";
      return "";
    });
    for (auto& e : errors) FAIL_CHECK(e);
    REQUIRE(errors.empty());
  }
}

// Yielding is for ranks of other processes sharing the GPU without MPS (their contexts
// are time-sliced), unless COLL_DEVICE_YIELD_US says otherwise.
TEST_CASE("device lanes yield by default only where other processes share the GPU without MPS",
          "[collectives][device]") {
  CHECK(coll::deviceYieldNs(-1, 2, 1, false) == coll::kAutoYieldUs * 1000u);  // another process, no MPS
  CHECK(coll::deviceYieldNs(-1, 4, 2, false) == coll::kAutoYieldUs * 1000u);
  CHECK(coll::deviceYieldNs(-1, 2, 1, true) == 0);   // MPS: kernels of both run at once
  CHECK(coll::deviceYieldNs(-1, 4, 4, false) == 0);  // threads of one process: one context
  CHECK(coll::deviceYieldNs(-1, 0, 0, false) == 0);  // no GPU (emulation)
  CHECK(coll::deviceYieldNs(0, 2, 1, false) == 0);   // asked: never
  CHECK(coll::deviceYieldNs(5, 1, 1, true) == 5000u);
  CHECK(coll::deviceYieldNs(1 << 30, 2, 1, false) == 4'000'000'000u);  // at most 4 s
}

// The device set's FIFOs have their own size (4 MiB on a GPU by default, for 512 KiB
// slices; the host set keeps its 1 MiB): COLL_DEVICE_BUFFSIZE sets it, every device
// program slices by it, and under emulation it defaults to the host set's.
TEST_CASE("the device set's FIFOs take COLL_DEVICE_BUFFSIZE, apart from the host set's", "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv oneShot("COLL_ONESHOT_BYTES", "0");
  const char* device = GENERATE("2048", "");
  std::unique_ptr<ScopedEnv> buff;
  if (*device) buff = std::make_unique<ScopedEnv>("COLL_DEVICE_BUFFSIZE", device);
  INFO("COLL_DEVICE_BUFFSIZE=" << device);
  const int n = 3;
  const size_t cnt = 5000;  // 20 KiB of int32: 78 slices of 256 bytes per rank
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    const size_t want = *device ? 256 : comm->slotBytes;
    if (comm->dev.slotBytes != want || comm->slotBytes != (size_t{1} << 20) / 8)
      return "slots: device " + std::to_string(comm->dev.slotBytes) + ", host " + std::to_string(comm->slotBytes);
    std::vector<int32_t> in(cnt), sum(cnt, -1), all(cnt * n, -1);
    for (size_t i = 0; i < cnt; ++i) in[i] = static_cast<int32_t>(rank * 7 + i);
    if (collAllReduce(in.data(), sum.data(), cnt, collInt32, collSum, comm, nullptr) != collSuccess ||
        collAllGather(in.data(), all.data(), cnt, collInt32, comm, nullptr) != collSuccess)
      return collGetLastError(comm);
    for (size_t i = 0; i < cnt; ++i) {
      if (sum[i] != static_cast<int32_t>(n * i + 7 * n * (n - 1) / 2)) return "allreduce element " + std::to_string(i);
      for (int r = 0; r < n; ++r)
        if (all[r * cnt + i] != static_cast<int32_t>(r * 7 + i)) return "allgather element " + std::to_string(i);
    }
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

// With fewer resident blocks than a group needs, the group is refused by name, not hung:
// 8 ranks on 8 emulated blocks have one lane each, a send/recv group needs two.
TEST_CASE("a device group needing more lanes than fit on the GPU is refused", "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv blocks("COLL_DEVICE_EMULATE_BLOCKS", "8");
  const int n = 8;
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    int32_t x = rank, y = -1;
    if (collAllReduce(&x, &y, 1, collInt32, collSum, comm, nullptr) != collSuccess || y != n * (n - 1) / 2)
      return "allreduce on one lane failed: " + std::string(collGetLastError(comm));
    collGroupStart();
    collSend(&x, 1, collInt32, (rank + 1) % n, comm, nullptr);
    collRecv(&y, 1, collInt32, (rank + n - 1) % n, comm, nullptr);
    const collResult_t r = collGroupEnd();
    const std::string e = collGetLastError(comm);
    if (r != collInvalidUsage || e.find("needs 2 device lanes") == std::string::npos ||
        e.find("only 1 fit") == std::string::npos)
      return std::string("send/recv group: ") + collGetErrorString(r) + ": " + e;
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

TEST_CASE("ring order groups ranks by host, then by GPU in bus order, keeping rank order inside a group", "[ring]") {
  auto peers = [](std::vector<std::pair<const char*, const char*>> hostBus) {
    std::vector<coll::PeerInfo> p(hostBus.size());
    for (size_t r = 0; r < p.size(); ++r) {
      std::snprintf(p[r].hostId, sizeof(p[r].hostId), "%s", hostBus[r].first);
      std::snprintf(p[r].busId, sizeof(p[r].busId), "%s", hostBus[r].second);
    }
    return p;
  };
  using V = std::vector<int>;
  CHECK(coll::ringOrder(peers({{"A", ""}, {"A", ""}, {"B", ""}, {"B", ""}})) == V{0, 1, 2, 3});
  CHECK(coll::ringOrder(peers({{"A", ""}, {"B", ""}, {"A", ""}, {"B", ""}})) == V{0, 2, 1, 3});
  CHECK(coll::ringOrder(peers({{"B", ""}, {"A", ""}, {"B", ""}})) == V{0, 2, 1});
  CHECK(coll::ringOrder(peers({{"A", "g0"}, {"A", "g1"}, {"A", "g0"}, {"A", "g1"}})) == V{0, 2, 1, 3});
  CHECK(coll::ringOrder(peers({{"A", "g0"}, {"B", "g0"}, {"A", "g1"}, {"B", "g0"}, {"A", "g0"}})) == V{0, 4, 2, 1, 3});
  CHECK(coll::ringOrder(peers({{"A", ""}, {"A", "g0"}, {"A", ""}})) == V{0, 2, 1});
  CHECK(coll::ringOrder(peers({{"A", ""}})) == V{0});
  // Device numbering across sockets: ranks on buses 0x18, 0x9a, 0x2a, 0xab (GPUs 0, 4, 1, 5).
  CHECK(coll::ringOrder(peers({{"A", "0000:18:00.0"},
                               {"A", "0000:9a:00.0"},
                               {"A", "0000:2a:00.0"},
                               {"A", "0000:ab:00.0"}})) == V{0, 2, 1, 3});
}

// A kernel orders its FIFO accesses at GPU scope only where both ends run on its GPU
// (device_lane.h DeviceConn::sameGpu): p2p between thread ranks of one GPU. Another process
// (MPS), another GPU (NVLink, PCIe peer access), another host, or a FIFO in host memory
// (shm, net: a proxy or the host executor at the other end) needs system scope.
TEST_CASE("p2p connectors say whether both ends are on one GPU and other connectors never do", "[device]") {
  coll::PeerInfo a{}, b{};
  std::strcpy(a.hostId, "A");
  std::strcpy(b.hostId, "A");
  std::strcpy(a.busId, "0000:18:00.0");
  std::strcpy(b.busId, "0000:18:00.0");
  a.pid = b.pid = 1;
  CHECK(coll::p2pSameGpu(a, b, false));  // thread ranks of one GPU
  b.pid = 2;
  CHECK_FALSE(coll::p2pSameGpu(a, b, false));  // processes on one GPU (MPS): outside PTX's GPU scope
  b.pid = 1;
  std::strcpy(b.busId, "0000:2a:00.0");
  CHECK_FALSE(coll::p2pSameGpu(a, b, false));  // peer GPUs
  std::strcpy(b.busId, "0000:18:00.0");
  std::strcpy(b.hostId, "B");
  CHECK_FALSE(coll::p2pSameGpu(a, b, false));  // the same bus id on another host
  a.busId[0] = b.busId[0] = '\0';
  std::strcpy(b.hostId, "A");
  CHECK_FALSE(coll::p2pSameGpu(a, b, false));  // host ranks
  CHECK(coll::p2pSameGpu(a, b, true));         // emulated: threads of one process
  b.pid = 2;
  CHECK_FALSE(coll::p2pSameGpu(a, b, true));

  // Emulated thread ranks: the ring channels of the device set, p2p, or shm without it.
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  for (const char* disable : {"0", "1"}) {
    ScopedEnv p2p("COLL_P2P_DISABLE", disable);
    auto errors = testing::runRanks(2, [&](int, collComm_t comm) -> std::string {
      std::vector<float> x(1024, 1.0f);
      if (collAllReduce(x.data(), x.data(), x.size(), collFloat32, collSum, comm, nullptr) != collSuccess)
        return "allreduce failed";
      const auto& chans = comm->conns(true).channels;
      if (chans.empty() || !chans[0].send || !chans[0].recv) return "no device ring channel";
      const bool isP2p = std::strcmp(chans[0].send->kind(), "p2p") == 0;
      if (isP2p != (disable[0] == '0')) return std::string("channel 0 is ") + chans[0].send->kind();
      for (const auto& ch : chans)
        if (ch.send->sameGpu() != isP2p || ch.recv->sameGpu() != isP2p)
          return std::string(ch.send->kind()) + " connector with sameGpu() " + (isP2p ? "false" : "true");
      return "";
    });
    INFO("COLL_P2P_DISABLE=" << disable);
    for (auto& e : errors) FAIL_CHECK(e);
  }
}

// Kernels over p2p or shm FIFOs need nothing from the proxy but a look at their end: with
// launches ending back to back and nobody waiting, it must not keep a core spinning
// (it did: every finished launch restarted its spin).
TEST_CASE("the device proxy does not spin while launches it has nothing to move run back to back", "[device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");  // a host abort word: no CUDA needed
  auto errors = testing::runRanks(1, [](int, collComm_t comm) -> std::string {
    using clock = std::chrono::steady_clock;
    struct EndsAt : coll::Completion {
      clock::time_point end;
      bool done(coll::Status*) override { return clock::now() >= end; }
    };
    auto cpuNow = [] {
      timespec t{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
      return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
    };
    coll::DeviceProxy proxy(&comm->dev);
    if (!proxy.init().ok()) return "proxy init failed";
    const auto t0 = clock::now();
    const int launches = 150;  // one ending every millisecond
    std::shared_ptr<coll::PendingLaunch> last;
    for (int i = 0; i < launches; ++i) {
      auto p = std::make_shared<coll::PendingLaunch>();
      auto done = std::make_shared<EndsAt>();
      done->end = t0 + std::chrono::milliseconds(i + 1);
      p->completion = done;
      proxy.submit(p);
      last = p;
    }
    const double cpu0 = cpuNow();
    const auto w0 = clock::now();
    std::this_thread::sleep_until(t0 + std::chrono::milliseconds(launches));
    const double cpu = cpuNow() - cpu0;
    const double wall = std::chrono::duration<double>(clock::now() - w0).count();
    if (!proxy.wait(last).ok()) return "the last launch failed";
    if (cpu > 0.3 * wall)
      return "the process used " + std::to_string(cpu * 1e3) + " ms of CPU in " + std::to_string(wall * 1e3) +
             " ms while its proxy had nothing to move";
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

TEST_CASE("device shape: a launch's lanes fit the budget, and send lanes reach every peer", "[device]") {
  for (int n = 2; n <= 300; ++n)
    for (int budget = 1; budget <= 300; ++budget)
      for (int requested : {0, 1, 8, 32, 64, 100}) {
        const coll::DeviceShape s = coll::deviceShape(n, budget, requested);
        const int minP2p = (n - 1 + coll::kDeviceMaxConns - 1) / coll::kDeviceMaxConns;
        INFO("nranks " << n << ", budget " << budget << ", requested " << requested << ": " << s.channels
                       << " channels, " << s.peerLanes << " send/recv lanes each way");
        REQUIRE(s.channels >= 1);
        REQUIRE(s.channels <= std::max(1, requested > 0 ? std::min(requested, coll::kDeviceMaxChannels) : 32));
        REQUIRE(s.peerLanes * coll::kDeviceMaxConns >= n - 1);  // no lane over its connector limit
        if (budget >= 1 + 2 * minP2p) REQUIRE(s.channels + 2 * s.peerLanes <= budget);
      }
}

TEST_CASE("ranks of one process on a GPU beyond its hardware queues are warned about at init", "[device]") {
  // The H100 run: 8 and 16 ranks as threads hung with CUDA's default 8 queues, passed at 32.
  CHECK(coll::hardwareQueueWarning(2, 8).empty());
  CHECK(coll::hardwareQueueWarning(8, 8).empty());
  CHECK_THAT(coll::hardwareQueueWarning(16, 8),
             Catch::Contains("16 ranks of this process") && Catch::Contains("CUDA_DEVICE_MAX_CONNECTIONS=32"));
  CHECK(coll::hardwareQueueWarning(16, 32).empty());
}

TEST_CASE("device channels by default: half a rank's resident lanes, at most 32, and 8 where the GPU is unknown",
          "[device]") {
  // An H100 (132 resident lanes) shared by 2, 8 and 16 ranks.
  CHECK(coll::deviceShape(2, 66, 0).channels == 32);
  CHECK(coll::deviceShape(2, 66, 0).peerLanes == 8);
  CHECK(coll::deviceShape(8, 16, 0).channels == 8);
  CHECK(coll::deviceShape(8, 16, 0).peerLanes == 4);
  CHECK(coll::deviceShape(16, 8, 0).channels == 4);
  CHECK(coll::deviceShape(4, coll::kUnlimitedLanes, 0).channels == 8);
  CHECK(coll::deviceShape(4, 66, 12).channels == 12);  // COLL_DEVICE_NCHANNELS still rules
  // Asked for, up to 64: 2 ranks on an H100 then keep one send/recv lane each way.
  CHECK(coll::deviceShape(2, 66, 64).channels == 64);
  CHECK(coll::deviceShape(2, 66, 64).peerLanes == 1);
  CHECK(coll::deviceShape(2, 200, 100).channels == coll::kDeviceMaxChannels);
}

TEST_CASE("large messages over 16 MiB with default slices", "[collectives][large]") {
  for (bool net : {false, true}) {
    for (int n : {2, 3, 4}) {
      ScopedEnv shm("COLL_SHM_DISABLE", net ? "1" : "0");
      ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
      std::vector<Case> cases;
      const size_t big = (16u << 20) / 4 + 5;  // float32: a little over 16 MiB, odd
      uint64_t seed = 1000;
      for (Coll c :
           {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce, Coll::kBroadcast, Coll::kAllGather, Coll::kSendRecv})
        for (bool inPlace : {false, true}) {
          size_t count = (c == Coll::kReduceScatter || c == Coll::kAllGather) ? big / n : big;
          cases.push_back({c, collFloat32, collSum, count, inPlace && c != Coll::kSendRecv, 1 % n, seed++});
        }
      cases.push_back({Coll::kAllReduce, collBfloat16, collAvg, big, false, 0, seed++});
      std::vector<Case> share;  // COLL_TEST_SHARE: one case in N, a different share per run
      for (size_t i = 0; i < cases.size(); ++i)
        if (testing::sampled(i, static_cast<size_t>(n) + (net ? 3 : 0))) share.push_back(cases[i]);
      auto errors = runCases(n, share);
      INFO("nranks " << n << (net ? " net" : " shm"));
      for (auto& e : errors) FAIL_CHECK(e);
      REQUIRE(errors.empty());
    }
  }
}

// Rings that cross the network take COLL_NET_BUFFSIZE FIFOs (over TCP, 256 KiB slices
// beat 128 KiB ones), unless COLL_BUFFSIZE is set, which then applies everywhere.
TEST_CASE("rings over the network use COLL_NET_BUFFSIZE unless COLL_BUFFSIZE is set", "[collectives][net]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv ncclBuff("NCCL_BUFFSIZE", nullptr);
  ScopedEnv ncclNetBuff("NCCL_NET_BUFFSIZE", nullptr);
  struct Row {
    const char* shmDisable;
    const char* buff;
    const char* netBuff;
    size_t slice;
  };
  const Row rows[] = {{"0", nullptr, nullptr, 131072},  {"1", nullptr, nullptr, 262144},
                      {"1", nullptr, "524288", 65536},  {"1", "1048576", nullptr, 131072},
                      {"0", nullptr, "524288", 131072}, {"1", "4096", "524288", 512}};
  for (const Row& row : rows) {
    ScopedEnv shm("COLL_SHM_DISABLE", row.shmDisable);
    ScopedEnv buff("COLL_BUFFSIZE", row.buff);
    ScopedEnv netBuff("COLL_NET_BUFFSIZE", row.netBuff);
    auto errors = testing::runRanks(2, [&](int, collComm_t comm) -> std::string {
      if (comm->sliceBytes == row.slice) return "";
      return "slices of " + std::to_string(comm->sliceBytes) + " bytes, expected " + std::to_string(row.slice);
    });
    INFO("COLL_SHM_DISABLE=" << row.shmDisable << " COLL_BUFFSIZE=" << (row.buff ? row.buff : "(unset)")
                             << " COLL_NET_BUFFSIZE=" << (row.netBuff ? row.netBuff : "(unset)"));
    for (auto& e : errors) FAIL_CHECK(e);
    REQUIRE(errors.empty());
  }
}

TEST_CASE("net with helper threads and several sockets per connection", "[collectives][net]") {
  ScopedEnv shm("COLL_SHM_DISABLE", "1");
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv threads("COLL_SOCKET_NTHREADS", "2");
  ScopedEnv socks("COLL_NSOCKS_PERTHREAD", "2");
  for (int n : {2, 3}) {  // 2: the LL one-shot's duplex connection too
    std::vector<Case> cases;
    uint64_t seed = 5000;
    for (size_t count : {size_t{1}, size_t{1000}, size_t{300001}, size_t{2000000}})
      for (Coll c : {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduceScatter, Coll::kSendRecv})
        cases.push_back({c, collInt32, collSum, count, false, n - 1, seed++});
    auto errors = runCases(n, cases);
    INFO("nranks " << n);
    for (auto& e : errors) FAIL_CHECK(e);
    REQUIRE(errors.empty());
  }
}

TEST_CASE("tree over net with slices larger than a socket buffer", "[collectives][tree][net]") {
  // Regression: a rank whose up-the-tree send was only partly taken by the socket, then
  // waiting for the result to come down on another connection, never pushed the rest
  // (net connectors send only when progressed), and the tree deadlocked. 8 MiB slices
  // make every send partial.
  ScopedEnv shm("COLL_SHM_DISABLE", "1");
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  ScopedEnv algo("COLL_ALGO", "allreduce:tree");
  ScopedEnv buff("COLL_BUFFSIZE", "67108864");
  const int n = 3;
  std::vector<Case> cases;
  for (size_t count : {size_t{2} << 20, size_t{5} << 20})  // 1 and 3 chunks of 8 MiB
    cases.push_back({Coll::kAllReduce, collInt32, collSum, count, false, 0, 7000 + count, true});
  auto errors = runCases(n, cases);
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

// Net connectors send slices straight from the caller's buffers (executor.cc
// inPlaceSource). In a group, each operation here writes the buffer the previous one sent
// from (in place, 12 MiB: streamed writes, sends the socket takes only in part), so a
// send still reading it when the next operation writes would hand stale or mixed data on.
TEST_CASE("a group over net whose operations each write the buffer the previous one sent from", "[collectives][net]") {
  ScopedEnv shm("COLL_SHM_DISABLE", "1");
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  const int n = 3;
  const size_t count = size_t{3} << 20;
  auto errors = testing::runRanks(n, [&](int rank, collComm_t comm) -> std::string {
    std::vector<int32_t> buf(count);
    for (size_t i = 0; i < count; ++i) buf[i] = (rank + 1) * 1000 + static_cast<int32_t>(i % 97);
    if (collGroupStart() != collSuccess) return "collGroupStart failed";
    collResult_t r = collBroadcast(buf.data(), buf.data(), count, collInt32, 0, comm, nullptr);
    if (r == collSuccess) r = collAllReduce(buf.data(), buf.data(), count, collInt32, collSum, comm, nullptr);
    if (r == collSuccess) r = collBroadcast(buf.data(), buf.data(), count, collInt32, 1, comm, nullptr);
    if (r == collSuccess) r = collAllReduce(buf.data(), buf.data(), count, collInt32, collSum, comm, nullptr);
    collResult_t e = collGroupEnd();
    if (r != collSuccess || e != collSuccess)
      return std::string("group: ") + collGetErrorString(r != collSuccess ? r : e) + ": " + collGetLastError(comm);
    for (size_t i = 0; i < count; ++i) {
      const int32_t want = 9 * (1000 + static_cast<int32_t>(i % 97));
      if (buf[i] != want)
        return "element " + std::to_string(i) + " is " + std::to_string(buf[i]) + ", expected " + std::to_string(want);
    }
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

// Ranks that called different counts: one above the mailbox size reads its peers'
// buffers (direct), the other fits a mailbox. The direct one finds the mismatch first and
// withdraws its flag as it gives up, possibly before the mailbox one looked for it: that
// one must learn of the withdrawal, not wait for a flag that will never come. Polled by
// hand so the order is the losing one every time (it hung 1 run in 3 under load).
TEST_CASE("a one-shot in a mailbox fails when its peer gave up a direct one-shot first", "[collectives][failure]") {
  collComm_t comms[2];
  REQUIRE(collCommInitAll(comms, 2, nullptr) == collSuccess);
  const coll::OneShotContext ctx0 = coll::oneShotContext(comms[0]), ctx1 = coll::oneShotContext(comms[1]);
  REQUIRE(ctx0.state->mailboxes != nullptr);
  REQUIRE(ctx1.state->directOn);
  const size_t small = 100, large = ctx1.state->mailboxes->capacity() / sizeof(float) + 1000;
  std::vector<float> in0(small, 1.0f), out0(small), in1(large, 2.0f), out1(large);
  const coll::OpDesc od0 = sumAllReduce(in0.data(), out0.data(), small, collFloat);
  const coll::OpDesc od1 = sumAllReduce(in1.data(), out1.data(), large, collFloat);
  {
    coll::OneShot direct(ctx1, od1), mailbox(ctx0, od0);
    REQUIRE(direct.start().ok());
    REQUIRE(mailbox.start().ok());
    bool done = false;
    coll::WaitTarget wait;
    const coll::Status mismatch = direct.poll(&done, &wait);
    INFO(mismatch.message());
    REQUIRE(!mismatch.ok());
    CHECK(mismatch.message().find("different operations or counts") != std::string::npos);
    direct.abandon();
    const coll::Status st = mailbox.poll(&done, &wait);
    INFO(st.message());
    CHECK(!done);
    REQUIRE(!st.ok());
    CHECK(st.message().find("rank 1 gave up") != std::string::npos);
  }
  for (collComm_t c : comms) collCommAbort(c);
}

// Ranks whose counts fall on either side of COLL_DEVICE_STAGE_BYTES take different paths:
// one stages its operation through host memory (the mailboxes), the other waits on its
// device lanes for data that never comes. The lane's proxy sees the peer's mailbox ahead
// and fails the communicator, which tells the other: both fail within seconds, naming the
// mismatch. (It hung until the operation timeout before.)
TEST_CASE("counts on either side of the staging limit fail both ranks, not a hang (emulated)",
          "[collectives][device][failure]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv yield("COLL_DEVICE_YIELD_US", "1");
  ScopedEnv stage("COLL_DEVICE_STAGE_BYTES", "4096");
  auto errors = testing::runRanks(2, [&](int rank, collComm_t comm) -> std::string {
    std::vector<int32_t> buf(5000, 1);
    const size_t count = rank == 0 ? 100 : 5000;  // 400 bytes staged; 20 KB on the lanes
    if (collCommSetTimeout(comm, 15.0) != collSuccess) return "collCommSetTimeout failed";  // a hang: fail
    const auto start = std::chrono::steady_clock::now();
    const collResult_t r = collAllReduce(buf.data(), buf.data(), count, collInt32, collSum, comm, nullptr);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string why = collGetLastError(comm);
    if (r == collSuccess) return "the mismatched allreduce succeeded";
    if (why.find("different operations or counts") == std::string::npos) return "unexpected error: " + why;
    if (took > 10.0) return "failed only after " + std::to_string(took) + " s";
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

// The direct route's pieces of a block start on 16 bytes from the buffer's start (or at
// the block's own start), cover the block in order, and stay near equal.
TEST_CASE("aligned piece cuts: 16-byte starts, in order, covering the block", "[collectives][device]") {
  using namespace coll;
  for (size_t es : {1, 2, 4, 8})
    for (size_t b : {0, 3, 1000})
      for (size_t len : {0, 5, 97, 33554432 / 24 * 24 + 7})
        for (int n : {1, 3, 24, 32}) {
          const size_t e = b + len;
          CAPTURE(es, b, len, n);
          size_t prev = alignedCut(b, e, n, 0, es);
          CHECK(prev == b);
          for (int i = 1; i <= n; ++i) {
            const size_t x = alignedCut(b, e, n, i, es);
            CHECK(x >= prev);
            if (i < n && x < e) CHECK((x * es) % 16 == 0);
            CHECK(x - (b + coll::partBegin(len, static_cast<size_t>(n), static_cast<size_t>(i))) < 16 / es);
            prev = x;
          }
          CHECK(prev == e);
        }
}

// A builder's input for n ranks in rank order on nch channels without connectors (to
// read the steps it makes), and an in-place sum allreduce of count elements
// of t at base. Built in place: `in` points into it.
struct BuilderFixture {
  coll::ConnectorSet set;
  coll::RingLayout ring;
  coll::BuildInput in;
  coll::OpDesc od{};
  BuilderFixture(int n, int nch, size_t sliceBytes, size_t loopSlices, char* base, size_t count, collDataType_t t) {
    set.channels.resize(static_cast<size_t>(nch));
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    ring = coll::RingLayout(std::move(order), 0);
    in.nranks = n;
    in.ring = &ring;
    in.sliceBytes = sliceBytes;
    in.loopSlices = loopSlices;
    in.minChannels = nch;
    in.channelMinBytes = int64_t{1} << 40;
    in.conns = &set;
    od = sumAllReduce(base, base, count, t);
  }
  BuilderFixture(const BuilderFixture&) = delete;
};

// The ring's pieces and loops are cut on 16 bytes from the buffer's start (alignedCut):
// a step starts on 16 bytes unless it starts a block, and from 64 KiB per block such a
// step is a head of under 16 bytes (ring.cc kHeadPassMinBytes: the rest of the piece
// starts on a vector; without it, the H100 ran 25000003 floats at a tenth of 25000000's
// speed, a piece element by element holding its channel back); every step fits in loopSlices
// slices (the half-FIFO rule: more, and ranks that fill each other's FIFOs deadlock);
// the steps tile the buffer. Unaligned, a GPU slice moves element by element: odd
// counts (most gradient buckets) ran so on all but one channel.
TEST_CASE("ring pieces start on 16 bytes, fit half a FIFO per loop and tile the buffer", "[collectives]") {
  using namespace coll;
  char* const base = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  for (collDataType_t t : {collInt8, collFloat16, collFloat32, collFloat64})
    for (int n : {2, 3})
      for (int nch : {1, 3, 24, 32})
        for (size_t count : {size_t{33}, size_t{4097}, size_t{262147}, size_t{1000003}})
          for (size_t loopSlices : {size_t{2}, size_t{4}}) {
            const size_t es = dataTypeSize(t), sliceBytes = 4096;
            CAPTURE(es, n, nch, count, loopSlices);
            BuilderFixture f(n, nch, sliceBytes, loopSlices, base, count, t);
            std::vector<Program> progs(static_cast<size_t>(nch));
            buildRingAllReduce(f.in, f.od, 0, progs);
            std::vector<size_t> blockStarts;
            for (int k = 0; k < n; ++k)
              blockStarts.push_back(coll::partBegin(count, static_cast<size_t>(n), static_cast<size_t>(k)) * es);
            std::vector<std::pair<size_t, size_t>> spans;
            for (const Program& p : progs)
              for (const Step& st : p.steps) {
                const size_t off = static_cast<size_t>(st.src - base);
                const bool blockStart = std::find(blockStarts.begin(), blockStarts.end(), off) != blockStarts.end();
                if (!blockStart) CHECK(off % 16 == 0);
                else if (off % 16 != 0 && count / static_cast<size_t>(n) * es >= (64 << 10)) CHECK(st.bytes < 16);
                CHECK(st.bytes <= loopSlices * sliceBytes);
                spans.emplace_back(off, st.bytes);
              }
            std::sort(spans.begin(), spans.end());
            spans.erase(std::unique(spans.begin(), spans.end()), spans.end());
            size_t end = 0;
            for (const auto& [off, bytes] : spans) {
              CHECK(off == end);
              end = off + bytes;
            }
            CHECK(end == count * es);
          }
}

// Small device allreduces of 2 ranks exchange their blocks (ring.cc): per channel this
// rank's two block pieces sent (the ring's first block first), then the peer's combined
// with this rank's into the output, one wait instead of the ring's two in a row. Only
// sums, products and averages (whose bits do not depend on the order), only up to
// exchangeMaxBytes and half a loop per block piece (so that no ring of another count
// sends the same sizes), only 2 ranks; the sends tile the buffer. The bits against the
// ring's: the emulated sweep (2 ranks).
TEST_CASE("2-rank device allreduces up to the exchange limit send both blocks and combine once",
          "[collectives][device]") {
  using namespace coll;
  char* const base = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  const uint8_t send = kSrc | kSend, combine = kRecv | kSrc | kDst | kFinal;
  for (int nch : {1, 3})
    for (size_t count : {size_t{2}, size_t{4001}, size_t{6001}})
      for (collRedOp_t op : {collSum, collProd, collAvg, collMax, collMin})
        for (int pos : {0, 1})
          for (int n : {2, 3}) {
            CAPTURE(nch, count, op, pos, n);
            BuilderFixture f(n, nch, 4096, 4, base, count, collFloat32);
            f.od.op = op;
            f.ring = RingLayout(f.ring.order, pos);
            f.in.exchangeMaxBytes = 65536 * 4;
            // A channel's block piece (with 16 bytes of cut slack) within half a loop.
            const size_t blockPiece = ((count + 1) / 2 + static_cast<size_t>(nch) - 1) / static_cast<size_t>(nch) * 4;
            const bool exchange = n == 2 && op != collMax && op != collMin && blockPiece + 16 <= 2 * 4096;
            std::vector<Program> progs(static_cast<size_t>(nch));
            buildRingAllReduce(f.in, f.od, 0, progs);
            size_t sent = 0;
            for (const Program& p : progs) {
              if (p.steps.empty()) continue;
              if (!exchange) {  // the ring: its steps pass blocks on
                CHECK(std::any_of(p.steps.begin(), p.steps.end(),
                                  [&](const Step& st) { return st.flags != send && st.flags != combine; }));
                continue;
              }
              REQUIRE(p.steps.size() <= 4);
              const size_t half = p.steps.size() / 2;
              for (size_t i = 0; i < p.steps.size(); ++i) {
                const Step& st = p.steps[i];
                CHECK(st.flags == (i < half ? send : combine));
                CHECK(st.bytes <= 2 * 4096);  // half a loop of 4 slices
                if (i < half) sent += st.bytes;
                else CHECK(st.src == p.steps[half - 1 - (i - half)].src);  // the peer's order: its own block first
              }
              // The first send is the ring's first: block 1 - pos, after block pos.
              if (half == 2) CHECK((p.steps[0].src > p.steps[1].src) == (pos == 0));
            }
            if (exchange) CHECK(sent == count * 4);
          }
  // Above the limit, or where a block piece exceeds half a loop, the ring.
  for (auto [count, limit] : {std::pair{size_t{65544}, size_t{65536 * 4}}, std::pair{size_t{16400}, size_t{1} << 30}}) {
    CAPTURE(count, limit);
    BuilderFixture f(2, 1, 4096, 4, base, count, collFloat32);
    f.in.exchangeMaxBytes = limit;
    std::vector<Program> progs(1);
    buildRingAllReduce(f.in, f.od, 0, progs);
    REQUIRE(progs[0].steps.size() >= 3);
    CHECK(progs[0].steps[1].flags == (kRecv | kSrc | kDst | kSend | kFinal));
  }
}

// The direct route's reductions start on 16 bytes or are a block's head of under 16: a
// block's first piece starting mid-vector (an odd count) is cut where the vectors begin.
// Without it, the H100 ran 25000003 floats at 165-189 GB/s against 25000000's 238-304.
TEST_CASE("direct reductions start on 16 bytes, a block's head apart, and tile the block", "[collectives][device]") {
  using namespace coll;
  char* const base = reinterpret_cast<char*>(uintptr_t{1} << 20);  // never dereferenced
  for (collDataType_t t : {collInt8, collFloat16, collFloat32, collFloat64})
    for (int n : {2, 3, 5})
      for (int nch : {1, 3, 32})
        for (size_t count : {size_t{33}, size_t{262147}, size_t{1000003}}) {
          const size_t es = dataTypeSize(t);
          CAPTURE(es, n, nch, count);
          BuilderFixture f(n, nch, 4096, 4, base, count, t);
          for (int r = 0; r < n; ++r) {
            f.ring = RingLayout(f.ring.order, r);
            std::vector<Program> progs(static_cast<size_t>(nch));
            buildDirectAllReduce(f.in, f.od, 0, progs);
            size_t end = coll::partBegin(count, static_cast<size_t>(n), static_cast<size_t>(r)) * es;
            const size_t blockEnd = coll::partBegin(count, static_cast<size_t>(n), static_cast<size_t>(r) + 1) * es;
            for (const Program& p : progs)
              for (const Step& st : p.steps) {
                if (!(st.flags & kDirect) || (st.flags & (kSend | kRecv | kToken))) continue;  // addresses, tokens
                const size_t off = static_cast<size_t>(st.src - base);
                CHECK(off == end);    // channel by channel, in order
                if (off % 16 != 0) {  // a head: up to the next vector, or the block's end
                  CHECK(st.bytes < 16);
                  CHECK(((off + st.bytes) % 16 == 0 || off + st.bytes == blockEnd));
                }
                end = off + st.bytes;
              }
            CHECK(end == blockEnd);
          }
        }
}

// A lane that never yields waits for a run of tokens at once, a thread each (device_lane.h
// deviceTokenBatch): the batch takes tokens on distinct connectors, one way each, and stops
// before anything else. Wrong here, a receive would wait beside an earlier one on its
// connector, or a data step would run as a token.
TEST_CASE("device token batches: distinct connectors, one way each, tokens only", "[collectives][device]") {
  using namespace coll;
  auto token = [](int send, int recv) {
    DeviceStep s{};
    s.flags = kToken | (send >= 0 ? kSend : kRecv);
    s.send = static_cast<int8_t>(send);
    s.recv = static_cast<int8_t>(recv);
    return s;
  };
  DeviceStep data = token(0, -1);
  data.flags = kSend | kSrc;
  // A merged lane's two operations (sends, then receives), a data step, a direct barrier
  // (send and receive, round after round), a token both ways.
  std::vector<DeviceStep> steps = {token(0, -1), token(1, -1), token(-1, 2), token(-1, 3), token(0, -1),
                                   token(1, -1), token(-1, 2), token(-1, 3), data,         token(4, -1),
                                   token(-1, 5), token(4, -1), token(-1, 5), token(6, 7)};
  DeviceLane lane{};
  lane.steps = steps.data();
  lane.nsteps = static_cast<uint32_t>(steps.size());
  CHECK(deviceTokenBatchEnd(lane, 0) == 4);
  CHECK(deviceTokenBatchEnd(lane, 4) == 8);
  CHECK(deviceTokenBatchEnd(lane, 8) == 8);  // not a token: the caller runs it as data
  CHECK(deviceTokenBatchEnd(lane, 9) == 11);
  CHECK(deviceTokenBatchEnd(lane, 11) == 13);
  CHECK(deviceTokenBatchEnd(lane, 13) == 13);  // both ways: the leader's serial path
  CHECK(deviceTokenFailed(kDeviceAborted, 0) > kDeviceTokenStopped);
  CHECK(deviceTokenFailed(kDeviceSizeMismatch, 7) > kDeviceTokenStopped);
}

// A small allreduce on 20 device channels leaves 19 of them empty: each carries a token
// each way, and they run in lanes of 8 channels (device_launch.cc mergeTokenLanes), not one lane
// (a thread block) each. The stall report while rank 1 is late lists rank 0's lanes.
TEST_CASE("tokens of channels an operation leaves empty share lanes, 8 channels each (emulated)",
          "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv channels("COLL_DEVICE_NCHANNELS", "20");
  ScopedEnv stall("COLL_STALL_WARN_S", "1");
  testing::CapturedLog captured("token-lanes");
  auto errors = testing::runRanks(2, [&](int rank, collComm_t comm) -> std::string {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    std::vector<float> buf(2, 1.0f);
    if (collAllReduce(buf.data(), buf.data(), buf.size(), collFloat, collSum, comm, nullptr) != collSuccess)
      return std::string("allreduce: ") + collGetLastError(comm);
    return buf[0] == 2.0f ? "" : "sum " + std::to_string(buf[0]);
  });
  for (auto& e : errors) FAIL_CHECK(e);
  const std::string log = captured.text();
  INFO(log);
  CHECK(log.find("stalled") != std::string::npos);
  for (const char* lane : {"tokens of channels 1-8", "tokens of channels 9-16", "tokens of channels 17-19"})
    CHECK(log.find(lane) != std::string::npos);
  CHECK(log.find("channel 5") == std::string::npos);  // not a lane of its own
}

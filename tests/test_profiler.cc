// Profiler plugins (src/profiler, comm/profile.h) against the test plugin built from
// tests/plugins/profiler_plugin.cc once per interface version: two ranks on threads run
// collectives and a send/recv, and the events the plugin recorded are checked for their
// nesting, order and fields.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <map>
#include <string>
#include <vector>

#include "harness.h"
#include "plugins/profiler_record.h"
#include "profiler/profiler_abi.h"

using namespace coll::profabi;
using testing::CapturedLog;
using testing::ScopedEnv;
using testprof::Event;

namespace {

const std::string kDir = COLL_TEST_PLUGIN_DIR;

std::string libPath(const std::string& name) { return kDir + "/libnccl-profiler-" + name + ".so"; }

// The plugin's record, through the library the loader opened (dlopen gives the same one).
const testprof::Log& logOf(const std::string& name) {
  void* lib = dlopen(libPath(name).c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto get = reinterpret_cast<const testprof::Log* (*)()>(dlsym(lib, "testProfilerEvents"));
  REQUIRE(get != nullptr);
  return *get();
}

// Forgets what earlier cases of this process recorded in the plugin.
void reset(const std::string& name) {
  void* lib = dlopen(libPath(name).c_str(), RTLD_NOW);
  REQUIRE(lib != nullptr);
  reinterpret_cast<void (*)()>(dlsym(lib, "testProfilerReset"))();
}

void setMask(const std::string& name, int rank, int mask) {
  void* lib = dlopen(libPath(name).c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto set = reinterpret_cast<void (*)(int, int)>(dlsym(lib, "testProfilerSetMask"));
  set(rank, mask);
}

std::string check(collResult_t r, const char* what) {
  return r == collSuccess ? std::string() : std::string(what) + ": " + collGetLastError(nullptr);
}

constexpr size_t kCount = 40000;  // several slices per channel

// Per rank: an allreduce, a broadcast from rank 1, an allgather, a send/recv pair in a
// group, a second allreduce; every result checked.
std::string workload(int rank, collComm_t comm) {
  std::vector<float> in(kCount, static_cast<float>(rank + 1)), out(kCount * 2, 0.f);
  std::string err = check(collAllReduce(in.data(), out.data(), kCount, collFloat32, collSum, comm, nullptr), "ar");
  if (err.empty() && out[kCount - 1] != 3.f) err = "allreduce result " + std::to_string(out[kCount - 1]);
  if (err.empty()) err = check(collBroadcast(in.data(), out.data(), kCount, collFloat32, 1, comm, nullptr), "bc");
  if (err.empty() && out[0] != 2.f) err = "broadcast result " + std::to_string(out[0]);
  if (err.empty()) err = check(collAllGather(in.data(), out.data(), kCount, collFloat32, comm, nullptr), "ag");
  if (err.empty() && out[2 * kCount - 1] != 2.f) err = "allgather result";
  if (!err.empty()) return err;
  const int peer = 1 - rank;
  collGroupStart();
  collSend(in.data(), 1000, collFloat32, peer, comm, nullptr);
  collRecv(out.data(), 1000, collFloat32, peer, comm, nullptr);
  err = check(collGroupEnd(), "send/recv group");
  if (err.empty() && out[999] != static_cast<float>(peer + 1)) err = "received " + std::to_string(out[999]);
  if (err.empty()) err = check(collAllReduce(in.data(), out.data(), 16, collFloat32, collSum, comm, nullptr), "ar2");
  return err;
}

bool isApi(uint64_t t) { return t == kEvCollApi || t == kEvP2pApi; }

// Every event stopped once, after it started, after its children, before its context's
// finalize; a child starts after its parent (an API event of a grouped call stops when
// the call returns, before its operation runs: only the start is ordered then).
void checkNesting(const testprof::Log& log) {
  REQUIRE(log.misuse.empty());
  std::map<const void*, const Event*> byHandle;
  for (const Event* e : log.events) byHandle[e] = e;
  for (const Event* e : log.events) {
    INFO("event type " << e->type << " rank " << e->rank << " func " << e->func);
    CHECK(e->stopped > e->started);
    CHECK_FALSE(e->afterFinalize);
    for (const void* p : {e->parent, e->parentGroup}) {
      if (!p) continue;
      REQUIRE(byHandle.count(p) == 1);
      const Event* parent = byHandle[p];
      CHECK(parent->started < e->started);
      if (!isApi(parent->type)) CHECK(parent->stopped > e->stopped);
    }
  }
  for (const testprof::Context* c : log.contexts) CHECK(c->finalized);
}

std::vector<const Event*> ofType(const testprof::Log& log, uint64_t type, int rank) {
  std::vector<const Event*> v;
  for (const Event* e : log.events)
    if (e->type == type && e->rank == rank) v.push_back(e);
  return v;
}

const Event* parentOf(const testprof::Log& log, const Event* e) {
  for (const Event* p : log.events)
    if (p == e->parent) return p;
  return nullptr;
}

void checkCollectives(const testprof::Log& log, int version, int rank) {
  INFO("version " << version << " rank " << rank);
  const auto colls = ofType(log, kEvColl, rank);
  REQUIRE(colls.size() == 4);
  const char* funcs[] = {"AllReduce", "Broadcast", "AllGather", "AllReduce"};
  const uint64_t seqs[] = {0, 0, 0, 1};
  const size_t counts[] = {kCount, kCount, kCount, 16};
  for (size_t i = 0; i < colls.size(); ++i) {
    CHECK(colls[i]->func == funcs[i]);
    CHECK(colls[i]->seq == seqs[i]);
    CHECK(colls[i]->count == counts[i]);
    CHECK(colls[i]->datatype == "ncclFloat32");
    CHECK(colls[i]->nChannels >= 1);
    // Allreduces take the tree (COLL_ALGO); the others the one-shot where it serves (LL, one
    // channel) or the ring.
    CHECK(colls[i]->algo == (i == 0 || i == 3 ? "TREE" : "RING"));
    if (i == 0 || i == 3) CHECK(colls[i]->proto == "SIMPLE");
    else CHECK((colls[i]->proto == "SIMPLE" || (colls[i]->proto == "LL" && colls[i]->nChannels == 1)));
    // v5 on: under its CollApi event, the Group in parentGroup; before: under the Group.
    const Event* parent = parentOf(log, colls[i]);
    REQUIRE(parent != nullptr);
    CHECK(parent->type == (version >= 5 ? kEvCollApi : kEvGroup));
    if (version >= 5) CHECK(parent->func == funcs[i]);
  }
  CHECK(colls[1]->root == 1);
  const auto p2ps = ofType(log, kEvP2p, rank);
  REQUIRE(p2ps.size() == 2);
  CHECK(p2ps[0]->func == "Send");
  CHECK(p2ps[1]->func == "Recv");
  for (const Event* p : p2ps) {
    CHECK(p->root == 1 - rank);
    CHECK(p->count == 1000);
    CHECK(p->datatype == "ncclFloat32");
  }
}

// The host lanes' events: a ProxyOp per direction under its operation, as many ProxySteps
// as it announced, each through its states; KernelCh from version 3.
void checkLanes(const testprof::Log& log, int version, int rank) {
  INFO("version " << version << " rank " << rank);
  const auto ops = ofType(log, kEvProxyOp, rank);
  REQUIRE_FALSE(ops.empty());
  for (const Event* op : ops) {
    const Event* task = parentOf(log, op);
    REQUIRE(task != nullptr);
    CHECK((task->type == kEvColl || task->type == kEvP2p));
    CHECK(op->root == 1 - rank);
    int steps = 0;
    for (const Event* s : log.events)
      if (s->parent == op) {
        CHECK(s->type == kEvProxyStep);
        CHECK(s->step == steps);
        const int done = op->isSend ? kStProxyStepSendWait : kStProxyStepRecvGpuWait;
        CHECK(s->states.back() == done);
        ++steps;
      }
    CHECK(steps == op->nSteps);
  }
  const auto kernels = ofType(log, kEvKernelCh, rank);
  if (version < 3) {
    CHECK(kernels.empty());
    return;
  }
  for (const Event* k : kernels) {
    const Event* task = parentOf(log, k);
    REQUIRE(task != nullptr);
    CHECK((task->type == kEvColl || task->type == kEvP2p));
    if (version >= 4) CHECK(k->states == std::vector<int>{kStKernelChStop});
  }
  CHECK(kernels.size() >= 4);  // the allreduces and the send/recv ran on lanes
}

void checkApi(const testprof::Log& log, int rank) {
  const auto groups = ofType(log, kEvGroupApi, rank);
  REQUIRE(groups.size() == 5);  // four implicit groups, one explicit
  CHECK(groups[0]->groupDepth == 1);
  CHECK(groups[3]->groupDepth == 2);
  CHECK(groups[3]->states == std::vector<int>{kStGroupStartApiStop, kStGroupEndApiStart});
  const auto p2p = ofType(log, kEvP2pApi, rank);
  REQUIRE(p2p.size() == 2);
  CHECK(p2p[0]->parent == groups[3]);
  CHECK(p2p[1]->func == "Recv");
}

}  // namespace

TEST_CASE("profiler: every version sees the operations of two ranks") {
  ScopedEnv algo("COLL_ALGO", "allreduce:tree");
  for (int v = 1; v <= 6; ++v) {
    const std::string name = "testv" + std::to_string(v);
    reset(name);
    ScopedEnv plugin("NCCL_PROFILER_PLUGIN", libPath(name).c_str());
    const auto errors = testing::runRanks(2, workload);
    INFO("version " << v);
    REQUIRE(errors.empty());
    const testprof::Log& log = logOf(name);
    REQUIRE(log.version == v);
    REQUIRE(log.contexts.size() == 2);
    checkNesting(log);
    for (int rank = 0; rank < 2; ++rank) {
      checkCollectives(log, v, rank);
      checkLanes(log, v, rank);
      if (v >= 5) checkApi(log, rank);
      else CHECK(ofType(log, kEvGroupApi, rank).empty());
    }
    if (v >= 4) {
      CHECK(log.contexts[0]->commHash == log.contexts[1]->commHash);
      CHECK(log.contexts[0]->nranks == 2);
    } else {
      const Event* coll = ofType(log, kEvColl, 0).front();
      CHECK(coll->commHash != 0);
    }
  }
}

TEST_CASE("profiler: a per-call algorithm shows in the collective event") {
  reset("testv6");
  ScopedEnv plugin("NCCL_PROFILER_PLUGIN", "testv6");  // a bare name: libnccl-profiler-testv6.so
  const auto errors = testing::runRanks(2, [](int, collComm_t comm) -> std::string {
    std::vector<float> in(4096, 1.f), out(4096);
    collCollConfig_t cfg = COLL_COLLCONFIG_INITIALIZER;
    cfg.algSelection = "tree";
    std::string err = check(collAllReduceConfig(in.data(), out.data(), 4096, collFloat32, collSum, comm, nullptr, &cfg),
                            "allreduce with a config");
    if (err.empty() && out[0] != 2.f) err = "result " + std::to_string(out[0]);
    return err;
  });
  REQUIRE(errors.empty());
  const testprof::Log& log = logOf("testv6");
  checkNesting(log);
  for (int rank = 0; rank < 2; ++rank) {
    const auto colls = ofType(log, kEvColl, rank);
    REQUIRE(colls.size() == 1);
    CHECK(colls[0]->algo == "TREE");
    CHECK(colls[0]->func == "AllReduce");
  }
}

TEST_CASE("profiler: the activation mask selects events and may change") {
  reset("testv6");
  ScopedEnv plugin("NCCL_PROFILER_PLUGIN", libPath("testv6").c_str());
  ScopedEnv mask("COLL_TEST_PROFILER_MASK", "0x2");  // Coll only
  const auto errors = testing::runRanks(2, [](int rank, collComm_t comm) -> std::string {
    std::vector<float> in(1000, 1.f), out(1000);
    std::string err = check(collAllReduce(in.data(), out.data(), 1000, collFloat32, collSum, comm, nullptr), "ar");
    setMask("testv6", rank, 0);
    if (err.empty()) err = check(collAllReduce(in.data(), out.data(), 1000, collFloat32, collSum, comm, nullptr), "ar");
    if (err.empty() && out[0] != 2.f) err = "result " + std::to_string(out[0]);
    return err;
  });
  REQUIRE(errors.empty());
  const testprof::Log& log = logOf("testv6");
  checkNesting(log);
  // The first allreduce's Coll event and its parents (started, as NCCL does, for what is
  // wanted below them); nothing of the second.
  std::map<uint64_t, int> types;
  for (const Event* e : log.events) ++types[e->type];
  CHECK(types == std::map<uint64_t, int>{{kEvGroupApi, 2}, {kEvCollApi, 2}, {kEvGroup, 2}, {kEvColl, 2}});
}

TEST_CASE("profiler: plugins that fail or are missing leave the job working") {
  struct Broken {
    const char* spec;
    const char* logged;
  };
  for (const Broken& b :
       {Broken{"testfail", "init failed with error 3"}, Broken{"testnull", "has no recordEventState function"},
        Broken{"testnone", "exports none of ncclProfiler_v6"}, Broken{"nosuchplugin", "no profiler plugin"}}) {
    INFO(b.spec);
    std::vector<std::string> errors;
    int logged = 0;
    {
      ScopedEnv debug("COLL_DEBUG", "INFO");
      CapturedLog captured(std::string("profiler_") + b.spec);
      ScopedEnv plugin("NCCL_PROFILER_PLUGIN", b.spec);
      errors = testing::runRanks(2, [](int, collComm_t comm) -> std::string {
        std::vector<float> in(100, 1.f), out(100);
        std::string err = check(collAllReduce(in.data(), out.data(), 100, collFloat32, collSum, comm, nullptr), "ar");
        return err.empty() && out[0] != 2.f ? "result " + std::to_string(out[0]) : err;
      });
      logged = captured.count(b.logged);
    }
    collResetDebugInit();  // COLL_DEBUG as it was
    REQUIRE(errors.empty());
    CHECK(logged >= 1);
  }
}

TEST_CASE("profiler: device launches report their kernel and channels") {
  reset("testv6");
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");  // the device path on host threads
  ScopedEnv plugin("NCCL_PROFILER_PLUGIN", libPath("testv6").c_str());
  const auto errors = testing::runRanks(2, [](int, collComm_t comm) -> std::string {
    std::vector<float> in(5000, 1.f), out(5000);
    std::string err;
    for (int i = 0; i < 2 && err.empty(); ++i)  // the second launch reuses the first's plan
      err = check(collAllReduce(in.data(), out.data(), 5000, collFloat32, collSum, comm, nullptr), "ar");
    return err.empty() && out[4999] != 2.f ? "result " + std::to_string(out[4999]) : err;
  });
  REQUIRE(errors.empty());
  const testprof::Log& log = logOf("testv6");
  checkNesting(log);
  for (int rank = 0; rank < 2; ++rank) {
    const auto colls = ofType(log, kEvColl, rank);
    REQUIRE(colls.size() == 2);
    CHECK(colls[0]->nChannels == colls[1]->nChannels);
    for (const Event* c : colls) {
      int channels = 0;
      for (const Event* k : ofType(log, kEvKernelCh, rank)) channels += k->parent == c;
      CHECK(channels == c->nChannels);
    }
    const auto launches = ofType(log, kEvKernelLaunch, rank);
    const auto groups = ofType(log, kEvGroupApi, rank);
    REQUIRE(launches.size() == 2);
    REQUIRE(groups.size() == 2);
    CHECK(launches[0]->parent == groups[0]);
  }
}

// One library carrying a profiler, a tuner and an env plugin, as NCCL allows: named as the
// tuner, or found as the net plugin's library, its tuner's choice (the tree, one channel)
// is what its profiler sees run.
TEST_CASE("profiler: a library of every kind shows its own tuner's choice running") {
  const std::string lib = libPath("mixed");
  ScopedEnv prof("NCCL_PROFILER_PLUGIN", lib.c_str());
  ScopedEnv mode("TEST_TUNER_MODE", "tree");
  ScopedEnv direct("COLL_DIRECT", "0");  // 4 MiB: past the one-shot, on the ring or the tree
  for (const char* var : {"NCCL_TUNER_PLUGIN", "NCCL_NET_PLUGIN"}) {
    DYNAMIC_SECTION(var) {
      reset("mixed");
      ScopedEnv tuner(var, lib.c_str());
      const auto errors = testing::runRanks(2, [](int, collComm_t comm) -> std::string {
        std::vector<float> in(1 << 20, 1.f), out(1 << 20);
        std::string err = check(collAllReduce(in.data(), out.data(), in.size(), collFloat32, collSum, comm, nullptr),
                                "allreduce");
        return err.empty() && out.back() != 2.f ? "result " + std::to_string(out.back()) : err;
      });
      REQUIRE(errors.empty());
      const testprof::Log& log = logOf("mixed");
      for (int rank = 0; rank < 2; ++rank) {
        const auto colls = ofType(log, kEvColl, rank);
        REQUIRE(colls.size() == 1);
        CHECK(colls[0]->algo == "TREE");
        CHECK(colls[0]->nChannels == 1);
      }
    }
  }
}

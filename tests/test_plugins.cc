// NCCL's tuner and env plugins, against the test plugins of tests/plugins/ (built once per
// ABI version into COLL_TEST_PLUGIN_DIR).
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/env_plugin.h"
#include "base/param.h"
#include "harness.h"
#include "plugins/plugin_records.h"

using testing::CapturedLog;
using testing::ScopedEnv;

namespace {

const std::string kDir = COLL_TEST_PLUGIN_DIR;

template <typename T>
T* recordOf(const std::string& lib, const char* accessor) {
  void* dl = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);  // the loader's handle, counted once more
  REQUIRE(dl != nullptr);
  auto fn = reinterpret_cast<T* (*)()>(dlsym(dl, accessor));
  REQUIRE(fn != nullptr);
  return fn();
}

// An allreduce of `count` floats on 2 ranks (threads); each checks the sum. Operations
// beyond COLL_ONESHOT_BYTES take the ring or the tree (not the peers' buffers directly).
void allReduceOnTwo(size_t count) {
  ScopedEnv direct("COLL_DIRECT", "0");
  auto errors = testing::runRanks(2, [&](int rank, collComm_t comm) -> std::string {
    std::vector<float> in(count, static_cast<float>(rank + 1)), out(count, 0.0f);
    if (collAllReduce(in.data(), out.data(), count, collFloat32, collSum, comm, nullptr) != collSuccess)
      return collGetLastError(comm);
    for (size_t i = 0; i < count; ++i)
      if (out[i] != 3.0f) return "element " + std::to_string(i) + " is " + std::to_string(out[i]);
    return "";
  });
  INFO((errors.empty() ? std::string() : errors[0]));
  REQUIRE(errors.empty());
}

std::string tunerLib(int v) { return kDir + "/libnccl-tuner-test" + std::to_string(v) + ".so"; }

}  // namespace

TEST_CASE("tuner plugin: every ABI version sees our costs and its choice runs", "[plugin][tuner]") {
  ScopedEnv debug("COLL_DEBUG", "INFO");
  ScopedEnv subsys("COLL_DEBUG_SUBSYS", "TUNING");
  ScopedEnv mode("TEST_TUNER_MODE", "tree");
  for (int v = 2; v <= 7; ++v) {
    DYNAMIC_SECTION("version " << v) {
      const std::string lib = tunerLib(v);
      ScopedEnv plugin("NCCL_TUNER_PLUGIN", lib.c_str());
      CapturedLog log("tuner" + std::to_string(v));
      allReduceOnTwo(1 << 20);  // 4 MiB: past the one-shot, where our model picks the ring
      TunerRecord* rec = recordOf<TunerRecord>(lib, "testTunerRecord");
      INFO(log.text());
      CHECK(log.count("tuner plugin TestTuner" + std::to_string(v) + " loaded") == 1);
      CHECK(rec->inits == 2);
      CHECK(rec->finalizes == 2);
      CHECK(rec->nRanks == 2);
      CHECK(rec->nNodes == 1);
      CHECK(rec->calls == 2);
      CHECK(rec->lastFunc == 4);  // ncclFuncAllReduce
      CHECK(rec->lastBytes == size_t{4} << 20);
      CHECK(rec->lastPipeOps == 1);
      if (v >= 3) {
        CHECK(rec->ringSimple > 0);
        CHECK(rec->treeSimple > rec->ringSimple);  // our model: the ring is cheaper here
        CHECK(rec->ringLL == -1.0f);               // the one-shot cannot serve 4 MiB
        CHECK(rec->nvlsSimple == -1.0f);
      }
      if (v >= 5) {
        CHECK(rec->commId != 0);
        CHECK(rec->hopUs == 1.0);  // COLL_TUNER_HOP_US's default
      }
      CHECK(rec->chunkCalls == (v >= 6 ? 2 : 0));
      const std::string chosen = "-> Tree/Simple, 1 channel(s), chunk " + std::string(v >= 6 ? "4096" : "0");
      CHECK(log.count(chosen) == 2);
    }
  }
}

TEST_CASE("tuner plugin: COLL_ALGO and entries we cannot run override it", "[plugin][tuner]") {
  ScopedEnv debug("COLL_DEBUG", "INFO");
  ScopedEnv subsys("COLL_DEBUG_SUBSYS", "TUNING");
  const std::string lib = tunerLib(4);
  ScopedEnv plugin("NCCL_TUNER_PLUGIN", lib.c_str());
  SECTION("COLL_ALGO rules the plugin's choice out") {
    ScopedEnv mode("TEST_TUNER_MODE", "tree");
    ScopedEnv algo("COLL_ALGO", "allreduce:ring");
    CapturedLog log("tuner-algo");
    allReduceOnTwo(1 << 20);
    INFO(log.text());
    CHECK(recordOf<TunerRecord>(lib, "testTunerRecord")->treeSimple == -1.0f);
    CHECK(log.count("-> Ring/Simple, 1 channel(s)") == 2);
  }
  SECTION("a cost on NVLS, which we lack, changes nothing") {
    ScopedEnv mode("TEST_TUNER_MODE", "nvls");
    CapturedLog log("tuner-nvls");
    allReduceOnTwo(1 << 20);
    INFO(log.text());
    CHECK(log.count("-> Ring/Simple, 0 channel(s)") == 2);
  }
  SECTION("a table left as it was keeps the one-shot for a small allreduce") {
    CapturedLog log("tuner-small");
    allReduceOnTwo(16);
    INFO(log.text());
    CHECK(log.count("-> Ring/LL, 0 channel(s)") == 2);
  }
}

TEST_CASE("tuner plugin: a failing or unusable plugin leaves the job working with a warning", "[plugin][tuner]") {
  struct Case {
    std::string spec, mode, warning;
  };
  const std::vector<Case> cases = {
      {tunerLib(5), "failinit", "tuner plugin TestTuner5 (" + tunerLib(5) + "): init returned error 3"},
      {tunerLib(3), "failcall",
       "tuner plugin TestTuner3: getCollInfo returned error 3 for collAllReduce of 4194304 bytes"},
      {tunerLib(0), "", "ncclTunerPlugin_v6 leaves getCollInfo null; tuning without a plugin"},
      {kDir + "/libnccl-tuner-missing.so", "", "cannot load tuner plugin"},
      {"none", "tree", ""},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.spec << " " << c.mode) {
      ScopedEnv plugin("NCCL_TUNER_PLUGIN", c.spec.c_str());
      ScopedEnv mode("TEST_TUNER_MODE", c.mode.c_str());
      CapturedLog log("tuner-bad");
      allReduceOnTwo(1 << 20);
      INFO(log.text());
      if (c.warning.empty()) CHECK(log.count("WARN") == 0);
      else CHECK(log.count(c.warning) >= 1);
    }
  }
}

// The env plugin is chosen at the first parameter read of a process: CTest runs each case
// in a process of its own.
namespace {

void checkEnvPlugin(int version) {
  const std::string lib = kDir + "/libnccl-env-test" + std::to_string(version) + ".so";
  ScopedEnv plugin("NCCL_ENV_PLUGIN", lib.c_str());
  ScopedEnv served("TESTENV_NCCL_ALGO", "allreduce:tree");
  ScopedEnv own("NCCL_ALGO", "ring");
  if (coll::envPluginVersion() == 0 && coll::param(coll::StringParam::ALGO) == "ring") {
    WARN("skipped: the env plugin is chosen at a process's first parameter read; run this case alone");
    return;
  }
  EnvRecord* rec = recordOf<EnvRecord>(lib, "testEnvRecord");
  CHECK(coll::envPluginVersion() == version);
  CHECK(std::string(coll::envPluginName()) == "TestEnv" + std::to_string(version));
  CHECK(rec->inits == 1);
  CHECK(rec->major == 2);
  CHECK(rec->minor == 32);
  CHECK(rec->patch == 3);
  CHECK(rec->gotLogger == (version >= 2));
  CHECK(coll::param(coll::StringParam::ALGO) == "allreduce:tree");  // the plugin's value wins
  ScopedEnv debug("COLL_DEBUG", "INFO");
  ScopedEnv subsys("COLL_DEBUG_SUBSYS", "TUNING");
  CapturedLog log("env" + std::to_string(version));
  const int before = rec->lookups;
  allReduceOnTwo(1 << 20);
  INFO(log.text());
  CHECK(log.count("-> Tree/Simple") == 2);
  CHECK(rec->lookups > before);
}

}  // namespace

TEST_CASE("env plugin: version 2 serves every parameter", "[plugin][env]") { checkEnvPlugin(2); }
TEST_CASE("env plugin: version 1 serves every parameter", "[plugin][env]") { checkEnvPlugin(1); }

TEST_CASE("env plugin: one whose init fails leaves the process environment in charge", "[plugin][env]") {
  const std::string lib = kDir + "/libnccl-env-test0.so";
  ScopedEnv plugin("NCCL_ENV_PLUGIN", lib.c_str());
  ScopedEnv served("TESTENV_NCCL_ALGO", "allreduce:tree");
  ScopedEnv own("NCCL_ALGO", "ring");
  CapturedLog log("env-broken");
  CHECK(coll::envPluginVersion() == 0);
  CHECK(coll::param(coll::StringParam::ALGO) == "ring");
  allReduceOnTwo(64);
  INFO(log.text());
  if (recordOf<EnvRecord>(lib, "testEnvRecord")->inits == 0) {
    WARN("skipped: the env plugin is chosen at a process's first parameter read; run this case alone");
    return;
  }
  CHECK(log.count("env plugin " + lib + ": its init returned error 3; parameters come from the process environment") ==
        1);
}

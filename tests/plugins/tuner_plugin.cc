// A test tuner plugin (NCCL's tuner ABI, algorithms/tuner_plugin_abi.h), built once per
// version: TEST_TUNER_VERSION=N exports ncclTunerPlugin_vN only. What it does is set by
// TEST_TUNER_MODE, read at each call:
//   tree      Tree/Simple costs 0 (version 2: names Tree and Simple), 1 channel, and from
//             version 6 a chunk of 4096 bytes;
//   nvls      costs 0 on NVLS/Simple, an entry the library cannot run;
//   failinit  init fails;  failcall  getCollInfo fails;
//   (unset)   changes nothing.
// It records what it saw for the test (testTunerRecord, found with dlsym).
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "algorithms/tuner_plugin_abi.h"
#include "plugin_records.h"

using namespace coll::tunerabi;

namespace {

TunerRecord rec;
std::mutex mu;

bool mode(const char* m) {
  const char* v = std::getenv("TEST_TUNER_MODE");
  return v && std::strcmp(v, m) == 0;
}

int initCommon(size_t nRanks, size_t nNodes, void** ctx) {
  std::lock_guard<std::mutex> lock(mu);
  if (mode("failinit")) return 3;
  ++rec.inits;
  rec.nRanks = nRanks;
  rec.nNodes = nNodes;
  *ctx = &rec;
  return 0;
}

int initOld(size_t nRanks, size_t nNodes, Logger log, void** ctx) {
  if (log) log(3, 0x40, __FILE__, __LINE__, "test tuner: init for %zu ranks", nRanks);
  return initCommon(nRanks, nNodes, ctx);
}

template <typename K>
int initNew(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, Logger, NvlDomains*, K* k) {
  int r = initCommon(nRanks, nNodes, ctx);
  std::lock_guard<std::mutex> lock(mu);
  rec.commId = commId;
  rec.hopUs = k->hwLatencies[kLinkPci][kAlgoRing][kProtoSimple];
  return r;
}

int costs(void* ctx, int func, size_t bytes, int pipeOps, float** costTable, int, int, int, int* nChannels) {
  auto table = reinterpret_cast<float(*)[kTableProtos]>(costTable);
  std::lock_guard<std::mutex> lock(mu);
  if (ctx != &rec) return 4;
  ++rec.calls;
  rec.lastFunc = func;
  rec.lastBytes = bytes;
  rec.lastPipeOps = pipeOps;
  rec.ringSimple = table[kAlgoRing][kProtoSimple];
  rec.treeSimple = table[kAlgoTree][kProtoSimple];
  rec.ringLL = table[kAlgoRing][kProtoLL];
  rec.nvlsSimple = table[4][kProtoSimple];
  if (mode("failcall")) return 3;
  if (mode("tree")) {
    if (table[kAlgoTree][kProtoSimple] != kIgnore) table[kAlgoTree][kProtoSimple] = 0;
    *nChannels = 1;
  }
  if (mode("nvls")) table[4][kProtoSimple] = 0;
  return 0;
}

int costsV3(void* ctx, int func, size_t bytes, int pipeOps, float** t, int na, int np, int* nch) {
  return costs(ctx, func, bytes, pipeOps, t, na, np, 0, nch);
}

int choiceV2(void* ctx, int func, size_t bytes, int, int, int pipeOps, int* algo, int* proto, int* nch) {
  float table[kTableAlgos][kTableProtos];
  for (auto& row : table)
    for (float& v : row) v = 1;
  int r = costs(ctx, func, bytes, pipeOps, reinterpret_cast<float**>(table), kTableAlgos, kTableProtos, 0, nch);
  if (r == 0 && mode("tree")) {
    *algo = kAlgoTree;
    *proto = kProtoSimple;
  }
  return r;
}

int chunk(void* ctx, int, size_t, int, int, int, size_t* chunkSize) {
  std::lock_guard<std::mutex> lock(mu);
  if (ctx != &rec) return 4;
  ++rec.chunkCalls;
  if (mode("tree")) *chunkSize = 4096;
  return 0;
}

int finish(void* ctx) {
  std::lock_guard<std::mutex> lock(mu);
  if (ctx != &rec) return 4;
  ++rec.finalizes;
  return 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) TunerRecord* testTunerRecord() { return &rec; }

#if TEST_TUNER_VERSION == 2
__attribute__((visibility("default"))) TunerV2 ncclTunerPlugin_v2 = {"TestTuner2", initOld, choiceV2, finish};
#elif TEST_TUNER_VERSION == 3
__attribute__((visibility("default"))) TunerV3 ncclTunerPlugin_v3 = {"TestTuner3", initOld, costsV3, finish};
#elif TEST_TUNER_VERSION == 4
__attribute__((visibility("default"))) TunerV4 ncclTunerPlugin_v4 = {"TestTuner4", initOld, costs, finish};
#elif TEST_TUNER_VERSION == 5
__attribute__((visibility("default"))) TunerV5 ncclTunerPlugin_v5 = {"TestTuner5", initNew<ConstantsV5>, costs, finish};
#elif TEST_TUNER_VERSION == 6
__attribute__((visibility("default")))
TunerV6 ncclTunerPlugin_v6 = {"TestTuner6", initNew<ConstantsV5>, costs, finish, chunk};
#elif TEST_TUNER_VERSION == 7
__attribute__((visibility("default")))
TunerV7 ncclTunerPlugin_v7 = {"TestTuner7", initNew<ConstantsV7>, costs, finish, chunk};
#elif TEST_TUNER_VERSION == 0
// A table with a null member: the loader refuses it.
__attribute__((visibility("default")))
TunerV6 ncclTunerPlugin_v6 = {"TestTunerBroken", initNew<ConstantsV5>, nullptr, finish, chunk};
#endif
}

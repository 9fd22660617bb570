// The binary interface of NCCL's tuner plugins, as our own declarations.
//
// A tuner plugin is a shared library exporting a table `ncclTunerPlugin_v<N>` (a name and
// C function pointers); NCCL tries the newest version it knows first. We read versions 2
// to 7. NCCL's headers (src/include/plugin/tuner/tuner_v*.h, nccl_tuner.h,
// nccl_common.h) are the authority for every layout here: field order and types match
// them exactly, names are ours. This header is also compiled into the test plugins
// (tests/plugins), so it holds plain declarations only.
//
// The cost table (versions 3 on): a row-major float[kTableAlgos][kTableProtos] of
// predicted microseconds, passed as float**; an entry of kIgnore is an algorithm and
// protocol that cannot or may not serve the operation. The plugin may lower or raise
// entries; the smallest that is not kIgnore wins. Version 2 names its algorithm and
// protocol instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll::tunerabi {

// ncclDebugLogger_t.
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// NCCL's algorithm and protocol numbers (the cost table's indices).
constexpr int kAlgoTree = 0, kAlgoRing = 1, kTableAlgos = 7;  // also CollNet x2, NVLS x2, PAT
constexpr int kProtoLL = 0, kProtoLL128 = 1, kProtoSimple = 2, kTableProtos = 3;
constexpr float kIgnore = -1.0f;

// ncclFunc_t.
enum Func : int {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
  kFuncSendRecv = 5,
  kFuncSend = 6,
  kFuncRecv = 7,
};

// Versions 5 on: NVLink domains (we report one domain per host).
struct NvlDomains {
  int domains;
  int minRanksPerDomain;
  int maxRanksPerDomain;
};

// Versions 5 and 6: NCCL's model constants, which the plugin may change at init. Links:
// 0 NVLink, 1 PCI, 2 network; compute capabilities: Volta, Ampere, Hopper, Blackwell
// (version 7 adds a fifth); scales: 1, 2, 4 nodes.
template <int Compcaps>
struct Constants {
  double baseLatencies[kTableAlgos][kTableProtos];
  double hwLatencies[3][kTableAlgos][kTableProtos];
  double llMaxBws[Compcaps][3];
  double perChMaxRingLL128Bws[Compcaps][3];
  double perChMaxTreeLL128Bws[Compcaps][3];
  double perChMaxTreeBws[Compcaps][3];
  double perChMaxNVLSTreeBws[Compcaps][3];
};
using ConstantsV5 = Constants<4>;
using ConstantsV7 = Constants<5>;
constexpr int kLinkNvlink = 0, kLinkPci = 1, kLinkNet = 2;

struct TunerV2 {
  const char* name;
  int (*init)(size_t nRanks, size_t nNodes, Logger log, void** context);
  int (*getCollInfo)(void* context, int func, size_t bytes, int collNetSupport, int nvlsSupport, int numPipeOps,
                     int* algorithm, int* protocol, int* nChannels);
  int (*destroy)(void* context);
};

struct TunerV3 {
  const char* name;
  int (*init)(size_t nRanks, size_t nNodes, Logger log, void** context);
  int (*getCollInfo)(void* context, int func, size_t bytes, int numPipeOps, float** costTable, int numAlgo,
                     int numProto, int* nChannels);
  int (*destroy)(void* context);
};

// Version 4: version 3 with regBuff (whether the user buffers are registered).
struct TunerV4 {
  const char* name;
  int (*init)(size_t nRanks, size_t nNodes, Logger log, void** context);
  int (*getCollInfo)(void* context, int func, size_t bytes, int numPipeOps, float** costTable, int numAlgo,
                     int numProto, int regBuff, int* nChannels);
  int (*destroy)(void* context);
};

using GetCollInfo = int (*)(void* context, int func, size_t bytes, int numPipeOps, float** costTable, int numAlgo,
                            int numProto, int regBuff, int* nChannels);
// Versions 6 on, optional (may be null): the chunk size, in bytes, for the chosen
// algorithm, protocol and channels.
using GetChunkSize = int (*)(void* context, int func, size_t bytes, int algo, int proto, int nChannels,
                             size_t* chunkSize);

struct TunerV5 {
  const char* name;
  int (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes, Logger log, NvlDomains* nvl,
              ConstantsV5* constants);
  GetCollInfo getCollInfo;
  int (*finalize)(void* context);
};

struct TunerV6 {
  const char* name;
  int (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes, Logger log, NvlDomains* nvl,
              ConstantsV5* constants);
  GetCollInfo getCollInfo;
  int (*finalize)(void* context);
  GetChunkSize getChunkSize;
};

struct TunerV7 {
  const char* name;
  int (*init)(void** context, uint64_t commId, size_t nRanks, size_t nNodes, Logger log, NvlDomains* nvl,
              ConstantsV7* constants);
  GetCollInfo getCollInfo;
  int (*finalize)(void* context);
  GetChunkSize getChunkSize;
};

}  // namespace coll::tunerabi

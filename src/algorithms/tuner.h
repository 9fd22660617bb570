// The tuner: which algorithm and protocol serve an operation, from a cost model.
//
// Algorithms (NCCL's names): Ring — ring allreduce / reduce-scatter / allgather and the
// ring-ordered chains of broadcast and reduce; Tree — the double binary trees with chains
// inside hosts (tree.cc), for allreduce. Protocols: LL — the low-latency one-shot
// protocol (flag and data in one cache line, one pass: oneshot.h), for operations up to
// COLL_ONESHOT_BYTES on one host and allreduce up to COLL_NET_ONESHOT_BYTES across hosts;
// Simple — FIFO slices, any size.
//
// Predicted time = latency + bytes / bandwidth for every (algorithm, protocol) that can
// serve the operation; LL wins wherever it applies and is allowed (measured faster at
// every size it serves), otherwise the smallest prediction. With n ranks on h hosts, r ranks on the largest
// host, a hop costing L (inside a host) or L' (between hosts) and bandwidths B / B':
//   Ring Simple allreduce  2(n-1) hops x (L' over net else L) + 2(n-1)/n x bytes / (B' or B)
//   Ring LL allreduce      one host: LL latency + bytes / B (mailboxes, or peers' buffers read
//                          directly: no FIFO copy; measured faster wherever it applies)
//                          hosts:    (n-1) hops x L' + (n-1) x bytes / B'
//   Tree Simple allreduce  2 x (ceil(log2 h) x L' + (r-1) x L) + 2 x bytes / (B' or B)
//                          (an inner rank takes in two children's data per slice)
// Other collectives: Ring (Simple or LL), latency (n-1) hops. `bytes` is always the whole
// buffer: the output of allgather, the input of reduce-scatter (nccl-tests' size). L, L', B, B' and the LL
// latency are parameters (COLL_TUNER_*), set to what was measured on 2-core machines
// (docs/PERFORMANCE.md): every rank must use the same values, so they are not probed.
//
// COLL_ALGO / COLL_PROTO filter the candidates in NCCL's syntax: "Ring,Tree",
// "^Tree" (all but), and per collective "allreduce:tree;broadcast:ring"; names are not
// case sensitive. A filter that leaves an operation nothing gives a clear error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/status.h"

namespace coll {

enum class Algo : int { kRing = 0, kTree = 1 };
// kOneShot: every rank hands its whole contribution to every peer at once (oneshot.h);
// not NCCL's LL protocol, but where users name protocols (COLL_PROTO/NCCL_PROTO, logs) it
// answers to "LL", the name NCCL's filter gives its small-message protocol.
enum class Proto : int { kOneShot = 0, kSimple = 1 };
constexpr int kNumAlgos = 2, kNumProtos = 2, kNumKinds = 7;
const char* algoName(Algo a);
const char* protoName(Proto p);

// Bit (kind * 4 + index) set: allowed. All bits set means no filter.
using AllowMask = uint64_t;
Result<AllowMask> parseAlgoFilter(const std::string& spec);
Result<AllowMask> parseProtoFilter(const std::string& spec);
inline bool allowed(AllowMask m, CollKind k, int index) { return (m >> (static_cast<int>(k) * 4 + index)) & 1; }

struct TunerInput {
  int nranks = 1;
  int hosts = 1;
  int maxRanksPerHost = 1;
  int minRanksPerHost = 1;
  bool overNet = false;   // some ring hop crosses the net (hosts > 1, or COLL_SHM_DISABLE)
  bool intraNet = false;  // hops inside a host use the net too (COLL_SHM_DISABLE)
  // The LL protocol's size limits, for callers that pass oneShotApplies = -1 (colltopo); at run
  // time the communicator knows exactly where LL applies (oneShotEligible) and says so.
  size_t oneShotMaxBytes = 0;     // on one host (0: none)
  size_t netOneShotMaxBytes = 0;  // across hosts, allreduce only
  bool treeAvailable = true;
  AllowMask algos = ~AllowMask{0};
  AllowMask protos = ~AllowMask{0};
  // Model constants (COLL_TUNER_*).
  double hopUs = 1.0, netHopUs = 7.0, oneShotUs = 0.25;
  double bwGBs = 10.0, netBwGBs = 3.0;
};

// Fills the model constants and filters from the parameters.
Status tunerInputFromParams(TunerInput* in);

struct Choice {
  Algo algo;
  Proto proto;
  double us;  // predicted
};

// Every candidate the filters allow, with its predicted time (smallest first). oneShotApplies:
// whether the one-shot protocol can serve this operation (-1: judge by the size limits).
std::vector<Choice> tunerCandidates(const TunerInput& in, CollKind kind, size_t bytes, int oneShotApplies = -1);
// The winner; an error naming the filters when none is allowed.
Result<Choice> tunerChoose(const TunerInput& in, CollKind kind, size_t bytes, int oneShotApplies = -1);

}  // namespace coll

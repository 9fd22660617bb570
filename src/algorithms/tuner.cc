#include "algorithms/tuner.h"

#include <strings.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/param.h"

namespace coll {

const char* algoName(Algo a) { return a == Algo::kRing ? "Ring" : "Tree"; }
const char* protoName(Proto p) { return p == Proto::kOneShot ? "LL" : "Simple"; }

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(s.begin());
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    size_t e = s.find(sep, b);
    out.push_back(trim(s.substr(b, e == std::string::npos ? std::string::npos : e - b)));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

int kindIndex(const std::string& name) {
  static const char* names[kNumKinds] = {"allreduce",     "broadcast", "reduce", "allgather",
                                         "reducescatter", "send",      "recv"};
  for (int k = 0; k < kNumKinds; ++k)
    if (strcasecmp(name.c_str(), names[k]) == 0) return k;
  return -1;
}

// "Ring,Tree" / "^Tree" / "allreduce:tree;broadcast:ring" -> mask over kinds x names.
Result<AllowMask> parseFilter(const std::string& spec, const char* var, const std::vector<std::string>& names,
                              const std::vector<std::string>& known) {
  AllowMask mask = ~AllowMask{0};
  if (trim(spec).empty()) return mask;
  auto listMask = [&](std::string list, uint32_t* bits) -> Status {
    bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list.erase(0, 1);
    uint32_t named = 0;
    for (const std::string& item : split(list, ',')) {
      if (item.empty()) continue;
      int idx = -1;
      for (size_t i = 0; i < names.size(); ++i)
        if (strcasecmp(item.c_str(), names[i].c_str()) == 0) idx = static_cast<int>(i);
      if (idx < 0) {
        bool isKnown = std::any_of(known.begin(), known.end(),
                                   [&](const std::string& k) { return strcasecmp(k.c_str(), item.c_str()) == 0; });
        if (isKnown) continue;  // an NCCL name this library does not implement (e.g. NVLS)
        std::string all;
        for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
        return invalidArgument(std::string(var) + "=\"" + spec + "\": unknown name \"" + item + "\" (known: " + all +
                               ")");
      }
      named |= 1u << idx;
    }
    *bits = exclude ? (~named & 0xfu) : named;
    return okStatus();
  };
  if (spec.find(':') == std::string::npos) {
    uint32_t bits = 0;
    COLL_CHECK(listMask(spec, &bits));
    mask = 0;
    for (int k = 0; k < kNumKinds; ++k) mask |= AllowMask{bits} << (k * 4);
    return mask;
  }
  for (const std::string& part : split(spec, ';')) {
    if (part.empty()) continue;
    size_t colon = part.find(':');
    if (colon == std::string::npos)
      return invalidArgument(std::string(var) + "=\"" + spec + "\": \"" + part + "\" is not collective:list");
    int k = kindIndex(trim(part.substr(0, colon)));
    if (k < 0)
      return invalidArgument(std::string(var) + "=\"" + spec + "\": unknown collective \"" + part.substr(0, colon) +
                             "\" (allreduce, broadcast, reduce, allgather, reducescatter)");
    uint32_t bits = 0;
    COLL_CHECK(listMask(part.substr(colon + 1), &bits));
    mask &= ~(AllowMask{0xf} << (k * 4));
    mask |= AllowMask{bits} << (k * 4);
  }
  return mask;
}

double log2ceil(int v) {
  int d = 0;
  while ((1 << d) < v) ++d;
  return d;
}

}  // namespace

Result<AllowMask> parseAlgoFilter(const std::string& spec) {
  return parseFilter(spec, "COLL_ALGO", {"Ring", "Tree"}, {"CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT"});
}

Result<AllowMask> parseProtoFilter(const std::string& spec) {
  return parseFilter(spec, "COLL_PROTO", {"LL", "Simple"}, {"LL128"});
}

Status tunerInputFromParams(TunerInput* in) {
  COLL_ASSIGN(in->algos, parseAlgoFilter(param(StringParam::ALGO)));
  COLL_ASSIGN(in->protos, parseProtoFilter(param(StringParam::PROTO)));
  auto num = [](StringParam p, double fallback) {
    double v = std::strtod(param(p).c_str(), nullptr);
    return v > 0 ? v : fallback;
  };
  in->hopUs = num(StringParam::TUNER_HOP_US, in->hopUs);
  in->netHopUs = num(StringParam::TUNER_NET_HOP_US, in->netHopUs);
  in->oneShotUs = num(StringParam::TUNER_LL_US, in->oneShotUs);
  in->bwGBs = num(StringParam::TUNER_BW_GBS, in->bwGBs);
  in->netBwGBs = num(StringParam::TUNER_NET_BW_GBS, in->netBwGBs);
  return okStatus();
}

std::vector<Choice> tunerCandidates(const TunerInput& in, CollKind kind, size_t bytes, int oneShotApplies) {
  std::vector<Choice> out;
  const double n = in.nranks, B = bytes / 1e3;  // bytes / (GB/s) in us: bytes / 1e3 / GBs
  const bool multi = in.overNet;
  const double hop = multi ? in.netHopUs : in.hopUs, bw = multi ? in.netBwGBs : in.bwGBs;
  const bool llOne = oneShotApplies >= 0 ? (oneShotApplies && !multi) : (!multi && bytes <= in.oneShotMaxBytes);
  const bool llNet = oneShotApplies >= 0 ? (oneShotApplies && multi) : (multi && bytes <= in.netOneShotMaxBytes);
  auto add = [&](Algo a, Proto p, double us) {
    if (!allowed(in.algos, kind, static_cast<int>(a)) || !allowed(in.protos, kind, static_cast<int>(p))) return;
    out.push_back({a, p, us});
  };
  if (isPeerOp(kind)) {
    add(Algo::kRing, Proto::kSimple, hop + B / bw);
  } else if (kind == CollKind::kAllReduce) {
    add(Algo::kRing, Proto::kSimple, 2 * (n - 1) * hop + 2 * (n - 1) / n * B / bw);
    if (llOne) add(Algo::kRing, Proto::kOneShot, in.oneShotUs + B / in.bwGBs);
    if (llNet) add(Algo::kRing, Proto::kOneShot, (n - 1) * hop + (n - 1) * B / bw);
    if (in.treeAvailable && in.nranks > 1) {
      double depth = log2ceil(in.hosts) * in.netHopUs +
                     (in.maxRanksPerHost - 1) * (in.intraNet ? in.netHopUs : in.hopUs);
      add(Algo::kTree, Proto::kSimple, 2 * depth + 2 * B / bw);
    }
  } else {
    // Broadcast, reduce: a pipelined chain through n ranks; allgather, reduce-scatter:
    // n-1 steps, each moving 1/n of the (total) bytes.
    const bool chain = kind == CollKind::kBroadcast || kind == CollKind::kReduce;
    add(Algo::kRing, Proto::kSimple, (n - 1) * hop + (chain ? 1.0 : (n - 1) / n) * B / bw);
    if (llOne) add(Algo::kRing, Proto::kOneShot, in.oneShotUs + B / in.bwGBs);
  }
  std::stable_sort(out.begin(), out.end(), [](const Choice& a, const Choice& b) { return a.us < b.us; });
  return out;
}

Result<Choice> tunerChoose(const TunerInput& in, CollKind kind, size_t bytes, int oneShotApplies) {
  auto c = tunerCandidates(in, kind, bytes, oneShotApplies);
  if (c.empty())
    return invalidUsage(std::string("COLL_ALGO=\"") + param(StringParam::ALGO) + "\" and COLL_PROTO=\"" +
                        param(StringParam::PROTO) + "\" leave no algorithm for " + collKindName(kind) + " of " +
                        std::to_string(bytes) + " bytes (" + collKindName(kind) + " runs on Ring" +
                        (kind == CollKind::kAllReduce ? " or Tree" : "") + ")");
  // LL first wherever it applies: measured faster than every Simple algorithm at every
  // size it serves (on one host and across hosts, docs/PERFORMANCE.md), even where the
  // model's per-hop latencies would put a tree ahead.
  for (const Choice& x : c)
    if (x.proto == Proto::kOneShot) return x;
  return c.front();
}

}  // namespace coll

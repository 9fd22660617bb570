// The tuner (algorithms/tuner.h) on its own: COLL_ALGO / COLL_PROTO filters in NCCL's
// syntax, and the cost model's choice of algorithm and protocol for one host and for
// several. Through the API (filters at init) it is tested in test_api.cc, and with tuner
// plugins in test_plugins.cc.
#include <cstddef>

#include <catch2/catch.hpp>

#include "algorithms/tuner.h"

using namespace coll;

TEST_CASE("tuner: filters in NCCL syntax and the model's choices", "[tuner]") {
  auto all = parseAlgoFilter("");
  REQUIRE(all.ok());
  CHECK(allowed(all.value(), CollKind::kAllReduce, static_cast<int>(Algo::kTree)));
  auto noTree = parseAlgoFilter("^tree");
  REQUIRE(noTree.ok());
  CHECK_FALSE(allowed(noTree.value(), CollKind::kAllReduce, static_cast<int>(Algo::kTree)));
  CHECK(allowed(noTree.value(), CollKind::kAllReduce, static_cast<int>(Algo::kRing)));
  auto per = parseAlgoFilter("allreduce:Tree; broadcast:ring");
  REQUIRE(per.ok());
  CHECK_FALSE(allowed(per.value(), CollKind::kAllReduce, static_cast<int>(Algo::kRing)));
  CHECK(allowed(per.value(), CollKind::kAllGather, static_cast<int>(Algo::kTree)));  // unfiltered kind
  CHECK_FALSE(parseAlgoFilter("ring,nope").ok());
  CHECK_FALSE(parseAlgoFilter("allgatherx:ring").ok());
  CHECK(parseAlgoFilter("Ring,NVLS,CollnetDirect").ok());  // NCCL names we lack: ignored
  auto proto = parseProtoFilter("^LL,LL128");
  REQUIRE(proto.ok());
  CHECK_FALSE(allowed(proto.value(), CollKind::kAllReduce, static_cast<int>(Proto::kOneShot)));

  TunerInput in;
  SECTION("one host: LL wherever it applies, else ring (the tree is only a chain)") {
    for (int n : {2, 3, 8}) {
      in.nranks = n;
      in.maxRanksPerHost = n;
      for (size_t bytes : {size_t{8}, size_t{4096}, size_t{32768}, size_t{1} << 20, size_t{1} << 27}) {
        auto c = tunerChoose(in, CollKind::kAllReduce, bytes, 1);
        REQUIRE(c.ok());
        CHECK(c.value().proto == Proto::kOneShot);
        auto s = tunerChoose(in, CollKind::kAllReduce, bytes, 0);
        REQUIRE(s.ok());
        CHECK(s.value().algo == Algo::kRing);
      }
    }
  }
  SECTION("several hosts: tree for middle sizes, ring for large") {
    in.nranks = 16;
    in.hosts = 8;
    in.maxRanksPerHost = 2;
    in.overNet = true;
    CHECK(tunerChoose(in, CollKind::kAllReduce, 64 << 10, 0).value().algo == Algo::kTree);
    CHECK(tunerChoose(in, CollKind::kAllReduce, 256 << 20, 0).value().algo == Algo::kRing);
    // Candidates come smallest first, each with a prediction.
    auto cands = tunerCandidates(in, CollKind::kAllReduce, 1 << 20, 0);
    REQUIRE(cands.size() == 2);
    CHECK(cands[0].us <= cands[1].us);
    in.algos = parseAlgoFilter("allreduce:tree").value();
    CHECK(tunerChoose(in, CollKind::kAllReduce, 256 << 20, 0).value().algo == Algo::kTree);
    CHECK(tunerChoose(in, CollKind::kBroadcast, 1024, 0).ok());  // broadcast is not filtered
    in.algos = parseAlgoFilter("broadcast:tree").value();
    auto none = tunerChoose(in, CollKind::kBroadcast, 1024, 0);
    REQUIRE_FALSE(none.ok());
    CHECK_THAT(none.status().message(), Catch::Contains("leave no algorithm for collBroadcast"));
  }
}

// Device plans kept for reuse (device/plan_cache.h): the cache itself, and launches that
// find a plan giving the results a fresh build gives, while any change to what the plan
// depends on (buffers, count, type, op, root, the group's operations) builds a new one.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "device/plan_cache.h"
#include "harness.h"

using testing::ScopedEnv;

namespace {

std::shared_ptr<const coll::DevicePlan> planOfSteps(size_t steps) {
  auto p = std::make_shared<coll::DevicePlan>();
  p->steps.resize(steps);
  return p;
}

}  // namespace

TEST_CASE("device plan cache: finds by the whole key, drops the least recently used, keeps no large plan", "[device]") {
  coll::DevicePlanCache cache(2);
  const std::vector<uint64_t> a{1, 2, 3}, b{1, 2, 4}, c{7};
  auto pa = planOfSteps(1), pb = planOfSteps(2), pc = planOfSteps(3);
  CHECK(cache.find(a) == nullptr);
  cache.keep(a, pa);
  cache.keep(b, pb);
  CHECK(cache.find(a) == pa);
  CHECK(cache.find(b) == pb);
  CHECK(cache.find({1, 2}) == nullptr);  // a prefix is another key
  CHECK(cache.find(a) == pa);            // a is now the more recently used
  cache.keep(c, pc);                     // full: b goes
  CHECK(cache.size() == 2);
  CHECK(cache.find(b) == nullptr);
  CHECK(cache.find(a) == pa);
  CHECK(cache.find(c) == pc);
  cache.keep(c, pb);  // the same key again replaces, not adds
  CHECK(cache.size() == 2);
  CHECK(cache.find(c) == pb);
  CHECK(cache.hits() == 6);
  cache.keep({9}, planOfSteps(coll::DevicePlanCache::kMaxSteps + 1));
  CHECK(cache.find({9}) == nullptr);
  coll::DevicePlanCache none(0);
  none.keep(a, pa);
  CHECK(none.find(a) == nullptr);
}

namespace {

// Rank r's input element i: distinct per rank, call and element, exact in float sums.
float inputOf(int rank, int call, size_t i) { return static_cast<float>((rank + 1) * 100 + call * 7 + i % 13); }

// One allreduce of `count` floats from `in` to `out` with fresh inputs for call `call`;
// out's elements past count must stay as they were. Empty when the result is right.
std::string allreduceChecked(collComm_t comm, int nranks, int rank, int call, std::vector<float>& in,
                             std::vector<float>& out, size_t count, collRedOp_t op) {
  for (size_t i = 0; i < in.size(); ++i) in[i] = inputOf(rank, call, i);
  std::fill(out.begin(), out.end(), -1.0f);
  if (collAllReduce(in.data(), out.data(), count, collFloat, op, comm, nullptr) != collSuccess)
    return "call " + std::to_string(call) + ": " + collGetLastError(comm);
  for (size_t i = 0; i < out.size(); ++i) {
    float want = -1.0f;
    if (i < count) {
      want = op == collMax ? inputOf(nranks - 1, call, i) : 0.0f;
      for (int r = 0; op == collSum && r < nranks; ++r) want += inputOf(r, call, i);
    }
    if (out[i] != want)
      return "call " + std::to_string(call) + ": element " + std::to_string(i) + " is " + std::to_string(out[i]) +
             ", expected " + std::to_string(want);
  }
  return "";
}

}  // namespace

// Calls 1, 2, 5 and 6 repeat earlier ones (the plan is found); 3 changes the op, 4 the
// count, 7 the output buffer: each builds its own. Then a group of two broadcasts, twice.
// Every call's result is checked on fresh inputs, so a plan found under a wrong key shows.
TEST_CASE("device launches that repeat a recent one's operations and buffers reuse its plan (emulated)",
          "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv channels("COLL_DEVICE_NCHANNELS", "4");
  const int nranks = 3;
  auto errors = testing::runRanks(nranks, [&](int rank, collComm_t comm) -> std::string {
    if (!comm->dev.plans) return "no plan cache by default";
    const size_t n = 3000;  // several channels' pieces
    std::vector<float> in(n), out(n), other(n);
    struct Call {
      size_t count;
      collRedOp_t op;
      std::vector<float>* out;
    };
    const std::vector<Call> calls = {{n, collSum, &out},     {n, collSum, &out},     {n, collSum, &out},
                                     {n, collMax, &out},     {n / 2, collSum, &out}, {n, collSum, &out},
                                     {n / 2, collSum, &out}, {n, collSum, &other}};
    for (size_t k = 0; k < calls.size(); ++k) {
      const Call& c = calls[k];
      std::string e = allreduceChecked(comm, nranks, rank, static_cast<int>(k), in, *c.out, c.count, c.op);
      if (!e.empty()) return e;
    }
    if (comm->dev.plans->hits() != 4) return "plans found " + std::to_string(comm->dev.plans->hits()) + " times, not 4";
    // A group of a broadcast from each root into distinct buffers, twice.
    std::vector<float> b0(64), b1(64);
    for (int round = 0; round < 2; ++round) {
      std::fill(b0.begin(), b0.end(), static_cast<float>(rank + round));
      std::fill(b1.begin(), b1.end(), static_cast<float>(rank + round));
      collGroupStart();
      collBroadcast(b0.data(), b0.data(), b0.size(), collFloat, 0, comm, nullptr);
      collBroadcast(b1.data(), b1.data(), b1.size(), collFloat, 1, comm, nullptr);
      if (collGroupEnd() != collSuccess) return std::string("broadcast group: ") + collGetLastError(comm);
      if (b0[63] != static_cast<float>(round) || b1[0] != static_cast<float>(1 + round))
        return "broadcast round " + std::to_string(round) + ": " + std::to_string(b0[63]) + ", " +
               std::to_string(b1[0]);
    }
    if (comm->dev.plans->hits() != 5) return "the repeated group found no plan";
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

// A rank whose plan is found and a rank that builds one for another count still meet the
// size check: both fail naming the mismatch, not a hang or a wrong sum.
TEST_CASE("a found plan meeting a peer's other count fails both ranks by name (emulated)",
          "[collectives][device][failure]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv channels("COLL_DEVICE_NCHANNELS", "4");
  auto errors = testing::runRanks(2, [&](int rank, collComm_t comm) -> std::string {
    if (collCommSetTimeout(comm, 15.0) != collSuccess) return "collCommSetTimeout failed";  // a hang: fail
    std::vector<int32_t> buf(4096, 1);
    for (int k = 0; k < 2; ++k)
      if (collAllReduce(buf.data(), buf.data(), 1000, collInt32, collSum, comm, nullptr) != collSuccess)
        return std::string("matched call: ") + collGetLastError(comm);
    const size_t count = rank == 0 ? 1000 : 4096;  // rank 0 finds its plan, rank 1 builds
    const collResult_t r = collAllReduce(buf.data(), buf.data(), count, collInt32, collSum, comm, nullptr);
    const std::string why = collGetLastError(comm);
    if (r == collSuccess) return "the mismatched allreduce succeeded";
    if (why.find("different operations or counts") == std::string::npos) return "unexpected error: " + why;
    return "";
  });
  for (auto& e : errors) FAIL_CHECK(e);
  REQUIRE(errors.empty());
}

// The image a small plan travels in as the kernel's parameters (device_lane.h DeviceParamPlan):
// each lane copied out of it finds its own steps in it; a plan one step too large for it
// is refused, never cut.
TEST_CASE("device plan images: lanes find their steps in the image, and a plan too large is refused", "[device]") {
  std::vector<coll::DeviceLane> lanes(3);
  std::vector<coll::DeviceStep> steps(7);
  for (size_t i = 0; i < steps.size(); ++i) steps[i].bytes = 100 + i;
  const uintptr_t first[3] = {0, 2, 3};
  for (size_t l = 0; l < lanes.size(); ++l) {
    lanes[l].steps = reinterpret_cast<const coll::DeviceStep*>(first[l]);
    lanes[l].nsteps = l == 2 ? 4 : static_cast<uint32_t>(first[l + 1] - first[l]);
    lanes[l].nranks = static_cast<int32_t>(10 + l);
  }
  auto image = std::make_unique<coll::DeviceParamPlan>();
  REQUIRE(coll::devicePackPlan(*image, lanes.data(), 3, steps.data(), steps.size()));
  CHECK(image->nlanes == 3);
  for (uint32_t l = 0; l < 3; ++l) {
    coll::DeviceLane copy;
    std::memcpy(&copy, coll::deviceParamLaneWords(*image, l), sizeof copy);
    CHECK(copy.nranks == static_cast<int32_t>(10 + l));
    const coll::DeviceStep* s = coll::deviceParamSteps(*image, copy);
    for (uint32_t k = 0; k < copy.nsteps; ++k) CHECK(s[k].bytes == 100 + first[l] + k);
    CHECK(reinterpret_cast<const char*>(s + copy.nsteps) <= image->bytes + coll::kDeviceParamBytes);
  }
  const uint64_t fit = (coll::kDeviceParamBytes - sizeof(coll::DeviceLane)) / sizeof(coll::DeviceStep);
  std::vector<coll::DeviceStep> many(fit + 1);
  CHECK(coll::devicePackPlan(*image, lanes.data(), 1, many.data(), fit));
  CHECK_FALSE(coll::devicePackPlan(*image, lanes.data(), 1, many.data(), fit + 1));
}

// The emulation runs small plans from their image by default (the sweeps cover it); with
// COLL_DEVICE_PLAN_PARAMS=0 every plan runs from launch memory, as large ones do.
TEST_CASE("device plans run alike from an image and from launch memory (emulated)", "[collectives][device]") {
  ScopedEnv emulate("COLL_DEVICE_EMULATE", "1");
  ScopedEnv channels("COLL_DEVICE_NCHANNELS", "4");
  for (const char* inParams : {"0", "1"}) {
    ScopedEnv mode("COLL_DEVICE_PLAN_PARAMS", inParams);
    auto errors = testing::runRanks(3, [&](int rank, collComm_t comm) -> std::string {
      if (comm->dev.planInParams != (inParams[0] == '1')) return "COLL_DEVICE_PLAN_PARAMS not taken";
      std::vector<float> in(5000), out(5000);
      // 8 floats: one lane (an image); 5000 floats on 4 channels: in an image too, unless off.
      for (size_t count : {size_t{8}, size_t{5000}})
        for (int call = 0; call < 2; ++call) {
          std::string e = allreduceChecked(comm, 3, rank, call, in, out, count, collSum);
          if (!e.empty())
            return std::string("COLL_DEVICE_PLAN_PARAMS=") + inParams + ", count " + std::to_string(count) + ": " + e;
        }
      return "";
    });
    for (auto& e : errors) FAIL_CHECK(e);
  }
}

// Status and Result<T> (base/status.h): what a caller may ask of either, in any state.
#include <string>

#include <catch2/catch.hpp>

#include "base/status.h"

using coll::Code;
using coll::Result;
using coll::Status;

TEST_CASE("a result's status is ok when it holds a value, and never throws", "[status]") {
  // The copy agent's server once asked a successful Result<char*> for its status: the
  // variant threw bad_variant_access, and the process ended in std::terminate on the GPU.
  Result<int> held(7);
  REQUIRE(held.ok());
  CHECK(held.status().ok());
  CHECK(held.status().message().empty());
  CHECK(held.value() == 7);

  Result<int> failed(Status(Code::kCuda, "cudaHostRegister failed"));
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().code() == Code::kCuda);
  CHECK(failed.status().message() == "cudaHostRegister failed");
}

TEST_CASE("a status keeps its code and message through copies, moves and frames", "[status]") {
  Status ok;
  CHECK(ok.ok());
  CHECK(ok.message().empty());
  CHECK(coll::okStatus().message().empty());

  Status failed = coll::invalidArgument("count -1");
  Status copy = failed;  // a copy owns its own message
  copy.prefix("collAllReduce: ");
  CHECK(failed.message() == "count -1");
  CHECK(copy.message() == "collAllReduce: count -1");
  CHECK(copy.code() == Code::kInvalidArgument);

  copy = failed;
  CHECK(copy.message() == "count -1");
  Status moved = std::move(copy);
  CHECK(moved.message() == "count -1");
  CHECK(moved.code() == Code::kInvalidArgument);

  // A frame on a status that had no message yet still reads as a trace.
  Status bare(Code::kInternal, "");
  bare.addFrame("/src/comm/comm.cc", 12);
  CHECK(bare.message() == "\n    at comm/comm.cc:12");
  Status empty;
  empty.prefix("context");
  CHECK(empty.message() == "context");
  CHECK(empty.ok());
}

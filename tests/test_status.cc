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

// Shareable host memory (transport/shm/shared_mem.h): what collMemAlloc hands out, how a
// peer maps it, and the bounds a window part keeps.
#include "transport/shm/shared_mem.h"

#include <unistd.h>

#include <cstring>

#include <catch2/catch.hpp>

using namespace coll;

TEST_CASE("shareable allocations are found by any range inside them and freed once", "[shared_mem]") {
  Result<void*> r = sharedAlloc(10000);
  REQUIRE(r.ok());
  char* p = static_cast<char*>(r.value());
  REQUIRE(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  std::optional<SharedSpan> whole = sharedSpanOf(p, 10000);
  REQUIRE(whole);
  CHECK(whole->offset == 0);
  CHECK(whole->allocBytes == 12288);  // whole pages
  std::optional<SharedSpan> tail = sharedSpanOf(p + 12000, 288);
  REQUIRE(tail);
  CHECK(tail->offset == 12000);
  CHECK(tail->fd == whole->fd);
  CHECK_FALSE(sharedSpanOf(p + 12000, 289));  // runs past the end
  CHECK_FALSE(sharedSpanOf(p - 1, 1));
  int stack = 0;
  CHECK_FALSE(sharedSpanOf(&stack, sizeof(stack)));
  CHECK(sharedFree(p));
  CHECK_FALSE(sharedSpanOf(p, 1));
  CHECK_FALSE(sharedFree(p));  // not ours any more
  CHECK_FALSE(sharedFree(&stack));
}

TEST_CASE("a peer's mapping shows the owner's bytes and a short or missing file is refused", "[shared_mem]") {
  Result<void*> r = sharedAlloc(8192);
  REQUIRE(r.ok());
  char* p = static_cast<char*>(r.value());
  std::optional<SharedSpan> span = sharedSpanOf(p, 8192);
  REQUIRE(span);
  Result<std::shared_ptr<const PeerMapping>> m = PeerMapping::map(getpid(), span->fd, 8192);
  REQUIRE(m.ok());
  std::memcpy(p + 5000, "window", 7);
  CHECK(std::strcmp(m.value()->base() + 5000, "window") == 0);  // the same pages
  CHECK(m.value()->base() != p);
  Result<std::shared_ptr<const PeerMapping>> longer = PeerMapping::map(getpid(), span->fd, 16384);
  REQUIRE_FALSE(longer.ok());
  CHECK_THAT(longer.status().message(), Catch::Contains("fewer than the 16384 bytes"));
  Result<std::shared_ptr<const PeerMapping>> none = PeerMapping::map(getpid(), 1 << 20, 4096);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.status().message(), Catch::Contains("/fd/1048576"));
  CHECK(sharedFree(p));
  CHECK(std::strcmp(m.value()->base() + 5000, "window") == 0);  // still mapped by the peer
}

TEST_CASE("a window part finds only ranges wholly inside it", "[shared_mem]") {
  const char local[64] = {};
  WindowPart part{1000, 64, local};
  CHECK(part.find(1000, 64) == local);
  CHECK(part.find(1010, 10) == local + 10);
  CHECK(part.find(1064, 0) == local + 64);
  CHECK(part.find(1060, 5) == nullptr);
  CHECK(part.find(999, 1) == nullptr);
  CHECK(part.find(1001, SIZE_MAX) == nullptr);
  WindowPart unmapped{1000, 64, nullptr};
  CHECK(unmapped.find(1000, 1) == nullptr);
}

TEST_CASE("shared windows are looked up by id and by this rank's range", "[shared_mem]") {
  SharedWindows wins;
  CHECK_FALSE(wins.any());
  auto w = std::make_shared<SharedWindow>();
  w->id = 7;
  w->parts = {{1000, 100, reinterpret_cast<const char*>(1000)}, {5000, 100, nullptr}};
  wins.add(w);
  CHECK(wins.any());
  CHECK(wins.idOf(0, reinterpret_cast<const void*>(1050), 50) == 7);
  CHECK(wins.idOf(0, reinterpret_cast<const void*>(1050), 51) == 0);
  CHECK(wins.find(7) == w);
  CHECK(wins.find(8) == nullptr);
  wins.remove(7);
  CHECK_FALSE(wins.any());
  CHECK(wins.idOf(0, reinterpret_cast<const void*>(1050), 1) == 0);
}

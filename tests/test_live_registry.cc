// The registry of live communicators (comm/comm.h): handles are looked up on every call
// without a lock, so the registry must hold every communicator a process makes (those its
// table has no room for, too), refuse retired ones, and make a retire wait for the calls
// still in flight.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "comm/comm.h"

using namespace coll;

TEST_CASE("the live registry holds more communicators than its table has slots", "[registry]") {
  // More than the table's 4096 slots: the last ones can only go to the overflow set.
  std::vector<std::unique_ptr<collComm>> comms;
  for (int i = 0; i < 5000; ++i) {
    comms.push_back(std::make_unique<collComm>());
    registerComm(comms.back().get());
  }
  int inSlots = 0;
  for (auto& c : comms) {
    REQUIRE(isLiveComm(c.get()));
    REQUIRE(acquireComm(c.get()));
    releaseComm(c.get());
    inSlots += c->liveSlot >= 0;
  }
  CHECK(inSlots <= 4096);
  CHECK(inSlots < static_cast<int>(comms.size()));
  for (auto& c : comms) retireComm(c.get());
  for (auto& c : comms) {
    CHECK_FALSE(isLiveComm(c.get()));
    CHECK_FALSE(acquireComm(c.get()));
  }
  CHECK_FALSE(acquireComm(nullptr));
  CHECK_FALSE(isLiveComm(nullptr));
}

TEST_CASE("a retire waits for the calls in flight and refuses new ones", "[registry]") {
  auto c = std::make_unique<collComm>();
  registerComm(c.get());
  REQUIRE(acquireComm(c.get()));
  std::atomic<bool> retired{false};
  std::thread t([&] {
    retireComm(c.get());
    retired = true;
  });
  // The retire has taken the handle out (new calls are refused) but waits for ours.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (isLiveComm(c.get()) && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  CHECK_FALSE(isLiveComm(c.get()));
  CHECK_FALSE(acquireComm(c.get()));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(retired.load());
  releaseComm(c.get());
  t.join();
  CHECK(retired.load());
}

TEST_CASE("calls on many communicators from many threads keep their counts", "[registry]") {
  constexpr int kComms = 8, kThreads = 4, kCalls = 20000;
  std::vector<std::unique_ptr<collComm>> comms;
  for (int i = 0; i < kComms; ++i) {
    comms.push_back(std::make_unique<collComm>());
    registerComm(comms.back().get());
  }
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        collComm* c = comms[static_cast<size_t>((i + t) % kComms)].get();
        if (!acquireComm(c)) {
          ++refused;
          continue;
        }
        releaseComm(c);
      }
    });
  for (auto& th : threads) th.join();
  CHECK(refused == 0);
  // Every count is back at zero: each retire returns at once.
  const auto start = std::chrono::steady_clock::now();
  for (auto& c : comms) retireComm(c.get());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(500));
}

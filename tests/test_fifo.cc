// Connector FIFOs: ordering, sizes and back-pressure through the shm transport, both as
// plain in-process memory and as a real POSIX shm segment (mapped twice here), and the
// segment's removal from /dev/shm once both sides hold it; the net connectors over
// loopback sockets. The adaptive spin of the Waiter every connector wait goes through.
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "base/wait.h"
#include "harness.h"
#include "transport/net/net.h"
#include "transport/net/socket/socket_net.h"
#include "transport/shm/shm.h"

using namespace coll;

namespace {

int shmEntries() {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, "coll-", 5) == 0) ++n;
    closedir(d);
  }
  return n;
}

void pingPong(bool sameProcess) {
  const size_t slot = 256;
  int before = shmEntries();
  auto pending = shmSetupRecv(1, slot, sameProcess);
  REQUIRE(pending.ok());
  if (!sameProcess) REQUIRE(shmEntries() == before + 1);
  auto send = shmConnectSend(0, pending.value()->handle());
  REQUIRE(send.ok());
  auto finished = pending.value()->finish();
  REQUIRE(finished.ok());
  std::unique_ptr<RecvConnector> recv = finished.take();
  REQUIRE(shmEntries() == before);  // unlinked once both sides mapped it
  std::unique_ptr<SendConnector> sender = send.take();

  const int kMessages = 20000;
  std::atomic<int> maxAhead{0};
  std::atomic<int> consumed{0};
  std::thread producer([&] {
    for (int i = 0; i < kMessages; ++i) {
      while (!sender->ready()) std::this_thread::yield();
      int ahead = i - consumed.load();
      if (ahead > maxAhead.load()) maxAhead.store(ahead);
      size_t len = 1 + static_cast<size_t>(i) % slot;
      std::memset(sender->slot(), i & 0xff, len);
      std::memcpy(sender->slot(), &i, std::min(len, sizeof(i)));
      sender->post(len);
    }
  });
  std::string error;
  for (int i = 0; i < kMessages && error.empty(); ++i) {
    while (!recv->ready()) std::this_thread::yield();
    size_t len = 1 + static_cast<size_t>(i) % slot;
    if (recv->size() != len) error = "size of message " + std::to_string(i);
    const unsigned char* p = reinterpret_cast<const unsigned char*>(recv->slot());
    if (len >= sizeof(int)) {
      int got;
      std::memcpy(&got, p, sizeof(got));
      if (got != i) error = "message " + std::to_string(i) + " arrived as " + std::to_string(got);
    }
    if (len > sizeof(int) && p[len - 1] != (i & 0xff)) error = "payload of " + std::to_string(i);
    recv->release();
    consumed.store(i + 1);
  }
  producer.join();
  REQUIRE(error.empty());
  REQUIRE(maxAhead.load() <= kFifoSlots);  // never more than the FIFO holds
}

}  // namespace

TEST_CASE("shm FIFO in process memory keeps order, sizes and back-pressure", "[fifo]") { pingPong(true); }

TEST_CASE("shm FIFO in a POSIX segment keeps order and leaves nothing in /dev/shm", "[fifo]") { pingPong(false); }

TEST_CASE("shm segments of a process that died while connecting are removed by the next one", "[fifo]") {
  char mine[48] = {};
  Result<void*> own = shmCreateSegment(mine, sizeof(mine), "fifo", 4096);  // a live creator's
  REQUIRE(own.ok());
  char name[48] = {};
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // creates a segment, then dies before any peer maps it
    Result<void*> seg = shmCreateSegment(name, sizeof(name), "fifo", 4096);
    (void)!write(fds[1], name, sizeof(name));
    _exit(seg.ok() ? 0 : 1);
  }
  close(fds[1]);
  REQUIRE(read(fds[0], name, sizeof(name)) == static_cast<ssize_t>(sizeof(name)));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const std::string left = std::string("/dev/shm") + name;
  REQUIRE(access(left.c_str(), F_OK) == 0);
  (void)shmSweepDeadCreators();  // too young: its creator may live in another pid namespace
  CHECK(access(left.c_str(), F_OK) == 0);
  CHECK(shmSweepDeadCreators(0) >= 1);
  CHECK(access(left.c_str(), F_OK) != 0);
  CHECK(access((std::string("/dev/shm") + mine).c_str(), F_OK) == 0);  // kept: its creator lives
  munmap(own.value(), 4096);
  shm_unlink(mine);
}

TEST_CASE("socket striping covers every byte exactly once", "[fifo][net]") {
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{1} << 20, (size_t{1} << 20) + 3}) {
    for (int nsocks : {1, 2, 3, 8}) {
      size_t partLen;
      int parts = socketStripe(size, nsocks, &partLen);
      REQUIRE(parts >= 1);
      REQUIRE(parts <= nsocks);
      REQUIRE(static_cast<size_t>(parts) * partLen >= size);
      REQUIRE((parts == 1 || static_cast<size_t>(parts - 1) * partLen < size));
      if (size < 65536) REQUIRE(parts == 1);
    }
  }
}

// A sender may finish and close while its last messages still wait at the receiver (the
// last rank of a collective to finish). The receiver must hand over every one of them,
// however many arrived in one read and however it paces its consumption, and only then
// report the closed connection. Once lost the last of several such messages when the
// receiver took one arrival per progress call and failed to post a receive on the closed
// connection before testing the arrivals it already held.
TEST_CASE("net connector delivers what a peer sent before closing, then reports the close", "[fifo][net]") {
  testing::ScopedEnv ifname("COLL_SOCKET_IFNAME", "lo");
  const size_t slot = 512;
  for (int messages : {1, 2, 3, kFifoSlots}) {
    INFO(messages << " messages");
    const AuthKey key{};
    auto pending = netSetupRecv(0, slot, key);
    REQUIRE(pending.ok());
    auto send = netConnectSend(1, pending.value()->handle(), key);
    REQUIRE(send.ok());
    auto recv = pending.value()->finish();
    REQUIRE(recv.ok());
    {
      std::unique_ptr<SendConnector> sender = send.take();
      for (int i = 0; i < messages; ++i) {
        REQUIRE(sender->ready());
        std::memset(sender->slot(), 'a' + i, static_cast<size_t>(i) + 1);
        sender->post(static_cast<size_t>(i) + 1);
      }
      while (!sender->flushed()) REQUIRE(sender->progress().ok());
    }  // closed: everything is in the receiver's socket, then its end of stream
    std::unique_ptr<RecvConnector> receiver = recv.take();
    for (int i = 0; i < messages; ++i) {
      INFO("message " << i);
      Status st;
      while (st.ok() && !receiver->ready()) st = receiver->progress();
      REQUIRE(st.ok());
      REQUIRE(receiver->size() == static_cast<size_t>(i) + 1);
      REQUIRE(std::string(receiver->slot(), receiver->size()) ==
              std::string(static_cast<size_t>(i) + 1, static_cast<char>('a' + i)));
      receiver->release();
    }
    Status st;
    for (int n = 0; n < 1000 && st.ok(); ++n) st = receiver->progress();
    REQUIRE(!st.ok());
    CHECK_THAT(st.message(), Catch::Contains("connection closed"));
    REQUIRE(!receiver->ready());
  }
}

namespace {

// The first CPU this thread may run on.
int firstAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) return cpu;
  return 0;
}

void pinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0);
}

}  // namespace

TEST_CASE("waiter: spin budget shrinks when the awaited thread shares the CPU, then recovers", "[fifo][wait]") {
  // Two threads on one CPU pass a counter back and forth. Each wait can only end after the
  // waiter yields the CPU to its peer, so spinning the full 50 us first is pure delay:
  // the budget must come down (to the 1 us floor unless a tick preemption intervened).
  constexpr int64_t kSpinNs = 50000;
  constexpr int kRounds = 40;
  const int cpu = firstAllowedCpu();
  std::atomic<int> turn{0};
  std::atomic<int> pinned{0};
  int64_t budgets[2] = {-1, -1};
  bool reduced[2] = {false, false};  // spinBudgetReduced: what a one-shot polls less by
  int64_t recovered = -1;
  bool reducedAfterRecovery = true;
  auto player = [&](int me) {
    pinTo(cpu);
    pinned.fetch_add(1);
    while (pinned.load() < 2) sched_yield();
    for (int i = 0; i < kRounds; ++i) {
      Waiter w(kSpinNs);
      while (turn.load(std::memory_order_acquire) % 2 != me) w.idle(WaitTarget{});
      w.reset();
      turn.fetch_add(1, std::memory_order_release);
    }
    budgets[me] = Waiter(kSpinNs).spinBudgetNs();
    reduced[me] = spinBudgetReduced(kSpinNs);
    if (me == 0) {
      // Waits that end while still spinning (nothing to yield to) double it back.
      for (int i = 0; i < 8; ++i) {
        Waiter w(kSpinNs);
        w.idle(WaitTarget{});
        w.idle(WaitTarget{});
        w.reset();
      }
      recovered = Waiter(kSpinNs).spinBudgetNs();
      reducedAfterRecovery = spinBudgetReduced(kSpinNs);
    }
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  INFO("cpu " << cpu << ", budgets after " << kRounds << " handoffs: " << budgets[0] << " and " << budgets[1] << " ns");
  CHECK(budgets[0] <= kSpinNs / 4);
  CHECK(budgets[1] <= kSpinNs / 4);
  CHECK(reduced[0]);
  CHECK(reduced[1]);
  CHECK(recovered == kSpinNs);
  CHECK_FALSE(reducedAfterRecovery);
  // A fresh thread starts with the configured spin, and a waiter configured with less
  // never spins longer than that.
  int64_t fresh = -1, smaller = -1;
  bool freshReduced = true;
  std::thread([&] {
    fresh = Waiter(kSpinNs).spinBudgetNs();
    smaller = Waiter(2000).spinBudgetNs();
    freshReduced = spinBudgetReduced(kSpinNs);
  }).join();
  CHECK(fresh == kSpinNs);
  CHECK(smaller == 2000);
  CHECK_FALSE(freshReduced);
}

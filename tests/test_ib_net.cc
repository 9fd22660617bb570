// The ib net backend (src/transport/net/ib/ib_net.h) on the verbs emulation
// (tests/verbs_emu/), driven directly through NetBackend in one process: connect before
// accept on one thread, messages 0 B-4 MiB both ways with their bytes checked, several QPs
// per connection, RoCE addressing, the errors a forced QP error and a vanished peer give,
// the backend choice (COLL_NET=IB, COLL_IB_DISABLE, a missing verbs library),
// NCCL_IB_HCA parsing with its warnings, and GPUDirect RDMA with a memfd standing for a
// GPU buffer's dma-buf (regMrGpu, iflush).  Every wait has a deadline; each case uses a fabric
// of its own that it unlinks.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "base/log.h"
#include "transport/net/ib/ib_net.h"
#include "verbs_emu_env.h"

using namespace coll;

namespace {

using Clock = std::chrono::steady_clock;

using test::EmuEnv;
using test::must;

Status waitAll(NetBackend* b, std::vector<NetRequest*> rs, std::vector<size_t>* sizes);

// One connection, connected before it is accepted (as one thread driving several ranks
// does), with a registered buffer on each side.
struct Pair {
  // The receiver listens on device `dev`, the sender connects from `from` (-1: the same).
  explicit Pair(NetBackend* b, size_t bytes = 4 << 20, int dev = 0, int from = -1) : b(b), sbuf(bytes), rbuf(bytes) {
    NetHandle h{};
    auto listen = must(b->listen(dev, AuthKey{}, &h));
    send = must(b->connect(from < 0 ? dev : from, h, AuthKey{}, nullptr));
    recv = must(b->accept(listen.get()));
    listen.reset();
    must(b->regMr(send.get(), sbuf.data(), sbuf.size()));
    must(b->regMr(send.get(), sbuf.data(), sbuf.size()));  // again: free, no second MR
    must(b->regMr(recv.get(), rbuf.data(), rbuf.size()));
    establish();
  }
  // Neither side is established until both progress: a first (empty) message, each side
  // posted again while the backend gives null requests.
  void establish() {
    NetRequest *s = nullptr, *r = nullptr;
    const auto end = Clock::now() + std::chrono::seconds(10);
    while ((!s || !r) && Clock::now() < end) {
      if (!s) s = must(b->isend(send.get(), sbuf.data(), 0));
      if (!r) r = must(b->irecv(recv.get(), rbuf.data(), rbuf.size()));
    }
    if (!s || !r) throw std::runtime_error("the connection was not established within 10 s");
    std::vector<size_t> sizes;
    must(waitAll(b, {s, r}, &sizes));
    if (sizes[1] != 0) throw std::runtime_error("the first message is not empty");
  }
  NetBackend* b;
  std::vector<char> sbuf, rbuf;
  std::unique_ptr<NetSendComm> send;
  std::unique_ptr<NetRecvComm> recv;
};

// Posts until the backend takes it (null: not established yet), for at most 10 s.
template <typename F>
NetRequest* post(F f) {
  const auto end = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < end) {
    NetRequest* r = must(f());
    if (r) return r;
  }
  throw std::runtime_error("a request was not taken within 10 s");
}

// Tests `rs` in order until all are done (or one fails: its status), for at most 10 s.
Status waitAll(NetBackend* b, std::vector<NetRequest*> rs, std::vector<size_t>* sizes) {
  const auto end = Clock::now() + std::chrono::seconds(10);
  sizes->assign(rs.size(), 0);
  for (size_t i = 0; i < rs.size();) {
    bool done = false;
    Status st = b->test(rs[i], &done, &(*sizes)[i]);
    if (!st.ok()) return st;
    if (done) ++i;
    else if (Clock::now() > end) return timeoutError("requests not done within 10 s");
  }
  return okStatus();
}

// Posts with f (again while it gives null) and waits for the request: the first error of
// either, for failures that may surface at posting or at testing.
template <typename F>
Status postAndWait(NetBackend* b, F f) {
  const auto end = Clock::now() + std::chrono::seconds(10);
  NetRequest* r = nullptr;
  while (!r && Clock::now() < end) {
    Result<NetRequest*> got = f();
    if (!got.ok()) return got.takeStatus();
    r = got.take();
  }
  if (!r) return timeoutError("a request was not taken within 10 s");
  std::vector<size_t> sizes;
  return waitAll(b, {r}, &sizes);
}

// Sends messages of `sizes` from p.sbuf to p.rbuf, all in flight together, and checks them.
void exchange(Pair& p, const std::vector<size_t>& sizes) {
  size_t total = 0;
  for (size_t s : sizes) total += s;
  REQUIRE(total <= p.sbuf.size());
  for (size_t i = 0; i < total; ++i) p.sbuf[i] = static_cast<char>(i * 7 + sizes.size());
  std::fill(p.rbuf.begin(), p.rbuf.end(), 0);
  std::vector<NetRequest*> rr, sr;
  size_t off = 0;
  for (size_t s : sizes) {
    rr.push_back(post([&] { return p.b->irecv(p.recv.get(), p.rbuf.data() + off, p.rbuf.size() - off); }));
    sr.push_back(post([&] { return p.b->isend(p.send.get(), p.sbuf.data() + off, s); }));
    off += s;
  }
  std::vector<size_t> got, ignored;
  must(waitAll(p.b, sr, &ignored));
  must(waitAll(p.b, rr, &got));
  REQUIRE(got == sizes);
  REQUIRE(std::memcmp(p.sbuf.data(), p.rbuf.data(), total) == 0);
}

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs f with the log going to a file and returns what it logged.
template <typename F>
std::string logged(F f, const char* level = "WARN") {
  char path[] = "/tmp/coll_ib_net_log_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  setenv("COLL_DEBUG_FILE", path, 1);
  setenv("COLL_DEBUG", level, 1);
  logReset();
  f();
  unsetenv("COLL_DEBUG_FILE");
  unsetenv("COLL_DEBUG");
  logReset();
  std::string out = readFile(path);
  unlink(path);
  return out;
}

}  // namespace

TEST_CASE("NCCL_IB_HCA: lists, ports, exclusion, exact names", "[ib]") {
  IbHcaSpec s = parseIbHca("mlx5_0:1,mlx5_1");
  REQUIRE_FALSE(s.exclude);
  REQUIRE(s.entries.size() == 2);
  REQUIRE(s.entries[0].name == "mlx5_0");
  REQUIRE(s.entries[0].port == 1);
  REQUIRE(s.entries[1].port == 0);
  REQUIRE(ibHcaMatches(s, "mlx5_0", 1));
  REQUIRE_FALSE(ibHcaMatches(s, "mlx5_0", 2));
  REQUIRE(ibHcaMatches(s, "mlx5_1", 2));
  REQUIRE(ibHcaMatches(s, "mlx5_10", 1));  // prefix, as NCCL
  REQUIRE_FALSE(ibHcaMatches(s, "mlx5_2", 1));

  IbHcaSpec x = parseIbHca("^mlx5_2");
  REQUIRE(x.exclude);
  REQUIRE_FALSE(ibHcaMatches(x, "mlx5_2", 1));
  REQUIRE(ibHcaMatches(x, "mlx5_0", 1));

  IbHcaSpec e = parseIbHca("=mlx5_1:2");
  REQUIRE(e.exact);
  REQUIRE(ibHcaMatches(e, "mlx5_1", 2));
  REQUIRE_FALSE(ibHcaMatches(e, "mlx5_10", 2));
  REQUIRE_FALSE(ibHcaMatches(e, "mlx5_1", 1));

  IbHcaSpec ex = parseIbHca("^=mlx5_1");
  REQUIRE(ex.exclude);
  REQUIRE(ex.exact);
  REQUIRE(ibHcaMatches(ex, "mlx5_10", 1));
  REQUIRE_FALSE(ibHcaMatches(ex, "mlx5_1", 1));

  REQUIRE(ibHcaMatches(parseIbHca(""), "anything", 3));
}

TEST_CASE("NCCL_IB_HCA: malformed entries are dropped with a warning naming the variable", "[ib]") {
  IbHcaSpec s;
  std::string log = logged([&] { s = parseIbHca("mlx5_0:x,:1,mlx5_1:1"); });
  REQUIRE(s.entries.size() == 1);
  REQUIRE(s.entries[0].name == "mlx5_1");
  REQUIRE(log.find("NCCL_IB_HCA=\"mlx5_0:x,:1,mlx5_1:1\": malformed entry \"mlx5_0:x\"") != std::string::npos);
  REQUIRE(log.find("malformed entry \":1\"") != std::string::npos);
  setenv("COLL_IB_HCA", "mlx5_0:999", 1);
  log = logged([&] { s = parseIbHca("mlx5_0:999"); });
  unsetenv("COLL_IB_HCA");
  REQUIRE(s.entries.empty());
  REQUIRE(log.find("COLL_IB_HCA=\"mlx5_0:999\"") != std::string::npos);
}

TEST_CASE("COLL_NET=IB without a verbs library is an error naming the library", "[ib]") {
  setenv("COLL_IB_VERBS_LIB", "/nonexistent/libibverbs.so.1", 1);
  setenv("COLL_NET", "IB", 1);
  Result<NetBackend*> b = netBackend();
  Status named = checkNetName("ib");
  setenv("COLL_IB_DISABLE", "1", 1);
  Status disabled = checkNetName("IB");
  for (const char* v : {"COLL_IB_VERBS_LIB", "COLL_NET", "COLL_IB_DISABLE"}) unsetenv(v);
  REQUIRE_FALSE(b.ok());
  REQUIRE(b.status().message().find("/nonexistent/libibverbs.so.1") != std::string::npos);
  REQUIRE(b.status().message().find("COLL_NET=IB") != std::string::npos);
  REQUIRE_FALSE(named.ok());
  REQUIRE(named.message().find("/nonexistent/libibverbs.so.1") != std::string::npos);
  REQUIRE_FALSE(disabled.ok());
  REQUIRE(disabled.message().find("IB_DISABLE") != std::string::npos);
  Status other = checkNetName("Nope");
  REQUIRE(other.message().find("IB") == std::string::npos);  // not listed as available
}

TEST_CASE("devices follow NCCL_IB_HCA, and none selected is an error saying why", "[ib]") {
  EmuEnv env;
  auto all = must(makeIbBackend());
  REQUIRE(all->devices() == 2);
  NetProperties p;
  must(all->properties(1, &p));
  REQUIRE(p.name == "emu1:1");
  REQUIRE(p.speedMbps > 0);
  std::string log = logged(
      [&] {
    Pair onSecond(all.get(), 1 << 16, 1);
    exchange(onSecond, {1, 4000});
      },
      "INFO");
  // Each end on the device it chose (net_device.h): here both on the second.
  REQUIRE(log.find("on emu1:1: connected") != std::string::npos);
  REQUIRE(log.find("on emu0:1: connected") == std::string::npos);
  log = logged(
      [&] {
    Pair across(all.get(), 1 << 16, 1, 0);  // a GPU near the first NIC sends to a rank near the second
    exchange(across, {1, 4000});
      },
      "INFO");
  REQUIRE(log.find("on emu1:1: connected") != std::string::npos);
  REQUIRE(log.find("on emu0:1: connected") != std::string::npos);
  setenv("COLL_IB_HCA", "^emu0", 1);
  auto one = must(makeIbBackend());
  REQUIRE(one->devices() == 1);
  must(one->properties(0, &p));
  REQUIRE(p.name == "emu1:1");
  setenv("COLL_IB_HCA", "=emu1:2", 1);
  Result<std::unique_ptr<NetBackend>> none = makeIbBackend();
  REQUIRE_FALSE(none.ok());
  REQUIRE(none.status().message().find("emu1:1 (not in IB_HCA)") != std::string::npos);
}

TEST_CASE("messages of 0 B to 4 MiB both ways, checked", "[ib]") {
  const char* link = GENERATE("ib", "eth");
  const char* qps = GENERATE("1", "3");
  CAPTURE(link, qps);
  EmuEnv env(link);
  setenv("COLL_IB_QPS_PER_CONNECTION", qps, 1);
  auto b = must(makeIbBackend());
  Pair ab(b.get()), ba(b.get());
  REQUIRE(ibCommQp(ab.send.get(), std::atoi(qps) - 1) != nullptr);
  REQUIRE(ibCommQp(ab.send.get(), std::atoi(qps)) == nullptr);
  exchange(ab, {0, 1, 7, 129, 4096, 65537});
  exchange(ba, {1 << 20, 3 << 20});
  exchange(ab, {4 << 20});
  exchange(ba, {0});
  // More messages than the CTS FIFO holds, a few at a time.
  for (int round = 0; round < 12; ++round) exchange(ab, {100, 200, 300, 0, 5000});
}

TEST_CASE("a message larger than the receive is an error", "[ib]") {
  EmuEnv env;
  auto b = must(makeIbBackend());
  Pair p(b.get(), 1 << 16);
  NetRequest* r = post([&] { return p.b->irecv(p.recv.get(), p.rbuf.data(), 100); });
  Status st = postAndWait(p.b, [&] { return p.b->isend(p.send.get(), p.sbuf.data(), 101); });
  REQUIRE_FALSE(st.ok());
  REQUIRE(st.message().find("101 bytes for a receive of at most 100") != std::string::npos);
  static_cast<void>(r);
}

TEST_CASE("a QP forced into error gives errors naming the verbs status", "[ib]") {
  EmuEnv env;
  setenv("COLL_IB_QPS_PER_CONNECTION", "2", 1);
  setenv("COLL_IB_TIMEOUT", "8", 1);  // ~1 ms per try: retry exceeded quickly
  auto b = must(makeIbBackend());
  Pair p(b.get(), 1 << 16);
  exchange(p, {1000});
  void* lib = dlopen(COLL_VERBS_EMU_PATH, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  auto force = reinterpret_cast<int (*)(ibv_qp*)>(dlsym(lib, "collVerbsEmuForceError"));
  REQUIRE(force);
  // The receive's credit reaches the sender (over QP 0), then the receiver's QP 1 fails.
  NetRequest* r = post([&] { return p.b->irecv(p.recv.get(), p.rbuf.data(), 1000); });
  REQUIRE(force(ibCommQp(p.recv.get(), 1)) == 0);
  dlclose(lib);
  const auto start = Clock::now();
  std::vector<size_t> sizes;
  Status rs = waitAll(p.b, {r}, &sizes);
  REQUIRE_FALSE(rs.ok());
  REQUIRE(rs.message().find("Work Request Flushed Error") != std::string::npos);
  REQUIRE(rs.message().find("ib receive from 127.0.0.1:") != std::string::npos);
  // The sender's part on QP 1 is never answered by the QP in ERR: retry exceeded.
  Status ss = postAndWait(p.b, [&] { return p.b->isend(p.send.get(), p.sbuf.data(), 1000); });
  REQUIRE_FALSE(ss.ok());
  REQUIRE(ss.message().find("transport retry counter exceeded") != std::string::npos);
  REQUIRE(ss.message().find("ib send to 127.0.0.1:") != std::string::npos);
  REQUIRE(Clock::now() - start < std::chrono::seconds(5));
  // The errors stick.
  REQUIRE_FALSE(p.b->isend(p.send.get(), p.sbuf.data(), 1).ok());
  REQUIRE_FALSE(p.b->irecv(p.recv.get(), p.rbuf.data(), 1).ok());
}

TEST_CASE("a lost credit fails both ends naming each other within seconds", "[ib]") {
  EmuEnv env;
  auto b = must(makeIbBackend());
  Pair p(b.get(), 1 << 16);
  exchange(p, {64});
  void* lib = dlopen(COLL_VERBS_EMU_PATH, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  auto drop = reinterpret_cast<int (*)(ibv_qp*, int)>(dlsym(lib, "collVerbsEmuDropWrites"));
  REQUIRE(drop);
  REQUIRE(drop(ibCommQp(p.recv.get(), 0), 1) == 0);  // the next credit completes but never lands
  dlclose(lib);
  // Requests 0 and 1 were the set-up message and the exchange: the credit of #2 is lost.
  NetRequest* r = post([&] { return p.b->irecv(p.recv.get(), p.rbuf.data(), 64); });
  NetRequest* s = post([&] { return p.b->isend(p.send.get(), p.sbuf.data(), 64); });
  const auto start = Clock::now();
  Status rs, ss;
  size_t size = 0;
  bool done = false;
  while ((rs.ok() || ss.ok()) && !done && Clock::now() - start < std::chrono::seconds(10)) {
    if (rs.ok()) rs = p.b->test(r, &done, &size);
    if (ss.ok() && !done) ss = p.b->test(s, &done, &size);
  }
  REQUIRE_FALSE(done);
  CAPTURE(ss.message(), rs.message());
  REQUIRE(Clock::now() - start < std::chrono::seconds(5));
  REQUIRE(ss.message().find("credit #2 never arrived") != std::string::npos);
  REQUIRE(ss.message().find("ib send to 127.0.0.1:") != std::string::npos);
  REQUIRE(rs.message().find("never received credit #2") != std::string::npos);
  REQUIRE(rs.message().find("ib receive from 127.0.0.1:") != std::string::npos);
}

TEST_CASE("a peer that went away is an error, not a hang", "[ib]") {
  EmuEnv env;
  auto b = must(makeIbBackend());
  Pair p(b.get(), 1 << 16);
  exchange(p, {64});
  NetRequest* r = post([&] { return p.b->irecv(p.recv.get(), p.rbuf.data(), 64); });
  p.send.reset();  // the sender's side closes: its side channel with it
  std::vector<size_t> sizes;
  const auto start = Clock::now();
  Status st = waitAll(p.b, {r}, &sizes);
  REQUIRE_FALSE(st.ok());
  REQUIRE(st.message().find("closed") != std::string::npos);
  REQUIRE(Clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("out-of-range knobs warn naming the variable and use the default", "[ib]") {
  EmuEnv env;
  setenv("COLL_IB_QPS_PER_CONNECTION", "99", 1);
  auto b = must(makeIbBackend());
  std::unique_ptr<Pair> p;
  std::string log = logged([&] {
    p = std::make_unique<Pair>(b.get(), 1 << 16);
    exchange(*p, {10});
  });
  REQUIRE(log.find("NCCL_IB_QPS_PER_CONNECTION=99 is out of range 1..16") != std::string::npos);
  REQUIRE(ibCommQp(p->send.get(), 0) != nullptr);
  REQUIRE(ibCommQp(p->send.get(), 1) == nullptr);
}

namespace {

// Whether this machine has the peer-memory module loaded (then a CUDA pointer registers,
// and a backend without dma-buf still takes GPU memory).
bool peerMemLoaded() {
  return access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
         access("/sys/module/nvidia_peermem", F_OK) == 0;
}

}  // namespace

TEST_CASE("GPUDirect RDMA: receives into a dma-buf range arrive and are flushed", "[ib]") {
  const char* link = GENERATE("ib", "eth");  // the flush QP addresses its own LID, or its GID
  CAPTURE(link);
  EmuEnv env(link);
  setenv("COLL_IB_QPS_PER_CONNECTION", "2", 1);
  auto b = must(makeIbBackend());
  NetProperties props;
  must(b->properties(0, &props));
  REQUIRE(props.dmaBuf);
  REQUIRE_FALSE(props.hostMemOnly);
  Pair p(b.get(), 1 << 16);
  // The receiver's slots and the sender's source in "GPU memory": a memfd each, the slots
  // at offset 4096 of theirs, registered through their dma-bufs.
  constexpr size_t kSlots = 1 << 18;
  test::MemFd rgpu(kSlots + 4096, 4096, kSlots), sgpu(kSlots, 0, kSlots);
  must(b->regMrGpu(p.recv.get(), rgpu.p(), kSlots, {rgpu.fd(), 4096}));
  must(b->regMrGpu(p.send.get(), sgpu.p(), kSlots, {sgpu.fd(), 0}));
  for (size_t i = 0; i < kSlots; ++i) sgpu.p()[i] = static_cast<char>(i * 13 + 1);
  const std::vector<size_t> sizes = {1, 4096, 65537, 100000};
  size_t off = 0;
  for (size_t n : sizes) {
    NetRequest* r = post([&] { return b->irecv(p.recv.get(), rgpu.p() + off, kSlots - off); });
    NetRequest* s = post([&] { return b->isend(p.send.get(), sgpu.p() + off, n); });
    std::vector<size_t> got;
    must(waitAll(b.get(), {s, r}, &got));
    REQUIRE(got[1] == n);
    NetRequest* f = must(b->iflush(p.recv.get(), rgpu.p() + off, n));
    REQUIRE(f != nullptr);
    must(waitAll(b.get(), {f}, &got));
    CHECK(got[0] == 0);
    std::vector<char> back(n);
    REQUIRE(pread(rgpu.fd(), back.data(), n, static_cast<off_t>(4096 + off)) == static_cast<ssize_t>(n));
    REQUIRE(std::memcmp(back.data(), sgpu.p() + off, n) == 0);  // in the "dma-buf" itself
    off += n;
  }
  // Several flushes in flight, completed in any test order.
  std::vector<NetRequest*> flushes;
  for (int i = 0; i < 5; ++i) flushes.push_back(must(b->iflush(p.recv.get(), rgpu.p() + i, 1)));
  std::vector<size_t> ignored;
  std::reverse(flushes.begin(), flushes.end());
  must(waitAll(b.get(), flushes, &ignored));
  // Nothing to flush: host memory, and zero bytes.
  CHECK(must(b->iflush(p.recv.get(), p.rbuf.data(), 100)) == nullptr);
  CHECK(must(b->iflush(p.recv.get(), rgpu.p(), 0)) == nullptr);
  Result<NetRequest*> outside = b->iflush(p.recv.get(), rgpu.p() + kSlots, 10);
  REQUIRE_FALSE(outside.ok());
  CHECK(outside.status().message().find("no regMr/regMrGpu covers") != std::string::npos);
  exchange(p, {10, 20000});  // host buffers still work beside GPU ones

  // A READ that fails (the range unmapped: the emulation cannot read it; a NIC's fault
  // would look the same) is the comm's error, naming the flush.
  rgpu.unmap();
  NetRequest* f = must(b->iflush(p.recv.get(), rgpu.p(), 8));
  REQUIRE(f != nullptr);
  std::vector<size_t> got;
  Status st = waitAll(b.get(), {f}, &got);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message().find("flush (iflush) RDMA READ") != std::string::npos);
  CHECK(st.message().find("remote access error") != std::string::npos);
  CHECK(st.message().find("ib receive from 127.0.0.1:") != std::string::npos);
  REQUIRE_FALSE(b->irecv(p.recv.get(), p.rbuf.data(), 1).ok());  // it sticks
}

TEST_CASE("regMrGpu where GPU memory cannot register is refused by name", "[ib]") {
  EmuEnv env;
  test::MemFd gpu(1 << 16, 0, 1 << 16);
  SECTION("a dma-buf registration the verbs call refuses names the call") {
    auto b = must(makeIbBackend());
    Pair p(b.get(), 1 << 12);
    Status st = b->regMrGpu(p.recv.get(), gpu.p(), 1 << 16, {gpu.fd(), 4096});  // beyond the file
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("GPU memory on emu0:1") != std::string::npos);
    CHECK(st.message().find("ibv_reg_dmabuf_mr of 65536 bytes at offset 4096") != std::string::npos);
    CHECK(st.message().find("Invalid argument") != std::string::npos);
    if (!peerMemLoaded()) {
      Status ptr = b->regMrGpu(p.recv.get(), gpu.p(), 1 << 16, {-1, 0});
      REQUIRE_FALSE(ptr.ok());
      CHECK(ptr.message().find("peer-memory module") != std::string::npos);
      CHECK(ptr.message().find("register it through its dma-buf") != std::string::npos);
    }
  }
  SECTION("no dma-buf support in the provider or kernel") {
    setenv("COLL_VERBS_EMU_DMABUF", "0", 1);
    auto b = must(makeIbBackend());
    NetProperties props;
    must(b->properties(0, &props));
    CHECK_FALSE(props.dmaBuf);
    Pair p(b.get(), 1 << 12);
    Status st = b->regMrGpu(p.send.get(), gpu.p(), 1 << 16, {gpu.fd(), 0});
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("GPU memory on emu0:1: no dma-buf registration") != std::string::npos);
    if (peerMemLoaded()) {
      WARN("the peer-memory module is loaded here: the backend takes CUDA pointers");
      CHECK_FALSE(props.hostMemOnly);
    } else {
      CHECK(props.hostMemOnly);
    }
  }
  SECTION("a backend that registers host memory only (socket)") {
    Result<NetBackend*> sock = netBackendNamed("Socket");
    REQUIRE(sock.ok());
    // The default refuses before it looks at the comm.
    Status st = sock.value()->regMrGpu(static_cast<NetSendComm*>(nullptr), gpu.p(), 1 << 16, {gpu.fd(), 0});
    REQUIRE_FALSE(st.ok());
    CHECK(st.message().find("net backend Socket registers host memory only") != std::string::npos);
  }
}

// The net plugin loader and the plugin backend, against the test plugins built from
// tests/net_plugin/socket_plugin.cc (NCCL's ABI over loopback TCP; its connect/accept
// answer "not yet" at least once and its isend/irecv give null requests when 4 are
// outstanding, so the retry paths always run).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "base/status.h"
#include "harness.h"
#include "transport/net/net.h"
#include "transport/net/plugin/plugin.h"

using namespace coll;
using testing::ScopedEnv;

namespace {

const std::string kDir = COLL_TEST_PLUGIN_DIR;

std::unique_ptr<NetBackend> load(const std::string& spec) {
  auto r = loadNetPlugin(spec);
  INFO("loading " << spec << ": " << (r.ok() ? std::string("ok") : r.status().message()));
  REQUIRE(r.ok());
  return r.take();
}

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) >> 3);
  return v;
}

// One direction: a send comm and a receive comm, each with one registered region.
struct Connection {
  std::unique_ptr<NetSendComm> send;
  std::unique_ptr<NetRecvComm> recv;
  std::vector<char> sendBuf, recvBuf;
};

Connection connectPair(NetBackend* b, size_t bytes) {
  Connection l;
  NetHandle handle;
  auto listen = b->listen(0, AuthKey{}, &handle);
  REQUIRE(listen.ok());
  auto send = b->connect(0, handle, AuthKey{}, nullptr);  // the plugin answers "not yet": a pending comm
  REQUIRE(send.ok());
  auto recv = b->accept(listen.value().get());  // likewise
  REQUIRE(recv.ok());
  listen.value().reset();  // as NetPendingRecv does: the pending receive keeps the listener
  l.send = send.take();
  l.recv = recv.take();
  l.sendBuf.resize(bytes);
  l.recvBuf.resize(bytes);
  REQUIRE(b->regMr(l.send.get(), l.sendBuf.data(), bytes).ok());  // deferred until connected
  REQUIRE(b->regMr(l.recv.get(), l.recvBuf.data(), bytes).ok());
  return l;
}

// Sends `sizes` over each link (messages at increasing offsets of its registered buffer,
// each link's own contents), receiving as it goes. Each round posts as many as the
// backend takes; a null request is posted again on the next round. `fullPosts` counts
// the null requests of established connections (the plugin's limit of 4 outstanding).
// Returns the first failure, if any.
Status exchange(NetBackend* b, std::vector<Connection*> links, const std::vector<size_t>& sizes, int* fullPosts) {
  struct Flow {
    Connection* link;
    size_t nextSend = 0, nextRecv = 0;
    std::deque<std::pair<NetRequest*, size_t>> sends, recvs;  // request, message index
  };
  std::vector<Flow> flows;
  for (Connection* l : links) {
    flows.emplace_back();
    flows.back().link = l;
  }
  std::vector<size_t> offsets{0};
  for (size_t s : sizes) offsets.push_back(offsets.back() + s);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    bool finished = true;
    for (Flow& f : flows) {
      while (f.nextSend < sizes.size()) {
        auto r = b->isend(f.link->send.get(), f.link->sendBuf.data() + offsets[f.nextSend], sizes[f.nextSend]);
        if (!r.ok()) return r.takeStatus();
        if (!r.value()) {
          *fullPosts += f.nextSend > 0;
          break;
        }
        f.sends.emplace_back(r.value(), f.nextSend++);
      }
      while (f.nextRecv < sizes.size()) {
        auto r = b->irecv(f.link->recv.get(), f.link->recvBuf.data() + offsets[f.nextRecv], sizes[f.nextRecv]);
        if (!r.ok()) return r.takeStatus();
        if (!r.value()) {
          *fullPosts += f.nextRecv > 0;
          break;
        }
        f.recvs.emplace_back(r.value(), f.nextRecv++);
      }
      for (auto* q : {&f.sends, &f.recvs}) {
        if (q->empty()) continue;
        bool done = false;
        size_t size = 0;
        COLL_CHECK(b->test(q->front().first, &done, &size));
        if (done && size != sizes[q->front().second])
          return internalError("message " + std::to_string(q->front().second) + " completed with " +
                               std::to_string(size) + " bytes");
        if (done) q->pop_front();
      }
      finished = finished && f.nextSend == sizes.size() && f.nextRecv == sizes.size() && f.sends.empty() &&
                 f.recvs.empty();
    }
    if (finished) return okStatus();
    if (std::chrono::steady_clock::now() > until) return timeoutError("exchange still pending after 20 s");
  }
}

}  // namespace

TEST_CASE("net plugin: loaded by name, library name and path, and through COLL_NET_PLUGIN", "[net][plugin]") {
  for (const std::string& spec :
       {std::string("testsock"), std::string("libnccl-net-testsock.so"), kDir + "/libnccl-net-testsock.so"}) {
    std::unique_ptr<NetBackend> b = load(spec);
    CHECK(std::string(b->name()) == "TestSock");
    CHECK(netPluginVersion(b.get()) == 12);  // the newest of the five it exports
    CHECK(b->devices() == 1);
    NetProperties props;
    REQUIRE(b->properties(0, &props).ok());
    CHECK(props.name == "lo");
    CHECK(props.hostMemOnly);
    CHECK_FALSE(b->properties(1, &props).ok());
  }
  for (auto [spec, version] :
       {std::pair<const char*, int>{"testsock11", 11}, {"testsock10", 10}, {"testsock9", 9}, {"testsock8", 8}}) {
    INFO(spec);
    CHECK(netPluginVersion(load(spec).get()) == version);
  }

  ScopedEnv net("COLL_NET", nullptr);
  {
    ScopedEnv plugin("NCCL_NET_PLUGIN", "testsock");
    NetBackend* p = netPlugin();
    REQUIRE(p != nullptr);
    CHECK(std::string(p->name()) == "TestSock");
    auto b = netBackend();  // COLL_NET unset: the plugin, NCCL's preference
    REQUIRE(b.ok());
    CHECK(b.value() == p);
    CHECK(checkNetName("testsock").ok());  // case as NCCL_NET: insensitive
    Status st = checkNetName("Verbs");
    CHECK_THAT(st.message(), Catch::Contains("available: Socket, TestSock"));
    ScopedEnv socket("COLL_NET", "Socket");
    auto s = netBackend();
    REQUIRE(s.ok());
    CHECK(std::string(s.value()->name()) == "Socket");
  }
  {
    ScopedEnv plugin("NCCL_NET_PLUGIN", "none");
    CHECK(netPlugin() == nullptr);
    CHECK_FALSE(checkNetName("TestSock").ok());
  }
}

TEST_CASE("net plugin: messages of several sizes both ways, for every ABI version", "[net][plugin]") {
  const std::vector<size_t> sizes{0, 1, 8, 4097, 65536, 3, 1 << 20, 100000, 12, 0, 777};
  size_t total = 0;
  for (size_t s : sizes) total += s;
  for (const char* spec : {"testsock", "testsock11", "testsock10", "testsock9", "testsock8"}) {
    INFO(spec);
    std::unique_ptr<NetBackend> b = load(spec);
    Connection ab = connectPair(b.get(), total), ba = connectPair(b.get(), total);
    std::vector<char> a = pattern(total, 1), c = pattern(total, 2);
    std::copy(a.begin(), a.end(), ab.sendBuf.begin());
    std::copy(c.begin(), c.end(), ba.sendBuf.begin());
    // The plugin's connect and accept answered "not yet" to connect() and accept(), and
    // once more here: nothing is posted yet.
    auto early = b->isend(ab.send.get(), ab.sendBuf.data(), 0);
    REQUIRE(early.ok());
    CHECK(early.value() == nullptr);
    auto earlyRecv = b->irecv(ab.recv.get(), ab.recvBuf.data(), 0);
    REQUIRE(earlyRecv.ok());
    CHECK(earlyRecv.value() == nullptr);
    int fullPosts = 0;
    Status st = exchange(b.get(), {&ab, &ba}, sizes, &fullPosts);
    REQUIRE(st.message() == "");
    CHECK(ab.recvBuf == a);
    CHECK(ba.recvBuf == c);
    CHECK(fullPosts > 0);  // the plugin's limit of 4 outstanding answered "later" too
  }
}

TEST_CASE("net plugin: unregistered buffers and plugin failures are errors naming the call", "[net][plugin]") {
  std::unique_ptr<NetBackend> b = load("testsock");
  Connection l = connectPair(b.get(), 64);
  int fullPosts = 0;
  REQUIRE(exchange(b.get(), {&l}, {16}, &fullPosts).ok());  // connected

  std::vector<char> elsewhere(16);
  auto r = b->isend(l.send.get(), elsewhere.data(), elsewhere.size());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("not registered"));
  auto past = b->isend(l.send.get(), l.sendBuf.data() + 60, 8);  // runs off the region's end
  REQUIRE_FALSE(past.ok());

  // A message longer than the receive posted for it: the plugin's test() fails, and the
  // error names the plugin, the call and the ncclResult_t.
  auto s = b->isend(l.send.get(), l.sendBuf.data(), 64);
  REQUIRE(s.ok());
  REQUIRE(s.value() != nullptr);
  auto q = b->irecv(l.recv.get(), l.recvBuf.data(), 10);
  REQUIRE(q.ok());
  REQUIRE(q.value() != nullptr);
  Status st;
  bool done = false;
  size_t size = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (st.ok() && !done && std::chrono::steady_clock::now() < until) st = b->test(q.value(), &done, &size);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("net plugin TestSock"));
  CHECK_THAT(st.message(), Catch::Contains("test returned ncclInternalError (3)"));
}

// maxP2pBytes sits after the virtual NIC, which version 12 made larger: a table read
// with another version's layout sees a different value, and its connections fail.
TEST_CASE("net plugin: a device's maxP2pBytes bounds its messages and must be valid", "[net][plugin]") {
  for (const char* spec : {"testsock", "testsock11", "testsock9"}) {
    INFO(spec);
    std::unique_ptr<NetBackend> b = load(spec);
    {
      ScopedEnv limit("TESTSOCK_MAX_P2P", "4096");
      Connection l = connectPair(b.get(), 8192);
      int fullPosts = 0;
      REQUIRE(exchange(b.get(), {&l}, {4096, 1}, &fullPosts).message() == "");
      auto r = b->isend(l.send.get(), l.sendBuf.data(), 4097);
      REQUIRE_FALSE(r.ok());
      CHECK(r.status().code() == Code::kInvalidArgument);
      CHECK_THAT(r.status().message(), Catch::Contains("a message of 4097 bytes, more than the 4096"));
    }
    for (const char* bad : {"0", "1099511627777"}) {  // nothing, and one byte over 2^40
      ScopedEnv limit("TESTSOCK_MAX_P2P", bad);
      NetHandle handle;
      auto listen = b->listen(0, AuthKey{}, &handle);
      REQUIRE_FALSE(listen.ok());
      CHECK_THAT(listen.status().message(), Catch::Contains(std::string("device 0 reports maxP2pBytes ") + bad));
      NetProperties props;
      CHECK_FALSE(b->properties(0, &props).ok());
    }
  }
}

TEST_CASE("net plugin: an old version, no symbol or no library: clear errors, then the socket backend",
          "[net][plugin]") {
  auto old = loadNetPlugin("testsockold");
  REQUIRE_FALSE(old.ok());
  CHECK_THAT(old.status().message(), Catch::Contains("ncclNetPlugin_v8"));
  CHECK_THAT(old.status().message(), Catch::Contains("ncclNetPlugin_v12, ncclNetPlugin_v11"));
  CHECK_THAT(old.status().message(), Catch::Contains("it exports ncclNetPlugin_v6, ncclNetPlugin_v13"));
  CHECK_THAT(old.status().message(), Catch::Contains("older than version 8"));
  CHECK_THAT(old.status().message(), Catch::Contains("newer than version 12"));
  CHECK_THAT(old.status().message(), Catch::Contains("libnccl-net-testsockold.so"));

  auto none = loadNetPlugin(kDir + "/libnccl-net-testsocknone.so");
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.status().message(), Catch::Contains("ncclNetPlugin_v8"));
  CHECK_THAT(none.status().message(), Catch::Contains("no ncclNetPlugin_v* symbol"));

  auto missing = loadNetPlugin("nosuchplugin");
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.status().message(), Catch::Contains("libnccl-net-nosuchplugin.so"));

  // Named but unusable: a WARN, and the built-in backend carries on.
  ScopedEnv net("COLL_NET", nullptr);
  for (const char* spec : {"testsockold", "nosuchplugin"}) {
    ScopedEnv plugin("NCCL_NET_PLUGIN", spec);
    CHECK(netPlugin() == nullptr);
    auto b = netBackend();
    REQUIRE(b.ok());
    CHECK(std::string(b.value()->name()) == "Socket");
  }
}

// The socket net backend on its own: one connection over loopback, driven by hand.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "harness.h"
#include "transport/net/socket/socket_net.h"

using namespace coll;
using testing::ScopedEnv;

namespace {

// Tests req until it completes or fails (bounded: a hang is a failure too).
Status waitFor(NetBackend* b, NetRequest* req, size_t* size) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    bool done = false;
    Status st = b->test(req, &done, size);
    if (!st.ok() || done) return st;
  }
  return Status(Code::kInternal, "request still pending after 20 s");
}

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) >> 3);
  return v;
}

}  // namespace

// Regression: a sender that sent its last messages and closed is read to its end. The
// receiver posts ahead (as NetRecv does), so socket 0 sees the close while it waits for
// a header that will never come; that used to fail the whole connection at once, and
// the parts of the last message still unread on the other sockets were lost ("connection
// closed" at the last slice of a 3-rank sendrecv, CI of 2026-11-22).
TEST_CASE("socket backend: a closed sender's last messages arrive on every socket", "[net]") {
  for (const char* helpers : {"0", "2"}) {
    ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
    ScopedEnv threads("COLL_SOCKET_NTHREADS", helpers);
    ScopedEnv socks("COLL_NSOCKS_PERTHREAD", "2");
    INFO("COLL_SOCKET_NTHREADS=" << helpers);
    std::unique_ptr<NetBackend> b = makeSocketBackend();
    REQUIRE(b->devices() == 1);
    NetHandle handle;
    auto listen = b->listen(0, &handle);
    REQUIRE(listen.ok());
    auto send = b->connect(0, handle);
    REQUIRE(send.ok());
    auto recv = b->accept(listen.value().get());
    REQUIRE(recv.ok());

    // Small enough to sit in the kernel's socket buffers whole, large enough to stripe.
    const size_t kBytes = 256 * 1024;
    const int kMessages = 3;
    std::vector<std::vector<char>> sent;
    for (int m = 0; m < kMessages; ++m) {
      sent.push_back(pattern(kBytes, m));
      auto req = b->isend(send.value().get(), sent.back().data(), kBytes);
      REQUIRE(req.ok());
      size_t size = 0;
      Status st = waitFor(b.get(), req.value(), &size);
      REQUIRE(st.ok());
    }
    send.value().reset();  // the sender is done and closes

    std::vector<std::vector<char>> got(kMessages + 1, std::vector<char>(kBytes));
    std::vector<NetRequest*> reqs;
    for (auto& g : got) {
      auto req = b->irecv(recv.value().get(), g.data(), kBytes);
      REQUIRE(req.ok());
      reqs.push_back(req.value());
    }
    for (int m = 0; m < kMessages; ++m) {
      INFO("message " << m);
      size_t size = 0;
      Status st = waitFor(b.get(), reqs[static_cast<size_t>(m)], &size);
      REQUIRE(st.message() == "");
      CHECK(size == kBytes);
      CHECK(got[static_cast<size_t>(m)] == sent[static_cast<size_t>(m)]);
    }
    // The receive posted beyond the last message reports the close.
    size_t size = 0;
    Status st = waitFor(b.get(), reqs.back(), &size);
    CHECK_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains("connection closed"));
    recv.value().reset();
  }
}

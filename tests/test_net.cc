// The socket net backend on its own: one connection over loopback, driven by hand.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "bootstrap/auth.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "harness.h"
#include "transport/net/gdr.h"
#include "transport/net/net_device.h"
#include "transport/net/socket/socket_net.h"
#include "transport/net/socket/socket_wire.h"

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

// One connection of a fresh socket backend (as configured by the environment) to itself.
struct Loopback {
  std::unique_ptr<NetBackend> backend;
  std::unique_ptr<NetSendComm> send;
  std::unique_ptr<NetRecvComm> recv;
};
Loopback connectLoopback() {
  Loopback c;
  c.backend = makeSocketBackend();
  REQUIRE(c.backend->devices() == 1);
  NetHandle handle;
  auto listen = c.backend->listen(0, AuthKey{}, &handle);
  REQUIRE(listen.ok());
  auto send = c.backend->connect(0, handle, AuthKey{}, nullptr);
  REQUIRE(send.ok());
  auto recv = c.backend->accept(listen.value().get());
  REQUIRE(recv.ok());
  c.send = send.take();
  c.recv = recv.take();
  return c;
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
    Loopback c = connectLoopback();
    NetBackend* b = c.backend.get();

    // Small enough to sit in the kernel's socket buffers whole, large enough to stripe.
    const size_t kBytes = 256 * 1024;
    const int kMessages = 3;
    std::vector<std::vector<char>> sent;
    for (int m = 0; m < kMessages; ++m) {
      sent.push_back(pattern(kBytes, m));
      auto req = b->isend(c.send.get(), sent.back().data(), kBytes);
      REQUIRE(req.ok());
      size_t size = 0;
      Status st = waitFor(b, req.value(), &size);
      REQUIRE(st.ok());
    }
    c.send.reset();  // the sender is done and closes

    std::vector<std::vector<char>> got(kMessages + 1, std::vector<char>(kBytes));
    std::vector<NetRequest*> reqs;
    for (auto& g : got) {
      auto req = b->irecv(c.recv.get(), g.data(), kBytes);
      REQUIRE(req.ok());
      reqs.push_back(req.value());
    }
    for (int m = 0; m < kMessages; ++m) {
      INFO("message " << m);
      size_t size = 0;
      Status st = waitFor(b, reqs[static_cast<size_t>(m)], &size);
      REQUIRE(st.message() == "");
      CHECK(size == kBytes);
      CHECK(got[static_cast<size_t>(m)] == sent[static_cast<size_t>(m)]);
    }
    // The receive posted beyond the last message reports the close.
    size_t size = 0;
    Status st = waitFor(b, reqs.back(), &size);
    CHECK_FALSE(st.ok());
    CHECK_THAT(st.message(), Catch::Contains("connection closed"));
    c.recv.reset();
  }
}

// Over loopback the kernel copies a message into page fragments that start at offset 0
// whenever the previous ones were consumed, so data right behind an 8-byte header lands
// 8 bytes past its source's place in the page; with a page-aligned source the copy is
// then up to 15x slower on this CPU (docs/PERFORMANCE.md). Large messages pad the
// header so that the data keeps its source's offset modulo 64.
TEST_CASE("socket backend: header padding keeps large messages' alignment", "[net]") {
  for (uintptr_t a = 0; a < 128; ++a) {
    const void* p = reinterpret_cast<const void*>(uintptr_t{4096} * 3 + a);
    size_t pad = socketHeaderPad(p, 1 << 20);
    INFO("source offset " << a);
    CHECK(pad < 64);
    CHECK((8 + pad) % 64 == a % 64);
    CHECK(socketHeaderPad(p, 100) == 0);  // small messages: no padding
  }
}

TEST_CASE("socket backend: messages of every alignment arrive intact", "[net]") {
  for (const char* nsocks : {"1", "2"}) {
    ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
    ScopedEnv threads("COLL_SOCKET_NTHREADS", "0");
    ScopedEnv socks("COLL_NSOCKS_PERTHREAD", nsocks);
    INFO("COLL_NSOCKS_PERTHREAD=" << nsocks);
    Loopback c = connectLoopback();
    NetBackend* b = c.backend.get();

    int seed = 0;
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{16384}, size_t{20000}, size_t{65541}, size_t{300001}}) {
      for (size_t srcOff : {0, 1, 8, 15, 16, 48, 56, 63}) {
        const size_t dstOff = (srcOff * 7 + 3) % 64;
        INFO(bytes << " bytes, source offset " << srcOff << ", destination offset " << dstOff);
        std::vector<char> src(bytes + 4096 + 64), dst(bytes + 4096 + 64, 0);
        char* s = src.data() + ((4096 - reinterpret_cast<uintptr_t>(src.data()) % 4096) % 4096) + srcOff;
        char* d = dst.data() + ((4096 - reinterpret_cast<uintptr_t>(dst.data()) % 4096) % 4096) + dstOff;
        std::vector<char> want = pattern(bytes, ++seed);
        std::copy(want.begin(), want.end(), s);
        auto sreq = b->isend(c.send.get(), s, bytes);
        REQUIRE(sreq.ok());
        auto rreq = b->irecv(c.recv.get(), d, bytes + 17);  // room to spare, as NetRecv posts
        REQUIRE(rreq.ok());
        bool sent = false, got = false;
        size_t sentSize = 0, gotSize = 0;
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!(sent && got) && std::chrono::steady_clock::now() < until) {
          if (!sent) REQUIRE(b->test(sreq.value(), &sent, &sentSize).message() == "");
          if (!got) REQUIRE(b->test(rreq.value(), &got, &gotSize).message() == "");
        }
        REQUIRE(sent);
        REQUIRE(got);
        CHECK(gotSize == bytes);
        CHECK(std::equal(want.begin(), want.end(), d));
        CHECK(d[bytes] == 0);  // nothing written past the message
      }
    }
  }
}

namespace {

// A backend of fixed devices at given PCI paths (only devices and properties are asked).
class PathBackend : public NetBackend {
 public:
  explicit PathBackend(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  const char* name() const override { return "Paths"; }
  int devices() override { return static_cast<int>(paths_.size()); }
  Status properties(int dev, NetProperties* p) override {
    p->name = "nic" + std::to_string(dev);
    p->pciPath = paths_[static_cast<size_t>(dev)];
    return okStatus();
  }
  Result<std::unique_ptr<NetListenComm>> listen(int, const AuthKey&, NetHandle*) override {
    return internalError("unused");
  }
  Result<std::unique_ptr<NetSendComm>> connect(int, const NetHandle&, const AuthKey&,
                                               const std::atomic<bool>*) override {
    return internalError("unused");
  }
  Result<std::unique_ptr<NetRecvComm>> accept(NetListenComm*) override { return internalError("unused"); }
  Result<NetRequest*> isend(NetSendComm*, const void*, size_t) override { return internalError("unused"); }
  Result<NetRequest*> irecv(NetRecvComm*, void*, size_t) override { return internalError("unused"); }
  Status test(NetRequest*, bool*, size_t*) override { return internalError("unused"); }

 private:
  std::vector<std::string> paths_;
};

// Two sockets' root complexes, each with two PCIe switches holding a GPU and a NIC, as
// on a DGX: /sys/devices/pci0000:<root>/<root port>/<switch up>/<switch down>/<function>.
std::string dgxPath(int socket, int sw, const char* fn) {
  const std::string root = socket ? "pci0000:80" : "pci0000:00";
  const std::string port = root.substr(7) + ":01." + std::to_string(sw);
  return "/sys/devices/" + root + "/0000:" + port + "/0000:1" + std::to_string(sw) + ":00.0/0000:2" +
         std::to_string(sw) + ":08.0/" + fn;
}

}  // namespace

TEST_CASE("GPUDirect RDMA: the PCI path between GPU and NIC against NCCL_NET_GDR_LEVEL decides", "[net]") {
  const std::string gpu0 = dgxPath(0, 0, "0000:3b:00.0");
  const std::string nearNic = dgxPath(0, 0, "0000:3c:00.0"), otherSwitch = dgxPath(0, 1, "0000:5c:00.0");
  const std::string otherSocket = dgxPath(1, 0, "0000:bc:00.0");
  // A NIC behind a second switch below the GPU's switch: two switches, not the CPU.
  const std::string nested = dgxPath(0, 0, "0000:30:00.0/0000:31:04.0/0000:4c:00.0");
  CHECK(pciPathBetween(gpu0, gpu0) == PciPath::kLoc);
  CHECK(pciPathBetween(gpu0, nearNic) == PciPath::kPix);
  CHECK(pciPathBetween(gpu0, nested) == PciPath::kPxb);
  CHECK(pciPathBetween(gpu0, otherSwitch) == PciPath::kPhb);
  CHECK(pciPathBetween(gpu0, otherSocket) == PciPath::kSys);  // no numa_node to read: SYS
  CHECK(pciPathBetween("", nearNic) == PciPath::kSys);
  CHECK(pciPathBetween(gpu0, "") == PciPath::kSys);  // a virtual interface

  NetProperties nic;
  nic.name = "mlx5_0";
  nic.pciPath = nearNic;
  nic.hostMemOnly = false;
  nic.dmaBuf = true;
  GdrChoice c = chooseGdr(nic, gpu0, true, PciPath::kPxb);
  CHECK(c.on);
  CHECK(c.dmaBuf);
  CHECK(c.why == "PCI path PIX between the GPU and mlx5_0, GPU memory registered as dma-buf");
  c = chooseGdr(nic, gpu0, false, PciPath::kPxb);  // the GPU exports no dma-buf, no peermem
  CHECK(!c.on);
  CHECK(c.why == "the GPU exports no dma-buf and mlx5_0 takes no CUDA pointers (nvidia-peermem is not loaded)");
  nic.cudaPtr = true;
  c = chooseGdr(nic, gpu0, false, PciPath::kPxb);
  CHECK((c.on && !c.dmaBuf));
  nic.pciPath = otherSwitch;
  c = chooseGdr(nic, gpu0, true, PciPath::kPxb);
  CHECK(!c.on);
  CHECK(c.why == "PCI path PHB between the GPU and mlx5_0 is farther than NCCL_NET_GDR_LEVEL PXB");
  CHECK(chooseGdr(nic, gpu0, true, PciPath::kPhb).on);
  nic.hostMemOnly = true;
  CHECK(chooseGdr(nic, gpu0, true, PciPath::kSys).why == "net device mlx5_0 registers host memory only");

  CHECK(gdrLevel().value() == PciPath::kPxb);  // NCCL's default
  {
    testing::ScopedEnv env("NCCL_NET_GDR_LEVEL", "PHB");
    CHECK(gdrLevel().value() == PciPath::kPhb);
  }
  {
    testing::ScopedEnv env("COLL_NET_GDR_LEVEL", "4");
    CHECK(gdrLevel().value() == PciPath::kSys);
  }
  testing::ScopedEnv env("COLL_NET_GDR_LEVEL", "NEAR");
  Result<PciPath> bad = gdrLevel();
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("\"NEAR\" is not one of LOC, PIX, PXB, PHB, SYS") != std::string::npos);
}

TEST_CASE("net devices: channels use the NICs nearest the rank's GPU on the PCI tree", "[net]") {
  const std::string gpu0 = dgxPath(0, 0, "0000:3b:00.0"), gpu1 = dgxPath(0, 1, "0000:5b:00.0");
  const std::string gpu2 = dgxPath(1, 0, "0000:bb:00.0");
  const std::vector<std::string> nics = {dgxPath(0, 0, "0000:3c:00.0"), dgxPath(0, 1, "0000:5c:00.0"),
                                         dgxPath(1, 0, "0000:bc:00.0"), dgxPath(1, 0, "0000:bd:00.0")};
  CHECK(pciDistance(gpu0, nics[0]) == 2);  // both under one switch port: PIX
  CHECK(pciDistance(gpu0, nics[1]) > pciDistance(gpu0, nics[0]));
  CHECK(pciDistance(gpu0, nics[2]) > pciDistance(gpu0, nics[1]));  // another socket: SYS
  CHECK(pciDistance("", nics[0]) == -1);
  CHECK(nearestDevices(gpu0, nics) == std::vector<int>{0});
  CHECK(nearestDevices(gpu1, nics) == std::vector<int>{1});
  CHECK(nearestDevices(gpu2, nics) == std::vector<int>{2, 3});      // two NICs under its switch
  CHECK(nearestDevices("", nics) == std::vector<int>{0, 1, 2, 3});  // a host rank: every device
  CHECK(nearestDevices(gpu0, {"", ""}) == std::vector<int>{0, 1});  // virtual interfaces

  PathBackend b(nics);
  for (int ch = 0; ch < 8; ++ch) {
    INFO("channel " << ch);
    CHECK(netDeviceFor(&b, gpu0, ch) == 0);
    CHECK(netDeviceFor(&b, gpu2, ch) == 2 + ch % 2);
    CHECK(netDeviceFor(&b, "", ch) == ch % 4);
  }
  CHECK(pciSysPath("") == "");
  CHECK(pciSysPath("ffff:ff:1f.7") == "");  // no such function here
  // This machine's own first PCI function, spelt in capitals as CUDA spells bus ids.
  std::vector<std::string> fns;
  std::error_code ec;  // a machine without /sys/bus/pci lists nothing
  for (const auto& e : std::filesystem::directory_iterator("/sys/bus/pci/devices", ec))
    fns.push_back(e.path().filename().string());
  if (!fns.empty()) {
    std::string upper = fns[0];
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(pciSysPath(upper).rfind("/sys/devices/", 0) == 0);
  }
}

// A failed init is told to the ranks of other processes before those of the process
// hosting the root: one of those may end the process, and the root's thread with it.
TEST_CASE("bootstrap: the root tells other processes' ranks of a failed init before its own", "[net][bootstrap]") {
  std::vector<PeerInfo> infos(5);
  auto place = [&](int r, int32_t pid, const char* host) {
    infos[r].pid = pid;
    std::snprintf(infos[r].hostId, sizeof(infos[r].hostId), "%s", host);
  };
  place(0, 100, "hostA");
  place(1, 101, "hostA");
  place(2, 100, "hostB");  // same pid on another host: another process
  place(3, 100, "hostA");
  place(4, 102, "hostA");
  CHECK(failureReplyOrder(infos, 100, "hostA") == std::vector<int>{1, 2, 4, 0, 3});
  CHECK(failureReplyOrder(infos, 999, "hostA") == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(failureReplyOrder({}, 100, "hostA").empty());
}

// A root that takes a rank's join and then closes unanswered is one whose process ended
// (the root tells every failure before closing): the rank's error says so, so that the
// reader looks for that process's own error instead of blaming the network.
TEST_CASE("bootstrap: a root that closes without answering the join is named as gone", "[net][bootstrap]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  Result<SockAddr> lo = parseSockAddr("127.0.0.1:0");
  REQUIRE(lo.ok());
  UniqueIdData id{};
  id.magic = kIdMagic;
  id.root = lo.value();
  Result<AuthKey> key = randomAuthKey();
  REQUIRE(key.ok());
  id.key = key.value();
  Result<Socket> listener = Socket::listen(&id.root);
  REQUIRE(listener.ok());
  std::thread fakeRoot([&] {
    Result<Socket> s = listener.value().accept(deadlineIn(10));
    if (!s.ok() || !authAccept(s.value(), id.key, AuthPurpose::kRoot, deadlineIn(10)).ok()) return;
    char join[sizeof(JoinMsg)];
    (void)s.value().recvAll(join, sizeof(join), deadlineIn(10));
  });  // the accepted socket closes here, nothing sent
  PeerInfo self{};
  self.pid = getpid();
  auto bs = Bootstrap::create(id, 0, 2, self, std::make_shared<AbortState>());
  fakeRoot.join();
  REQUIRE_FALSE(bs.ok());
  INFO(bs.status().message());
  CHECK(bs.status().message().find("waiting for the other ranks: connection closed") != std::string::npos);
  CHECK(bs.status().message().find("the root's process, the one that made the unique id, ended unanswered") !=
        std::string::npos);
}

// A peer that passes the handshake and hello (it knows the key) and then sends a frame header saying
// 2^60 bytes: the communicator fails with an error naming that peer and the length, and
// the process lives on (it used to allocate what the header said and die).
TEST_CASE("bootstrap: a frame longer than the limit fails the communicator, naming the peer", "[net][bootstrap]") {
  ScopedEnv ifn("COLL_SOCKET_IFNAME", "lo");
  Result<SockAddr> lo = parseSockAddr("127.0.0.1:0");
  REQUIRE(lo.ok());
  Result<UniqueIdData> id = startRootAt(lo.value());
  REQUIRE(id.ok());
  PeerInfo self{};
  std::snprintf(self.hostname, sizeof(self.hostname), "framehost");
  std::snprintf(self.hostId, sizeof(self.hostId), "framehost-id");
  self.pid = getpid();
  self.cudaDev = -1;
  auto abort = std::make_shared<AbortState>();
  auto bs = Bootstrap::create(id.value(), 0, 1, self, abort);
  REQUIRE(bs.ok());

  Result<Socket> conn = Socket::connect(bs.value()->peers()[0].bootAddr, deadlineIn(5));
  REQUIRE(conn.ok());
  REQUIRE(authConnect(conn.value(), id.value().key, AuthPurpose::kPeer, deadlineIn(5)).ok());
  HelloMsg hello{kWireMagic, 0};
  REQUIRE(conn.value().sendAll(&hello, sizeof(hello), deadlineIn(5)).ok());
  FrameHeader frame{7, uint64_t{1} << 60};
  REQUIRE(conn.value().sendAll(&frame, sizeof(frame), deadlineIn(5)).ok());

  for (int i = 0; i < 500 && !abort->raised(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(abort->raised());
  const std::string why = abort->status().message();
  INFO(why);
  CHECK(why.find("rank 0 (framehost, 127.0.0.1:") != std::string::npos);
  CHECK(why.find("frame of 1152921504606846976 bytes") != std::string::npos);
  // A receive waiting on that peer ends with the reason, not at the bootstrap timeout.
  std::vector<char> out;
  Status st = bs.value()->recv(0, 7, &out);
  CHECK_FALSE(st.ok());
  CHECK(st.message() == why);
  bs.value()->leave();
}

TEST_CASE("socket backend: handles, hellos and headers are checked before use", "[net]") {
  SockHandle h{kSockMagic, 4, {}, {}};
  h.addr.u.sa.sa_family = AF_INET;
  SockHandle out;
  REQUIRE(parseSockHandle(&h, sizeof(h), &out).ok());
  h.addr.u.sa.sa_family = AF_UNIX;  // connect() would be handed a length that is not its own
  Status st = parseSockHandle(&h, sizeof(h), &out);
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("socket handle has address family 1"));
  h.addr.u.sa.sa_family = AF_INET;
  h.nsocks = 100000;
  CHECK_THAT(parseSockHandle(&h, sizeof(h), &out).message(), Catch::Contains("asks for 100000 sockets"));

  SockHello hello{{kSockMagic, 4, 1}, {}};
  SockHello hout;
  CHECK_THAT(parseSockHello(&hello, sizeof(hello), 4, &hout).message(),
             Catch::Contains("socket 4 of a connection of 4"));
  hello.body.idx = 3;
  CHECK(parseSockHello(&hello, sizeof(hello), 4, &hout).ok());

  SockHeader hdr;
  uint64_t word = 100 | (uint64_t{8} << kPadShift);
  REQUIRE(parseSockHeader(&word, sizeof(word), 100, &hdr).ok());
  CHECK((hdr.len == 100 && hdr.pad == 8));
  CHECK_THAT(parseSockHeader(&word, sizeof(word), 99, &hdr).message(), Catch::Contains("exceeds the posted 99"));
  word = 1 | (uint64_t{64} << kPadShift);
  CHECK_THAT(parseSockHeader(&word, sizeof(word), 100, &hdr).message(), Catch::Contains("padding 64"));
}

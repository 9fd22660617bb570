// The ib backend's verbs table (src/transport/net/ib/verbs.h) against the verbs emulation
// (tests/verbs_emu/): loading, the RC state machine, RDMA WRITE with immediate and
// SEND/RECV between forked processes, RDMA READ (loopback too), dma-buf MRs over a memfd,
// and each error real verbs report. Every wait has a
// deadline; each case uses a private fabric (EmuEnv) that it unlinks.
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include "transport/net/ib/verbs.h"
#include "verbs_emu_env.h"

using namespace coll;
using namespace coll::ib;

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(10);
constexpr int kLocal = IBV_ACCESS_LOCAL_WRITE;
constexpr int kRemote = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

using test::EmuEnv;
using test::must;

void expect(bool cond, const std::string& what) {
  if (!cond) throw std::runtime_error(what);
}

std::unique_ptr<Verbs> loadEmu() { return must(Verbs::loadDefault()); }

bool ethernet() {
  const char* l = getenv("COLL_VERBS_EMU_LINK");
  return l && strcmp(l, "eth") == 0;
}

// What a side ships its peer to connect and to be written to.
struct Wire {
  uint32_t qpn, psn;
  uint16_t lid;
  ibv_gid gid;
  uint64_t addr;
  uint32_t rkey;
};

// One end: device, PD, one CQ for both directions, an RC QP in INIT, a registered buffer.
struct Side {
  const Verbs* v = nullptr;
  Context ctx;
  Pd pd;
  Cq cq;
  Qp qp;
  std::vector<char> buf;
  Mr mr;
  RcConnectParams params;
};

Side makeSide(const Verbs& v, int dev, size_t bytes, int access = kRemote, int cqe = 256, QpCaps caps = {}) {
  Side s;
  s.v = &v;
  DeviceList list = must(DeviceList::get(v));
  expect(dev < list.size(), "the emulation lists too few devices");
  s.ctx = must(openDevice(v, list[dev]));
  s.pd = must(allocPd(v, s.ctx.get()));
  s.cq = must(createCq(v, s.ctx.get(), cqe));
  caps.maxSendSge = 2;
  caps.maxRecvSge = 2;
  s.qp = must(createRcQp(v, s.pd.get(), s.cq.get(), s.cq.get(), caps));
  s.buf.assign(bytes, 0);
  s.mr = must(regMr(v, s.pd.get(), s.buf.data(), bytes, access));
  s.params.localPsn = (s.qp->qp_num * 7919u) & 0xffffff;
  must(rcToInit(v, s.qp.get(), s.params));
  return s;
}

Wire wireOf(Side& s) {
  Wire w{};
  ibv_port_attr port{};
  expect(s.v->queryPort(s.ctx.get(), 1, &port) == 0, "ibv_query_port failed");
  w.qpn = s.qp->qp_num;
  w.psn = s.params.localPsn;
  w.lid = port.lid;
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) expect(s.v->queryGid(s.ctx.get(), 1, 1, &w.gid) == 0, "query_gid");
  w.addr = reinterpret_cast<uint64_t>(s.buf.data());
  w.rkey = s.mr->rkey;
  return w;
}

void connect(Side& s, const Wire& peer) {
  s.params.remoteQpn = peer.qpn;
  s.params.remotePsn = peer.psn;
  s.params.remoteLid = peer.lid;
  s.params.useGid = ethernet();
  s.params.remoteGid = peer.gid;
  s.params.gidIndex = 1;
  must(rcToRtr(*s.v, s.qp.get(), s.params));
  must(rcToRts(*s.v, s.qp.get(), s.params));
}

struct Pair {
  Side a, b;
};

// Two QPs of this process on two devices, connected to each other.
Pair makePair(const Verbs& v, size_t bytes, int accessB = kRemote, int cqeA = 256) {
  Pair p{makeSide(v, 0, bytes, kRemote, cqeA), makeSide(v, 1, bytes, accessB)};
  Wire wa = wireOf(p.a), wb = wireOf(p.b);
  connect(p.a, wb);
  connect(p.b, wa);
  return p;
}

int postWrite(Side& s, uint64_t wrId, size_t off, size_t len, uint64_t raddr, uint32_t rkey, bool imm = false,
              uint32_t immValue = 0, uint32_t lkey = 0) {
  ibv_sge sge{reinterpret_cast<uint64_t>(s.buf.data() + off), static_cast<uint32_t>(len), lkey ? lkey : s.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(immValue);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return s.v->postSend(s.qp.get(), &wr, &bad);
}

int postSendMsg(Side& s, uint64_t wrId, size_t off, size_t len, bool imm = false, uint32_t immValue = 0) {
  ibv_sge sge{reinterpret_cast<uint64_t>(s.buf.data() + off), static_cast<uint32_t>(len), s.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(immValue);
  return s.v->postSend(s.qp.get(), &wr, &bad);
}

// A receive into [off, off+len) of the buffer as `parts` SGEs (0: no SGE, for WRITE_WITH_IMM).
int postRecv(Side& s, uint64_t wrId, size_t off = 0, size_t len = 0, int parts = 0) {
  ibv_sge sge[2];
  for (int i = 0; i < parts; i++) {
    size_t piece = len / parts + (i == parts - 1 ? len % parts : 0);
    sge[i] = {reinterpret_cast<uint64_t>(s.buf.data() + off + i * (len / parts)), static_cast<uint32_t>(piece),
              s.mr->lkey};
  }
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = wrId;
  wr.sg_list = sge;
  wr.num_sge = parts;
  return s.v->postRecv(s.qp.get(), &wr, &bad);
}

// The next completion of the side's CQ, polling until the deadline.
ibv_wc nextWc(Side& s,
              std::chrono::milliseconds limit = std::chrono::duration_cast<std::chrono::milliseconds>(kDeadline)) {
  auto end = Clock::now() + limit;
  ibv_wc wc{};
  while (Clock::now() < end) {
    int n = s.v->pollCq(s.cq.get(), 1, &wc);
    expect(n >= 0, "ibv_poll_cq failed: " + std::string(strerror(errno)));
    if (n == 1) return wc;
    usleep(50);
  }
  throw std::runtime_error("no completion within the deadline");
}

int qpState(Side& s) {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  expect(s.v->queryQp(s.qp.get(), &a, IBV_QP_STATE, &init) == 0, "ibv_query_qp failed");
  return a.qp_state;
}

void fill(char* p, size_t n, int seed) {
  for (size_t i = 0; i < n; i++) p[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) & 0xff);
}
bool filled(const char* p, size_t n, int seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != static_cast<char>((i * 131 + static_cast<size_t>(seed) * 7) & 0xff)) return false;
  return true;
}

std::string status(const Side& s, const ibv_wc& wc) { return s.v->wcStatusStr(wc.status); }

// An RDMA READ of [raddr, raddr + len) into [off, off + len) of the side's buffer.
int postRead(Side& s, uint64_t wrId, size_t off, size_t len, uint64_t raddr, uint32_t rkey, int flags = 0) {
  ibv_sge sge{reinterpret_cast<uint64_t>(s.buf.data() + off), static_cast<uint32_t>(len), s.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED | flags;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return s.v->postSend(s.qp.get(), &wr, &bad);
}

// The QP's access flags (RTS -> RTS may change them): what the peer may do through it.
void setQpAccess(Side& s, int access) {
  ibv_qp_attr a{};
  a.qp_access_flags = static_cast<unsigned>(access);
  expect(s.v->modifyQp(s.qp.get(), &a, IBV_QP_ACCESS_FLAGS) == 0, "ibv_modify_qp of the access flags");
}

}  // namespace

namespace {

// Frames over a socketpair between the test and a forked child: {kind, length, bytes}.
// Kind 0 is the child's verdict ("" when it passed), kind 1 data.
void sendFrame(int fd, uint32_t kind, const void* data, uint32_t len) {
  uint32_t head[2] = {kind, len};
  std::string out(reinterpret_cast<char*>(head), sizeof(head));
  out.append(static_cast<const char*>(data), len);
  for (size_t off = 0; off < out.size();) {
    ssize_t n = send(fd, out.data() + off, out.size() - off, MSG_NOSIGNAL);
    expect(n > 0 || errno == EINTR, "send to the peer process failed");
    if (n > 0) off += static_cast<size_t>(n);
  }
}

void recvAll(int fd, void* data, size_t len, Clock::time_point end) {
  for (size_t off = 0; off < len;) {
    pollfd p{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    expect(left > 0 && poll(&p, 1, static_cast<int>(left)) == 1, "the peer process did not answer in time");
    ssize_t n = recv(fd, static_cast<char*>(data) + off, len - off, 0);
    expect(n > 0, "the peer process closed the connection");
    off += static_cast<size_t>(n);
  }
}

// The next data frame; a verdict frame in its place throws the child's failure.
template <typename T>
T recvData(int fd, Clock::time_point end = Clock::now() + kDeadline) {
  uint32_t head[2];
  recvAll(fd, head, sizeof(head), end);
  std::string body(head[1], '\0');
  recvAll(fd, body.data(), body.size(), end);
  expect(head[0] == 1, "peer process failed: " + body);
  expect(body.size() == sizeof(T), "unexpected frame from the peer process");
  T out;
  memcpy(&out, body.data(), sizeof(T));
  return out;
}

template <typename T>
void sendData(int fd, const T& v) {
  sendFrame(fd, 1, &v, sizeof(T));
}

// A child process running `body(fd)`; result() is its verdict ("" when it passed).
class Child {
 public:
  explicit Child(const std::function<void(int)>& body) {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      close(sv[0]);
      std::string err;
      try {
        body(sv[1]);
      } catch (const std::exception& e) {
        err = e.what();
        if (err.empty()) err = "failed";
      } catch (...) {
        err = "failed";
      }
      try {
        sendFrame(sv[1], 0, err.data(), static_cast<uint32_t>(err.size()));
      } catch (...) {
      }
      _exit(0);
    }
    close(sv[1]);
    fd_ = sv[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  int fd() const { return fd_; }
  pid_t pid() const { return pid_; }
  std::string result() {
    uint32_t head[2];
    auto end = Clock::now() + kDeadline;
    recvAll(fd_, head, sizeof(head), end);
    std::string body(head[1], '\0');
    recvAll(fd_, body.data(), body.size(), end);
    return head[0] == 0 ? body : "unexpected data frame instead of the verdict";
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

// Connects a fresh side (device `dev`) to the side across `fd`; the child answers first.
Side connectAcross(const Verbs& v, int fd, int dev, bool child, size_t bytes, Wire* peerOut = nullptr,
                   int access = kRemote) {
  Side s = makeSide(v, dev, bytes, access);
  Wire mine = wireOf(s);
  Wire peer{};
  if (child) {
    sendData(fd, mine);
    peer = recvData<Wire>(fd);
  } else {
    peer = recvData<Wire>(fd);
    sendData(fd, mine);
  }
  connect(s, peer);
  if (peerOut) *peerOut = peer;
  return s;
}

}  // namespace

TEST_CASE("the verbs table loads from the emulation", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  CHECK(v->path() == COLL_VERBS_EMU_PATH);
  CHECK(v->regDmabufMr != nullptr);  // optional in the table; the emulation has it
  void* lib = dlopen(COLL_VERBS_EMU_PATH, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  CHECK(dlvsym(lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12") != nullptr);  // where rdma-core has it
  CHECK(dlvsym(lib, "ibv_reg_mr", "IBVERBS_1.1") != nullptr);
  dlclose(lib);
  DeviceList list = must(DeviceList::get(*v));
  REQUIRE(list.size() == 2);
  CHECK(std::string(v->getDeviceName(list[0])) == "emu0");
  CHECK(std::string(v->getDeviceName(list[1])) == "emu1");
  Context ctx = must(openDevice(*v, list[1]));
  ibv_device_attr dev{};
  REQUIRE(v->queryDevice(ctx.get(), &dev) == 0);
  CHECK(dev.max_qp_wr >= 256);
  CHECK(dev.max_cqe >= 256);
  CHECK(dev.max_sge >= 1);
  CHECK(dev.max_mr_size >= (1ull << 32));
  ibv_port_attr port{};
  REQUIRE(v->queryPort(ctx.get(), 1, &port) == 0);
  CHECK(port.state == IBV_PORT_ACTIVE);
  CHECK(port.link_layer == IBV_LINK_LAYER_INFINIBAND);
  CHECK(port.lid == 2);
  CHECK(v->queryPort(ctx.get(), 2, &port) != 0);
  CHECK(std::string(v->wcStatusStr(IBV_WC_REM_ACCESS_ERR)) == "remote access error");
}

TEST_CASE("RoCE: Ethernet ports have GIDs and connections need the GRH", "[verbs]") {
  EmuEnv env("eth");
  auto v = loadEmu();
  Side s = makeSide(*v, 0, 4096);
  ibv_port_attr port{};
  REQUIRE(v->queryPort(s.ctx.get(), 1, &port) == 0);
  CHECK(port.link_layer == IBV_LINK_LAYER_ETHERNET);
  CHECK(port.gid_tbl_len == 2);
  ibv_gid gid{};
  REQUIRE(v->queryGid(s.ctx.get(), 1, 1, &gid) == 0);
  CHECK(gid.raw[10] == 0xff);  // IPv4-mapped: RoCE v2
  CHECK(v->queryGid(s.ctx.get(), 1, 2, &gid) != 0);
  s.params.remoteQpn = s.qp->qp_num;
  s.params.remoteLid = 1;
  Status st = rcToRtr(*v, s.qp.get(), s.params);  // no GRH
  CHECK_FALSE(st.ok());
  CHECK_THAT(st.message(), Catch::Contains("INIT->RTR") && Catch::Contains("Invalid argument"));
  Pair p = makePair(*v, 4096);  // with GIDs, as connect() does on Ethernet
  fill(p.a.buf.data(), 100, 1);
  REQUIRE(postWrite(p.a, 1, 0, 100, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey) == 0);
  ibv_wc wc = nextWc(p.a);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(filled(p.b.buf.data(), 100, 1));
}

TEST_CASE("a missing verbs library gives an error naming it", "[verbs]") {
  auto r = Verbs::load("/nonexistent/libibverbs-missing.so.1");
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(),
             Catch::Contains("/nonexistent/libibverbs-missing.so.1") && Catch::Contains("COLL_IB_VERBS_LIB"));
  setenv("COLL_IB_VERBS_LIB", "libcoll-no-such-verbs.so", 1);
  auto d = Verbs::loadDefault();
  unsetenv("COLL_IB_VERBS_LIB");
  REQUIRE_FALSE(d.ok());
  CHECK_THAT(d.status().message(), Catch::Contains("libcoll-no-such-verbs.so"));
  auto notVerbs = Verbs::load("libc.so.6");  // loads, but is not libibverbs
  REQUIRE_FALSE(notVerbs.ok());
  CHECK_THAT(notVerbs.status().message(), Catch::Contains("lacks ibv_get_device_list"));
}

// The table's symbol names against the real library, where this machine has it.
TEST_CASE("the real libibverbs has every symbol the table names", "[verbs]") {
  void* probe = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!probe) {
    WARN("skipped: libibverbs.so.1 is not installed");
    return;
  }
  dlclose(probe);
  auto r = Verbs::load("libibverbs.so.1");
  INFO((r.ok() ? std::string() : r.status().message()));
  REQUIRE(r.ok());
}

TEST_CASE("the RC state machine refuses what real verbs refuse", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  DeviceList list = must(DeviceList::get(*v));
  Context ctx = must(openDevice(*v, list[0]));
  Pd pd = must(allocPd(*v, ctx.get()));
  Cq cq = must(createCq(*v, ctx.get(), 16));
  Qp qp = must(createRcQp(*v, pd.get(), cq.get(), cq.get(), {}));
  std::vector<char> buf(64);
  Mr mr = must(regMr(*v, pd.get(), buf.data(), buf.size(), kLocal));
  ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), 64, mr->lkey};
  ibv_send_wr swr{};
  swr.sg_list = &sge;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  ibv_send_wr* sbad = nullptr;
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  CHECK(v->postSend(qp.get(), &swr, &sbad) == EINVAL);  // RESET
  CHECK(sbad == &swr);
  CHECK(v->postRecv(qp.get(), &rwr, &rbad) == EINVAL);  // RESET
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  CHECK(v->modifyQp(qp.get(), &a, IBV_QP_STATE) == EINVAL);  // RESET -> RTR skips INIT
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  CHECK(v->modifyQp(qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT) == EINVAL);  // no access flags
  RcConnectParams p;
  p.remoteQpn = qp->qp_num;  // connected to itself: enough for the state machine
  p.remoteLid = 1;
  Status early = rcToRtr(*v, qp.get(), p);
  CHECK_THAT(early.message(), Catch::Contains("INIT->RTR") && Catch::Contains("Invalid argument"));
  must(rcToInit(*v, qp.get(), p));
  CHECK(v->postSend(qp.get(), &swr, &sbad) == EINVAL);  // INIT
  CHECK(v->postRecv(qp.get(), &rwr, &rbad) == 0);       // receives may be posted from INIT on
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = qp->qp_num;
  a.ah_attr.port_num = 1;
  a.ah_attr.dlid = 1;
  int noRnrTimer = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                   IBV_QP_MAX_DEST_RD_ATOMIC;
  CHECK(v->modifyQp(qp.get(), &a, noRnrTimer) == EINVAL);
  CHECK(v->modifyQp(qp.get(), &a, noRnrTimer | IBV_QP_MIN_RNR_TIMER | IBV_QP_SQ_PSN) == EINVAL);  // SQ_PSN: RTS's
  must(rcToRtr(*v, qp.get(), p));
  CHECK(v->postSend(qp.get(), &swr, &sbad) == EINVAL);  // RTR
  must(rcToRts(*v, qp.get(), p));
  ibv_qp_attr q{};
  ibv_qp_init_attr init{};
  REQUIRE(v->queryQp(qp.get(), &q, IBV_QP_STATE, &init) == 0);
  CHECK(q.qp_state == IBV_QPS_RTS);
  CHECK(q.dest_qp_num == qp->qp_num);
  CHECK(cq.reset().code() == Code::kSystem);  // in use by the QP: EBUSY
  REQUIRE(cq);                                // still owned: it was not destroyed
  CHECK(qp.reset().ok());
  CHECK(cq.reset().ok());  // the QP gone, destroying it succeeds (LSan saw it leak before)
}

TEST_CASE("RDMA WRITE WITH IMM of several sizes lands in a peer process's MR", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  const std::vector<size_t> sizes = {1, 7, 4096, 65539, 1 << 20};
  constexpr size_t kBytes = 2 << 20;
  Child child([&](int fd) {
    Side s = connectAcross(*v, fd, 1, true, kBytes);
    for (size_t i = 0; i < sizes.size(); i++) expect(postRecv(s, 100 + i) == 0, "post_recv");
    sendData(fd, 1);  // receives are posted
    size_t off = 0;
    for (size_t i = 0; i < sizes.size(); i++) {
      ibv_wc wc = nextWc(s);
      expect(wc.status == IBV_WC_SUCCESS, "receive completion: " + status(s, wc));
      expect(wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && (wc.wc_flags & IBV_WC_WITH_IMM), "not a write with immediate");
      expect(wc.wr_id == 100 + i && ntohl(wc.imm_data) == 0xbeef00 + i, "completions out of order");
      expect(wc.byte_len == sizes[i], "byte_len " + std::to_string(wc.byte_len));
      expect(filled(s.buf.data() + off, sizes[i], static_cast<int>(i)), "data of write " + std::to_string(i));
      off += sizes[i];
    }
  });
  Wire peer{};
  Side s = connectAcross(*v, child.fd(), 0, false, kBytes, &peer);
  REQUIRE(recvData<int>(child.fd()) == 1);
  size_t off = 0;
  for (size_t i = 0; i < sizes.size(); i++) {
    fill(s.buf.data() + off, sizes[i], static_cast<int>(i));
    REQUIRE(postWrite(s, i, off, sizes[i], peer.addr + off, peer.rkey, true, 0xbeef00 + static_cast<uint32_t>(i)) == 0);
    off += sizes[i];
  }
  for (size_t i = 0; i < sizes.size(); i++) {
    ibv_wc wc = nextWc(s);
    INFO(status(s, wc));
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RDMA_WRITE);
    CHECK(wc.wr_id == i);
  }
  CHECK(child.result() == "");
}

TEST_CASE("SEND and RECV between processes, both ways, scattered into two SGEs", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  constexpr size_t kMsg = 10000;
  Child child([&](int fd) {
    Side s = connectAcross(*v, fd, 1, true, 4 * kMsg);
    expect(postRecv(s, 7, 0, kMsg, 2) == 0 && postRecv(s, 8, kMsg, kMsg, 2) == 0, "post_recv");
    sendData(fd, 1);
    ibv_wc wc = nextWc(s);
    expect(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == 7, "first receive");
    expect(wc.byte_len == kMsg && !(wc.wc_flags & IBV_WC_WITH_IMM), "first receive's length or flags");
    wc = nextWc(s);
    expect(wc.status == IBV_WC_SUCCESS && wc.wr_id == 8 && wc.byte_len == 100, "second receive");
    expect((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 42, "second receive's immediate");
    expect(filled(s.buf.data(), kMsg, 3) && filled(s.buf.data() + kMsg, 100, 4), "received data");
    fill(s.buf.data() + 2 * kMsg, 500, 5);  // the reply
    expect(postSendMsg(s, 9, 2 * kMsg, 500) == 0, "post_send of the reply");
    wc = nextWc(s);
    expect(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND && wc.wr_id == 9, "reply's send completion");
  });
  Side s = connectAcross(*v, child.fd(), 0, false, 4 * kMsg);
  REQUIRE(postRecv(s, 1, 3 * kMsg, kMsg, 1) == 0);
  REQUIRE(recvData<int>(child.fd()) == 1);
  fill(s.buf.data(), kMsg, 3);
  fill(s.buf.data() + kMsg, 100, 4);
  REQUIRE(postSendMsg(s, 2, 0, kMsg) == 0);
  REQUIRE(postSendMsg(s, 3, kMsg, 100, true, 42) == 0);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; i++) {
    ibv_wc wc = nextWc(s);
    INFO(status(s, wc));
    REQUIRE(wc.status == IBV_WC_SUCCESS);
    ids.push_back(wc.wr_id);
    if (wc.wr_id == 1) CHECK((wc.opcode == IBV_WC_RECV && wc.byte_len == 500));
  }
  CHECK(std::count(ids.begin(), ids.end(), 1) == 1);
  CHECK(filled(s.buf.data() + 3 * kMsg, 500, 5));
  CHECK(child.result() == "");
}

// Each error the hardware reports, on two QPs of this process (two devices): the checks
// are the same whichever process owns the responder.
constexpr size_t kBytes = 8192;

TEST_CASE("remote access errors: outside the MR, a wrong rkey, no REMOTE_WRITE", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  SECTION("writing outside the MR") {
    Pair p = makePair(*v, kBytes);
    uint64_t b = reinterpret_cast<uint64_t>(p.b.buf.data());
    REQUIRE(postWrite(p.a, 1, 0, 100, b + kBytes - 50, p.b.mr->rkey) == 0);
    REQUIRE(postWrite(p.a, 2, 0, 100, b, p.b.mr->rkey) == 0);  // behind the failed one: flushed
    ibv_wc wc = nextWc(p.a);
    CHECK(wc.wr_id == 1);
    CHECK(status(p.a, wc) == "remote access error");
    wc = nextWc(p.a);
    CHECK(wc.wr_id == 2);
    CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
    CHECK(qpState(p.a) == IBV_QPS_ERR);
  }
  SECTION("a wrong rkey (the lkey in its place)") {
    Pair p = makePair(*v, kBytes);
    REQUIRE(postWrite(p.a, 1, 0, 100, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->lkey) == 0);
    CHECK(nextWc(p.a).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(qpState(p.a) == IBV_QPS_ERR);
  }
  SECTION("an MR without REMOTE_WRITE") {
    Pair p = makePair(*v, kBytes, kLocal);
    REQUIRE(postWrite(p.a, 1, 0, 100, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey) == 0);
    CHECK(nextWc(p.a).status == IBV_WC_REM_ACCESS_ERR);
  }
}

TEST_CASE("local protection and length errors", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  SECTION("a lkey that does not cover the SGE") {
    Pair p = makePair(*v, kBytes);
    REQUIRE(postWrite(p.a, 1, kBytes - 10, 20, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey) == 0);
    CHECK(status(p.a, nextWc(p.a)) == "local protection error");
    CHECK(qpState(p.a) == IBV_QPS_ERR);
  }
  SECTION("a receive too small for the SEND") {
    Pair p = makePair(*v, kBytes);
    REQUIRE(postRecv(p.b, 5, 0, 10, 1) == 0);
    REQUIRE(postSendMsg(p.a, 1, 0, 100) == 0);
    CHECK(nextWc(p.a).status == IBV_WC_REM_INV_REQ_ERR);
    ibv_wc wc = nextWc(p.b);
    CHECK(wc.wr_id == 5);
    CHECK(wc.status == IBV_WC_LOC_LEN_ERR);
    CHECK(qpState(p.b) == IBV_QPS_ERR);
  }
}

TEST_CASE("no receive posted: RNR retries, then RNR retry exceeded", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  Pair p = makePair(*v, kBytes);
  ibv_qp_attr a{};
  a.rnr_retry = 2;
  // RTS -> RTS may not change rnr_retry: the QP keeps 7 (forever); the peer posts late.
  CHECK(v->modifyQp(p.a.qp.get(), &a, IBV_QP_RNR_RETRY) == EINVAL);
  REQUIRE(postWrite(p.a, 1, 0, 10, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey, true, 1) == 0);
  ibv_wc wc{};
  for (int i = 0; i < 20; i++) CHECK(v->pollCq(p.a.cq.get(), 1, &wc) == 0);  // waits for a receive
  REQUIRE(postRecv(p.b, 9) == 0);
  CHECK(nextWc(p.a).status == IBV_WC_SUCCESS);
  CHECK(nextWc(p.b).wr_id == 9);
  Side c = makeSide(*v, 0, kBytes), d = makeSide(*v, 1, kBytes);
  c.params.rnrRetry = 1;
  Wire wc2 = wireOf(c), wd = wireOf(d);
  connect(c, wd);
  connect(d, wc2);
  auto start = Clock::now();
  REQUIRE(postWrite(c, 1, 0, 10, wd.addr, wd.rkey, true, 1) == 0);
  CHECK(status(c, nextWc(c)) == "RNR retry counter exceeded");
  CHECK(Clock::now() - start < std::chrono::seconds(3));
}

TEST_CASE("CQ overflow is a CQ error and fails the QP", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  Pair p = makePair(*v, kBytes, kRemote, 4);
  uint64_t b = reinterpret_cast<uint64_t>(p.b.buf.data());
  for (int i = 0; i < 6; i++) REQUIRE(postWrite(p.a, static_cast<uint64_t>(i), 0, 8, b + 8 * i, p.b.mr->rkey) == 0);
  ibv_wc wc[8];
  REQUIRE(v->pollCq(p.a.cq.get(), 8, wc) == 4);
  for (int i = 0; i < 4; i++) CHECK(wc[i].status == IBV_WC_SUCCESS);
  CHECK(v->pollCq(p.a.cq.get(), 8, wc) < 0);
  CHECK(qpState(p.a) == IBV_QPS_ERR);
}

TEST_CASE("an unreachable responder gives retry exceeded", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  SECTION("the responder's QP destroyed") {
    Pair p = makePair(*v, kBytes);
    uint64_t b = reinterpret_cast<uint64_t>(p.b.buf.data());
    uint32_t rkey = p.b.mr->rkey;
    REQUIRE(p.b.qp.reset().ok());
    auto start = Clock::now();
    REQUIRE(postWrite(p.a, 1, 0, 8, b, rkey) == 0);
    CHECK(status(p.a, nextWc(p.a)) == "transport retry counter exceeded");
    CHECK(Clock::now() - start < std::chrono::seconds(5));
  }
  SECTION("PSNs that do not match") {
    Side c = makeSide(*v, 0, kBytes), d = makeSide(*v, 1, kBytes);
    Wire wc2 = wireOf(c), wd = wireOf(d);
    wc2.psn ^= 1;  // d expects another first PSN than c sends
    connect(c, wd);
    connect(d, wc2);
    REQUIRE(postWrite(c, 1, 0, 8, wd.addr, wd.rkey) == 0);
    CHECK(nextWc(c).status == IBV_WC_RETRY_EXC_ERR);
  }
}

TEST_CASE("a forced QP error flushes posted receives and sends", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  void* lib = dlopen(COLL_VERBS_EMU_PATH, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib);
  auto forceError = reinterpret_cast<int (*)(ibv_qp*)>(dlsym(lib, "collVerbsEmuForceError"));
  REQUIRE(forceError);
  Pair p = makePair(*v, 4096);
  for (uint64_t i = 0; i < 3; i++) REQUIRE(postRecv(p.a, 10 + i) == 0);
  // Stuck behind the peer's missing receive (rnr_retry 7: forever) until the error.
  REQUIRE(postWrite(p.a, 1, 0, 8, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey, true, 5) == 0);
  REQUIRE(forceError(p.a.qp.get()) == 0);
  CHECK(qpState(p.a) == IBV_QPS_ERR);
  int flushed = 0;
  for (int i = 0; i < 4; i++) flushed += nextWc(p.a).status == IBV_WC_WR_FLUSH_ERR;
  CHECK(flushed == 4);
  REQUIRE(postSendMsg(p.a, 2, 0, 8) == 0);  // posting in ERR is accepted, and flushed
  ibv_wc wc = nextWc(p.a);
  CHECK(wc.wr_id == 2);
  CHECK(wc.status == IBV_WC_WR_FLUSH_ERR);
  dlclose(lib);
}

TEST_CASE("a killed peer process gives retry exceeded within seconds", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  Child child([&](int fd) {
    Side s = connectAcross(*v, fd, 1, true, 4096);
    recvData<int>(fd, Clock::now() + std::chrono::seconds(60));  // until killed
  });
  Wire peer{};
  Side s = connectAcross(*v, child.fd(), 0, false, 4096, &peer);
  REQUIRE(postWrite(s, 1, 0, 8, peer.addr, peer.rkey) == 0);
  REQUIRE(nextWc(s).status == IBV_WC_SUCCESS);  // the connection works while it lives
  REQUIRE(kill(child.pid(), SIGKILL) == 0);
  // Until it has exited (left unreaped: a zombie counts as dead, as its QPs are gone).
  siginfo_t info{};
  auto killDeadline = Clock::now() + kDeadline;
  while (info.si_pid == 0 && Clock::now() < killDeadline) {
    REQUIRE(waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0);
    if (info.si_pid == 0) usleep(1000);
  }
  REQUIRE(info.si_pid == child.pid());
  auto start = Clock::now();
  REQUIRE(postWrite(s, 2, 0, 8, peer.addr, peer.rkey) == 0);
  ibv_wc wc = nextWc(s);
  CHECK(wc.wr_id == 2);
  CHECK(wc.status == IBV_WC_RETRY_EXC_ERR);
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  CHECK(qpState(s) == IBV_QPS_ERR);
}

constexpr int kReadable = kRemote | IBV_ACCESS_REMOTE_READ;

TEST_CASE("RDMA READ: allowed with REMOTE_READ, refused without, and on a QP connected to itself", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  SECTION("from a peer's MR granting REMOTE_READ") {
    Pair p = makePair(*v, kBytes, kReadable);
    setQpAccess(p.b, kReadable);
    fill(p.b.buf.data() + 100, 3000, 9);
    REQUIRE(postRead(p.a, 1, 0, 3000, reinterpret_cast<uint64_t>(p.b.buf.data()) + 100, p.b.mr->rkey) == 0);
    ibv_wc wc = nextWc(p.a);
    INFO(status(p.a, wc));
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.opcode == IBV_WC_RDMA_READ);
    CHECK(wc.byte_len == 3000);
    CHECK(filled(p.a.buf.data(), 3000, 9));
  }
  SECTION("an MR without REMOTE_READ") {
    Pair p = makePair(*v, kBytes, kRemote);
    setQpAccess(p.b, kReadable);
    REQUIRE(postRead(p.a, 1, 0, 8, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey) == 0);
    CHECK(status(p.a, nextWc(p.a)) == "remote access error");
    CHECK(qpState(p.a) == IBV_QPS_ERR);
  }
  SECTION("a responder QP that does not allow remote reads") {
    Pair p = makePair(*v, kBytes, kReadable);  // the QP keeps LOCAL_WRITE | REMOTE_WRITE
    REQUIRE(postRead(p.a, 1, 0, 8, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey) == 0);
    CHECK(nextWc(p.a).status == IBV_WC_REM_ACCESS_ERR);
  }
  SECTION("beyond the end of the MR") {
    Pair p = makePair(*v, kBytes, kReadable);
    setQpAccess(p.b, kReadable);
    REQUIRE(postRead(p.a, 1, 0, 100, reinterpret_cast<uint64_t>(p.b.buf.data()) + kBytes - 50, p.b.mr->rkey) == 0);
    CHECK(nextWc(p.a).status == IBV_WC_REM_ACCESS_ERR);
  }
  SECTION("into a local MR without LOCAL_WRITE") {
    Pair p{makeSide(*v, 0, kBytes, 0), makeSide(*v, 1, kBytes, kReadable)};
    Wire wa = wireOf(p.a), wb = wireOf(p.b);
    connect(p.a, wb);
    connect(p.b, wa);
    setQpAccess(p.b, kReadable);
    REQUIRE(postRead(p.a, 1, 0, 8, wb.addr, wb.rkey) == 0);
    CHECK(status(p.a, nextWc(p.a)) == "local protection error");
  }
  SECTION("inline is refused at post time") {
    Pair p = makePair(*v, kBytes, kReadable);
    CHECK(postRead(p.a, 1, 0, 8, reinterpret_cast<uint64_t>(p.b.buf.data()), p.b.mr->rkey, IBV_SEND_INLINE) == EINVAL);
  }
  SECTION("a QP connected to itself reads its own MR (loopback)") {
    Side s = makeSide(*v, 0, kBytes, kReadable);
    Wire self = wireOf(s);
    connect(s, self);
    fill(s.buf.data() + 4096, 1, 4);
    REQUIRE(postRead(s, 7, 0, 1, self.addr + 4096, self.rkey) == 0);
    CHECK(nextWc(s).status == IBV_WC_REM_ACCESS_ERR);  // its QP does not allow remote reads yet
    CHECK(qpState(s) == IBV_QPS_ERR);
    Side t = makeSide(*v, 0, kBytes, kReadable);
    Wire tw = wireOf(t);
    connect(t, tw);
    setQpAccess(t, kReadable);
    fill(t.buf.data() + 4096, 100, 4);
    REQUIRE(postRead(t, 8, 0, 100, tw.addr + 4096, tw.rkey) == 0);
    ibv_wc wc = nextWc(t);
    INFO(status(t, wc));
    CHECK(wc.status == IBV_WC_SUCCESS);
    CHECK(wc.wr_id == 8);
    CHECK(wc.byte_len == 100);
    CHECK(filled(t.buf.data(), 100, 4));
  }
}

TEST_CASE("ibv_reg_dmabuf_mr: a memfd mapped at the iova, checked like ibv_reg_mr", "[verbs]") {
  EmuEnv env;
  auto v = loadEmu();
  Pair p = makePair(*v, kBytes);
  constexpr size_t kPage = 4096;
  test::MemFd buf(3 * kPage, kPage, 2 * kPage);  // pages 1 and 2 of the file mapped
  const auto iova = reinterpret_cast<uint64_t>(buf.p());
  REQUIRE(dmaBufSupported(*v, p.b.pd.get()));
  Mr mr = must(regDmabufMr(*v, p.b.pd.get(), kPage, 2 * kPage, iova, buf.fd(), kRemote));
  CHECK(reinterpret_cast<uint64_t>(mr->addr) == iova);
  CHECK(mr->length == 2 * kPage);
  CHECK(mr->lkey != mr->rkey);

  fill(p.a.buf.data(), 1000, 6);
  REQUIRE(postWrite(p.a, 1, 0, 1000, iova + 100, mr->rkey) == 0);
  CHECK(nextWc(p.a).status == IBV_WC_SUCCESS);
  std::vector<char> back(1000);
  REQUIRE(pread(buf.fd(), back.data(), back.size(), static_cast<off_t>(kPage + 100)) == 1000);
  CHECK(filled(back.data(), back.size(), 6));  // in the file's pages: the "dma-buf"

  SECTION("a write outside the registration is refused") {
    REQUIRE(postWrite(p.a, 2, 0, 100, iova + 2 * kPage - 50, mr->rkey) == 0);
    CHECK(status(p.a, nextWc(p.a)) == "remote access error");
  }
  SECTION("a bad fd, a range beyond the file, bad access: refused naming the call") {
    Result<Mr> bad = regDmabufMr(*v, p.b.pd.get(), 0, kPage, iova, -1, kRemote);
    REQUIRE_FALSE(bad.ok());
    CHECK_THAT(bad.status().message(),
               Catch::Contains("ibv_reg_dmabuf_mr of 4096 bytes at offset 0 of dma-buf fd -1") &&
                   Catch::Contains("emu1") && Catch::Contains("Bad file descriptor"));
    int closed = dup(buf.fd());
    close(closed);
    CHECK_FALSE(regDmabufMr(*v, p.b.pd.get(), 0, kPage, iova, closed, kRemote).ok());
    Result<Mr> beyond = regDmabufMr(*v, p.b.pd.get(), 2 * kPage, 2 * kPage, iova, buf.fd(), kRemote);
    REQUIRE_FALSE(beyond.ok());
    CHECK_THAT(beyond.status().message(), Catch::Contains("Invalid argument"));
    CHECK_FALSE(regDmabufMr(*v, p.b.pd.get(), UINT64_MAX - 10, kPage, iova, buf.fd(), kRemote).ok());  // wraps
    CHECK_FALSE(regDmabufMr(*v, p.b.pd.get(), kPage, kPage, iova, buf.fd(), IBV_ACCESS_REMOTE_WRITE).ok());
  }
  SECTION("a provider or kernel without dma-buf support: EOPNOTSUPP, and the probe says no") {
    setenv("COLL_VERBS_EMU_DMABUF", "0", 1);
    Result<Mr> none = regDmabufMr(*v, p.b.pd.get(), kPage, kPage, iova, buf.fd(), kRemote);
    bool supported = dmaBufSupported(*v, p.b.pd.get());
    unsetenv("COLL_VERBS_EMU_DMABUF");
    REQUIRE_FALSE(none.ok());
    CHECK_THAT(none.status().message(), Catch::Contains("Operation not supported"));
    CHECK_FALSE(supported);
  }
}

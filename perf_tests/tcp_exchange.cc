// tcp_exchange: the kernel's side of a 2-rank allreduce over loopback TCP, without the
// library. Two processes, one per vCPU, each send `--bytes` to the other in `--slice`
// pieces (each behind a `--header` of that many bytes) while receiving as much, over
// two one-way connections (or one, `--one-socket`), non-blocking, repeated `--iters`
// times. Prints GB/s per direction. It is the floor our TCP path is compared with
// (docs/PERFORMANCE.md), and where kernel effects show without our code in the way:
// the header's length, where the buffers sit in their pages, slice sizes.
//
//   tcp_exchange [--bytes 1M] [--slice 256K] [--header 0] [--src-offset 0]
//                [--dst-offset 0] [--iters 400] [--one-socket]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace {

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

size_t parseSize(const std::string& s) {
  size_t v = std::stoull(s);
  char u = s.empty() ? 0 : s.back();
  if (u == 'K' || u == 'k') v <<= 10;
  if (u == 'M' || u == 'm') v <<= 20;
  return v;
}

int listenLoopback(sockaddr_in* a) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  *a = {};
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(*a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(a), len) != 0 || ::listen(fd, 4) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(a), &len) != 0)
    die("listen");
  return fd;
}

int connectTo(const sockaddr_in& a) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) die("connect");
  return fd;
}

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// `bytes` at `offset` past a page boundary, filled with `fill`.
char* pageOffset(std::vector<char>& mem, size_t bytes, size_t offset, char fill) {
  mem.assign(bytes + 2 * 4096, fill);
  auto a = reinterpret_cast<uintptr_t>(mem.data());
  return mem.data() + (((a + 4095) & ~uintptr_t{4095}) - a) + offset;
}

struct Config {
  size_t bytes = 1 << 20, slice = 256 << 10, header = 0, srcOffset = 0, dstOffset = 0;
  int iters = 400;
  bool oneSocket = false;
};

// One side: sends c.bytes in slices (header + slice per sendmsg) on sfd while receiving
// as many bytes (headers included) on rfd, c.iters times after 5 warm-up rounds.
double exchange(const Config& c, int sfd, int rfd, char* src, char* dst) {
  const size_t slices = (c.bytes + c.slice - 1) / c.slice;
  const size_t wire = c.bytes + slices * c.header;
  std::vector<char> header(c.header, 0);
  auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < c.iters + 5; ++it) {
    if (it == 5) start = std::chrono::steady_clock::now();
    size_t sent = 0, got = 0;  // wire bytes
    while (sent < wire || got < wire) {
      bool moved = false;
      if (sent < wire) {
        const size_t k = sent / (c.slice + c.header), in = sent % (c.slice + c.header);
        const size_t len = std::min(c.slice, c.bytes - k * c.slice);
        iovec v[2];
        int n = 0;
        if (in < c.header) v[n++] = {header.data() + in, c.header - in};
        const size_t dataIn = in < c.header ? 0 : in - c.header;
        v[n++] = {src + k * c.slice + dataIn, len - dataIn};
        msghdr m{};
        m.msg_iov = v;
        m.msg_iovlen = static_cast<size_t>(n);
        ssize_t w = ::sendmsg(sfd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) sent += static_cast<size_t>(w), moved = true;
        else if (w < 0 && errno != EAGAIN) die("sendmsg");
      }
      if (got < wire) {
        ssize_t r = ::recv(rfd, dst + got, wire - got, MSG_DONTWAIT);
        if (r > 0) got += static_cast<size_t>(r), moved = true;
        else if (r == 0) die("peer closed");
        else if (errno != EAGAIN) die("recv");
      }
      if (!moved) {
        pollfd p[2] = {{sfd, 0, 0}, {rfd, 0, 0}};
        p[0].events = static_cast<short>(sent < wire ? POLLOUT : 0);
        p[rfd == sfd ? 0 : 1].events |= static_cast<short>(got < wire ? POLLIN : 0);
        ::poll(p, rfd == sfd ? 1 : 2, 0);
      }
    }
  }
  std::chrono::duration<double> t = std::chrono::steady_clock::now() - start;
  return static_cast<double>(c.iters) * static_cast<double>(c.bytes) / t.count() / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  std::string bytes = "1M", slice = "256K";
  CLI::App app{"tcp_exchange: two processes exchange data over loopback TCP, no library"};
  app.add_option("--bytes", bytes, "bytes each side sends per round (K/M suffixes)")->capture_default_str();
  app.add_option("--slice", slice, "bytes per send call")->capture_default_str();
  app.add_option("--header", c.header, "header bytes before every slice")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--src-offset", c.srcOffset, "send buffer's offset past a page boundary")->check(CLI::Range(0, 4095));
  app.add_option("--dst-offset", c.dstOffset, "receive buffer's offset past a page boundary")
      ->check(CLI::Range(0, 4095));
  app.add_option("--iters", c.iters, "timed rounds")->capture_default_str()->check(CLI::Range(1, 1 << 24));
  app.add_flag("--one-socket", c.oneSocket, "one connection both ways instead of one per direction");
  CLI11_PARSE(app, argc, argv);
  c.bytes = parseSize(bytes);
  c.slice = parseSize(slice);
  if (c.bytes == 0 || c.slice == 0) {
    std::fprintf(stderr, "tcp_exchange: --bytes and --slice must be positive\n");
    return 2;
  }

  sockaddr_in a1, a2;
  int l1 = listenLoopback(&a1), l2 = listenLoopback(&a2);
  pid_t child = ::fork();
  if (child < 0) die("fork");
  const int me = child == 0 ? 1 : 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(me, &set);
  ::sched_setaffinity(0, sizeof(set), &set);  // best effort: fewer vCPUs still run
  int sfd, rfd;
  if (me == 0) {  // sends on the connection it accepts (and, two-way, receives on one it makes)
    sfd = rfd = ::accept(l1, nullptr, nullptr);
    if (!c.oneSocket) rfd = connectTo(a2);
  } else {
    sfd = rfd = connectTo(a1);
    if (!c.oneSocket) sfd = ::accept(l2, nullptr, nullptr);
  }
  if (sfd < 0 || rfd < 0) die("accept");
  tune(sfd);
  if (rfd != sfd) tune(rfd);
  std::vector<char> srcMem, dstMem;
  const size_t slices = (c.bytes + c.slice - 1) / c.slice;
  char* src = pageOffset(srcMem, c.bytes, c.srcOffset, static_cast<char>(me + 1));
  char* dst = pageOffset(dstMem, c.bytes + slices * c.header, c.dstOffset, 0);
  double gbs = exchange(c, sfd, rfd, src, dst);
  if (me == 1) return 0;
  int status = 0;
  ::waitpid(child, &status, 0);
  std::printf("bytes %zu slice %zu header %zu src-offset %zu dst-offset %zu %s: %.2f GB/s per direction\n", c.bytes,
              c.slice, c.header, c.srcOffset, c.dstOffset, c.oneSocket ? "one socket" : "two sockets", gbs);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

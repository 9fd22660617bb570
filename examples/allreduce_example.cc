// allreduce_example: N local processes (default 4) form a communicator through
// COLL_COMM_ID, with a key made for the job, and run float32 sum allreduces of 1 MiB and
// 64 MiB, checking every result and printing time and bandwidth (busbw = algbw * 2(n-1)/n,
// as nccl-tests).
//
//   allreduce_example [-np N] [-iters K] [sizes in bytes, e.g. 1M 64M]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/collectives.h"

#define CHECK(call)                                                                               \
  do {                                                                                            \
    collResult_t r_ = (call);                                                                     \
    if (r_ != collSuccess) {                                                                      \
      std::fprintf(stderr, "rank %d: %s failed: %s\n  %s\n", rank, #call, collGetErrorString(r_), \
                   collGetLastError(comm));                                                       \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

static size_t parseBytes(const char* s) {
  char* end;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K':
    case 'k': v *= 1024; break;
    case 'M':
    case 'm': v *= 1024 * 1024; break;
    case 'G':
    case 'g': v *= 1024.0 * 1024 * 1024; break;
  }
  return static_cast<size_t>(v);
}

static int runRank(int rank, int nranks, const std::vector<size_t>& sizes, int iters) {
  collComm_t comm = nullptr;
  collUniqueId id;
  CHECK(collGetUniqueId(&id));  // same id in every process: COLL_COMM_ID is set
  CHECK(collCommInitRank(&comm, nranks, id, rank));
  for (size_t bytes : sizes) {
    size_t count = bytes / sizeof(float);
    std::vector<float> send(count), recv(count);
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
    CHECK(collAllReduce(send.data(), recv.data(), count, collFloat, collSum, comm, nullptr));
    // Expected: sum over ranks of (r+1)*(i%7+1) = (i%7+1) * n(n+1)/2.
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i)
      if (recv[i] != static_cast<float>((i % 7 + 1) * nranks * (nranks + 1) / 2)) ++wrong;
    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters; ++it)
      CHECK(collAllReduce(send.data(), recv.data(), count, collFloat, collSum, comm, nullptr));
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
    if (rank == 0) {
      double algbw = static_cast<double>(bytes) / us / 1e3;
      std::printf("%12zu bytes  %10.1f us  algbw %6.2f GB/s  busbw %6.2f GB/s  recv[1]=%g  %s\n", bytes, us, algbw,
                  algbw * 2.0 * (nranks - 1) / nranks, recv.size() > 1 ? recv[1] : 0.0, wrong ? "WRONG" : "ok");
      std::fflush(stdout);
    }
    if (wrong) {
      std::fprintf(stderr, "rank %d: %zu wrong elements at %zu bytes\n", rank, wrong, bytes);
      return 1;
    }
  }
  CHECK(collCommDestroy(comm));
  return 0;
}

// 32 random bytes as hex, or "" when the system gives none.
static std::string randomKey() {
  unsigned char bytes[32];
  FILE* f = std::fopen("/dev/urandom", "rb");
  size_t got = f ? std::fread(bytes, 1, sizeof(bytes), f) : 0;
  if (f) std::fclose(f);
  if (got != sizeof(bytes)) return "";
  std::string hex;
  for (unsigned char b : bytes) {
    char two[3];
    std::snprintf(two, sizeof(two), "%02x", b);
    hex += two;
  }
  return hex;
}

int main(int argc, char** argv) {
  int nranks = 4, iters = 20;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-np") && i + 1 < argc) nranks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "-iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else sizes.push_back(parseBytes(argv[i]));
  }
  if (nranks < 1 || iters < 1) {
    std::fprintf(stderr, "usage: %s [-np N] [-iters K] [sizes...]\n", argv[0]);
    return 2;
  }
  if (sizes.empty()) sizes = {1 << 20, 64 << 20};

  // One machine: keep every socket on loopback unless the user chose an interface.
  setenv("COLL_SOCKET_IFNAME", "lo", 0);
  if (!std::getenv("COLL_COMM_ID")) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    close(s);
    std::string id = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    setenv("COLL_COMM_ID", id.c_str(), 1);
  }
  // A key made for this job: only our processes can join it (docs/SECURITY.md). Without one
  // anyone who reaches the port may, and each process warns so.
  if (!std::getenv("COLL_AUTH_KEY") && !std::getenv("COLL_AUTH_KEY_FILE")) {
    std::string key = randomKey();
    if (key.empty()) {
      std::fprintf(stderr, "cannot read /dev/urandom for the job's key\n");
      return 1;
    }
    setenv("COLL_AUTH_KEY", key.c_str(), 1);
  }
  int version = 0;
  collGetVersion(&version);
  std::printf("Collectives %d: float32 sum allreduce, %d processes, %d iterations per size, %s\n", version, nranks,
              iters,
              std::getenv("COLL_SHM_DISABLE") && std::atoi(std::getenv("COLL_SHM_DISABLE")) ? "TCP (COLL_SHM_DISABLE=1)"
                                                                                            : "shared memory");
  std::fflush(stdout);
  std::vector<pid_t> kids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(runRank(r, nranks, sizes, iters));
    kids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  return failed;
}

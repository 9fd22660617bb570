#include "proc_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace testing {

int freePort() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

std::vector<ProcResult> runProcs(int nranks, const std::function<int(int, std::string&)>& body,
                                 const ProcOptions& opts) {
  std::string commId = "127.0.0.1:" + std::to_string(freePort());
  std::vector<pid_t> pids(nranks);
  std::vector<int> fds(nranks);
  for (int r = 0; r < nranks; ++r) {
    int p[2];
    if (pipe(p) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      setenv("COLL_COMM_ID", commId.c_str(), 1);
      setenv("COLL_SOCKET_IFNAME", "lo", 1);
      for (auto& [k, v] : opts.env) setenv(k.c_str(), v.c_str(), 1);
      if (opts.perRankEnv) opts.perRankEnv(r);
      std::string report;
      int code = body(r, report);
      ssize_t w = write(p[1], report.data(), report.size());
      (void)w;
      _exit(code);
    }
    close(p[1]);
    pids[r] = pid;
    fds[r] = p[0];
  }
  if (opts.parent) opts.parent(pids);
  std::vector<ProcResult> res(nranks);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(opts.timeoutS * 1000));
  int left = nranks;
  std::vector<bool> done(nranks, false);
  while (left > 0) {
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      char buf[4096];
      pollfd pf{fds[r], POLLIN, 0};
      while (poll(&pf, 1, 0) > 0) {
        ssize_t n = read(fds[r], buf, sizeof(buf));
        if (n <= 0) break;
        res[r].output.append(buf, static_cast<size_t>(n));
      }
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        ssize_t n;
        while ((n = read(fds[r], buf, sizeof(buf))) > 0) res[r].output.append(buf, static_cast<size_t>(n));
        close(fds[r]);
        done[r] = true;
        --left;
        if (WIFEXITED(status)) res[r].exitCode = WEXITSTATUS(status);
        else if (WIFSIGNALED(status)) res[r].signal = WTERMSIG(status);
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nranks; ++r)
        if (!done[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          close(fds[r]);
          res[r].output += " [timed out: killed by the test]";
          done[r] = true;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return res;
}

int basicOps(int rank, std::string& report) {
  collComm_t comm = nullptr;
  collUniqueId id;
  int n = std::atoi(std::getenv("TEST_NRANKS"));
  PCHECK(collGetUniqueId(&id));
  PCHECK(collCommInitRank(&comm, n, id, rank));
  for (size_t count : {size_t{1}, size_t{1000}, size_t{300000}}) {
    std::vector<int32_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(rank * 1000 + i % 97);
    PCHECK(collAllReduce(in.data(), out.data(), count, collInt32, collSum, comm, nullptr));
    for (size_t i = 0; i < count; ++i)
      if (out[i] != static_cast<int32_t>(1000 * n * (n - 1) / 2 + n * (i % 97))) {
        report += "allreduce wrong at " + std::to_string(i);
        return 1;
      }
    PCHECK(collBroadcast(in.data(), out.data(), count, collInt32, n - 1, comm, nullptr));
    for (size_t i = 0; i < count; ++i)
      if (out[i] != static_cast<int32_t>((n - 1) * 1000 + i % 97)) {
        report += "broadcast wrong at " + std::to_string(i);
        return 1;
      }
    std::vector<int32_t> big(count * n), part(count);
    for (size_t i = 0; i < count * n; ++i) big[i] = static_cast<int32_t>(rank + i % 89);
    PCHECK(collReduceScatter(big.data(), part.data(), count, collInt32, collSum, comm, nullptr));
    for (size_t i = 0; i < count; ++i)
      if (part[i] != static_cast<int32_t>(n * (n - 1) / 2 + n * ((rank * count + i) % 89))) {
        report += "reduce-scatter wrong at " + std::to_string(i);
        return 1;
      }
    PCHECK(collReduce(in.data(), out.data(), count, collInt32, collMax, 0, comm, nullptr));
    for (size_t i = 0; rank == 0 && i < count; ++i)
      if (out[i] != static_cast<int32_t>((n - 1) * 1000 + i % 97)) {
        report += "reduce wrong at " + std::to_string(i);
        return 1;
      }
    std::vector<int32_t> all(count * n);
    PCHECK(collAllGather(in.data(), all.data(), count, collInt32, comm, nullptr));
    for (int r = 0; r < n; ++r)
      if (all[r * count] != r * 1000) {
        report += "allgather wrong";
        return 1;
      }
  }
  PCHECK(collCommDestroy(comm));
  return 0;
}

std::string describe(const std::vector<ProcResult>& res) {
  std::string s;
  for (size_t r = 0; r < res.size(); ++r)
    s += "rank " + std::to_string(r) + " exit " + std::to_string(res[r].exitCode) + " signal " +
         std::to_string(res[r].signal) + ": " + res[r].output + "\n";
  return s;
}

}  // namespace testing

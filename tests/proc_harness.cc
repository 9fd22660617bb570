#include "proc_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

}  // namespace testing

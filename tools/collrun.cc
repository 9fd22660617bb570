// collrun: launches N local ranks of a program.
//
//   collrun -np N [--bind core|numa|none] [--nodes K] [--timeout S] [-x VAR[=VAL]]...
//           [--tag-output] -- prog args...
//
// Picks a free loopback port for COLL_COMM_ID, gives every rank COLL_RANK, COLL_NRANKS,
// COLL_LOCAL_RANK and COLL_LOCAL_SIZE, forwards its stdout/stderr (prefixed "[rank] "
// with --tag-output), and exits with the first non-zero status. When a rank fails, or
// the timeout passes (exit 124), the other ranks get SIGTERM, then SIGKILL 2 s later.
// --nodes K splits the ranks into K simulated hosts (COLL_HOSTID collrun-node<k>, ranks
// in contiguous blocks), so the inter-host paths run on one machine.
// Every job gets its own key (docs/SECURITY.md): a random one in a file only this user
// may read (COLL_AUTH_KEY_FILE), removed when collrun ends, unless the environment or a
// -x already names a key.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

int freePort() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  close(s);
  return ntohs(a.sin_port);
}

// CPUs of NUMA node `node` from sysfs ("0-3,8-11").
std::vector<int> numaCpus(int node) {
  std::vector<int> cpus;
  std::ifstream f("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  std::string list;
  if (!std::getline(f, list)) return cpus;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(pos, comma - pos);
    size_t dash = item.find('-');
    int a = std::atoi(item.c_str()), b = dash == std::string::npos ? a : std::atoi(item.c_str() + dash + 1);
    for (int c = a; c <= b; ++c) cpus.push_back(c);
    pos = comma + 1;
  }
  return cpus;
}

int numaNodes() {
  int n = 0;
  while (access(("/sys/devices/system/node/node" + std::to_string(n)).c_str(), F_OK) == 0) ++n;
  return n;
}

void bindRank(const std::string& how, int localRank) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (how == "core") {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_SET(localRank % ncpu, &set);
  } else if (how == "numa") {
    int nodes = std::max(1, numaNodes());
    for (int c : numaCpus(localRank % nodes)) CPU_SET(c, &set);
    if (CPU_COUNT(&set) == 0) return;
  } else {
    return;
  }
  sched_setaffinity(0, sizeof(set), &set);
}

// The job's key file: 64 random hex digits, mode 0600 (mkstemp's), unlinked on exit.
class KeyFile {
 public:
  KeyFile() {
    const char* dir = std::getenv("TMPDIR");
    std::string path = std::string(dir && *dir ? dir : "/tmp") + "/collrun-key-XXXXXX";
    int fd = mkstemp(path.data());
    if (fd < 0) return;
    unsigned char key[32];
    char text[65];
    bool ok = getrandom(key, sizeof(key), 0) == static_cast<ssize_t>(sizeof(key));
    for (size_t i = 0; i < sizeof(key); ++i) std::snprintf(text + 2 * i, 3, "%02x", key[i]);
    ok = ok && write(fd, text, 64) == 64;
    close(fd);
    if (ok) path_ = path;
    else unlink(path.c_str());
  }
  ~KeyFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  KeyFile(const KeyFile&) = delete;
  KeyFile& operator=(const KeyFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool keyNamed() {
  for (const char* v : {"COLL_AUTH_KEY", "COLL_AUTH_KEY_FILE", "NCCL_AUTH_KEY", "NCCL_AUTH_KEY_FILE"}) {
    const char* s = std::getenv(v);
    if (s && *s) return true;
  }
  return false;
}

volatile sig_atomic_t gSignal = 0;
void onSignal(int sig) { gSignal = sig; }

struct Child {
  pid_t pid = -1;
  int out = -1, err = -1;
  std::string outBuf, errBuf;
  bool done = false;
  int status = 0;
};

// Writes complete lines (and, at EOF, the rest) with an optional prefix.
void forward(std::string& buf, FILE* to, const std::string& prefix, bool flushAll) {
  size_t start = 0, nl;
  while ((nl = buf.find('\n', start)) != std::string::npos) {
    std::fprintf(to, "%s%.*s\n", prefix.c_str(), static_cast<int>(nl - start), buf.data() + start);
    start = nl + 1;
  }
  buf.erase(0, start);
  if (flushAll && !buf.empty()) {
    std::fprintf(to, "%s%s\n", prefix.c_str(), buf.c_str());
    buf.clear();
  }
  std::fflush(to);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collrun: run N local ranks of a program with the collectives launch environment"};
  int np = 0, nodes = 1;
  double timeout = 0;
  std::string bind = "none";
  std::vector<std::string> exports, command;
  bool tag = false;
  app.add_option("-n,-N,--np", np, "number of ranks (-np works too)")->required()->check(CLI::Range(1, 4096));
  app.add_option("--bind", bind, "bind ranks to: core, numa or none")
      ->check(CLI::IsMember({"core", "numa", "none"}))
      ->capture_default_str();
  app.add_option("--nodes", nodes, "simulated hosts (ranks split in contiguous blocks)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--timeout", timeout, "seconds before every rank is stopped (0: none)")->capture_default_str();
  // One value per -x (repeatable), so "-x A=1 -- prog -n 5" leaves prog's options alone.
  app.add_option("-x", exports, "export VAR (from this environment) or VAR=VAL to the ranks")->allow_extra_args(false);
  app.add_flag("--tag-output", tag, "prefix every output line with [rank]");
  app.add_option("command", command, "program and its arguments (after --)")->required();
  app.allow_extras(false);
  // mpirun's spelling "-np" is not a valid CLI11 name: rewrite it before parsing.
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& a : args) {
    if (a == "--") break;
    if (a == "-np") a = "--np";
  }
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (nodes > np) {
    std::fprintf(stderr, "collrun: --nodes %d is more than -np %d\n", nodes, np);
    return 2;
  }
  int port = freePort();
  if (port < 0) {
    std::fprintf(stderr, "collrun: cannot find a free port on 127.0.0.1\n");
    return 2;
  }
  std::string commId = "127.0.0.1:" + std::to_string(port);
  const KeyFile keyFile;
  if (keyFile.path().empty() && !keyNamed())
    std::fprintf(stderr, "collrun: cannot write a key file (TMPDIR): the ranks' connections are unauthenticated\n");
  int perNode = (np + nodes - 1) / nodes;
  std::vector<Child> kids(np);
  for (int r = 0; r < np; ++r) {
    int o[2], e[2];
    if (pipe(o) != 0 || pipe(e) != 0) {
      perror("collrun: pipe");
      return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
      perror("collrun: fork");
      return 2;
    }
    if (pid == 0) {
      // If collrun dies, even by SIGKILL, its ranks must not live on.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() == 1) _exit(1);
      dup2(o[1], 1);
      dup2(e[1], 2);
      close(o[0]);
      close(o[1]);
      close(e[0]);
      close(e[1]);
      int node = r / perNode, local = r % perNode;
      int localSize = std::min(perNode, np - node * perNode);
      setenv("COLL_COMM_ID", commId.c_str(), 1);
      setenv("COLL_RANK", std::to_string(r).c_str(), 1);
      setenv("COLL_NRANKS", std::to_string(np).c_str(), 1);
      setenv("COLL_LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("COLL_LOCAL_SIZE", std::to_string(localSize).c_str(), 1);
      if (nodes > 1) setenv("COLL_HOSTID", ("collrun-node" + std::to_string(node)).c_str(), 1);
      // One machine: keep the ranks' sockets on loopback unless told otherwise.
      setenv("COLL_SOCKET_IFNAME", "lo", 0);
      for (const std::string& x : exports) {
        size_t eq = x.find('=');
        if (eq != std::string::npos) setenv(x.substr(0, eq).c_str(), x.substr(eq + 1).c_str(), 1);
      }
      if (!keyFile.path().empty() && !keyNamed()) setenv("COLL_AUTH_KEY_FILE", keyFile.path().c_str(), 1);
      // Simulated hosts share this machine's cores: place by launch-wide rank (by the
      // local rank, every host's rank 0 would share core 0).
      bindRank(bind, r);
      std::vector<char*> args;
      for (auto& a : command) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      std::fprintf(stderr, "collrun: cannot run %s: %s\n", args[0], std::strerror(errno));
      _exit(127);
    }
    close(o[1]);
    close(e[1]);
    kids[r].pid = pid;
    kids[r].out = o[0];
    kids[r].err = e[0];
  }

  // Ctrl-C, SIGTERM or SIGHUP to collrun stops the ranks the same way a failure does.
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  auto start = std::chrono::steady_clock::now();
  int exitCode = 0, left = np;
  bool stopping = false;
  std::chrono::steady_clock::time_point termAt;
  auto stopAll = [&](const char* why) {
    if (stopping) return;
    stopping = true;
    termAt = std::chrono::steady_clock::now();
    if (why) std::fprintf(stderr, "collrun: %s; stopping the other ranks\n", why);
    for (auto& k : kids)
      if (!k.done) kill(k.pid, SIGTERM);
  };
  while (left > 0) {
    std::vector<pollfd> fds;
    std::vector<std::pair<int, bool>> who;
    for (int r = 0; r < np; ++r) {
      if (kids[r].out >= 0) {
        fds.push_back({kids[r].out, POLLIN, 0});
        who.push_back({r, true});
      }
      if (kids[r].err >= 0) {
        fds.push_back({kids[r].err, POLLIN, 0});
        who.push_back({r, false});
      }
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 50);
    else usleep(20000);
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto [r, isOut] = who[i];
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof(buf));
      std::string& b = isOut ? kids[r].outBuf : kids[r].errBuf;
      std::string prefix = tag ? "[" + std::to_string(r) + "] " : "";
      if (n > 0) {
        b.append(buf, static_cast<size_t>(n));
        forward(b, isOut ? stdout : stderr, prefix, false);
      } else {
        forward(b, isOut ? stdout : stderr, prefix, true);
        close(fds[i].fd);
        (isOut ? kids[r].out : kids[r].err) = -1;
      }
    }
    for (int r = 0; r < np; ++r) {
      Child& k = kids[r];
      if (k.done || k.out >= 0 || k.err >= 0) continue;  // drain output first
      if (waitpid(k.pid, &k.status, WNOHANG) != k.pid) continue;
      k.done = true;
      --left;
      int code = WIFEXITED(k.status) ? WEXITSTATUS(k.status) : 128 + WTERMSIG(k.status);
      if (code != 0 && exitCode == 0 && !stopping) {
        exitCode = code;
        std::string why = "rank " + std::to_string(r) +
                          (WIFEXITED(k.status) ? " exited with status " + std::to_string(code)
                                               : std::string(" was killed by signal ") + strsignal(WTERMSIG(k.status)));
        stopAll(why.c_str());
      }
    }
    if (gSignal && !stopping) {
      exitCode = 128 + gSignal;
      stopAll((std::string("collrun received ") + strsignal(gSignal)).c_str());
    }
    auto now = std::chrono::steady_clock::now();
    if (timeout > 0 && !stopping && now - start > std::chrono::duration<double>(timeout)) {
      exitCode = 124;
      stopAll(("timeout of " + std::to_string(static_cast<int>(timeout)) + " s passed").c_str());
    }
    if (stopping && now - termAt > std::chrono::seconds(2))
      for (auto& k : kids)
        if (!k.done) kill(k.pid, SIGKILL);
  }
  return exitCode;
}

#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/param.h"

namespace coll {

namespace {

thread_local int tlsRank = -1;
thread_local const char* tlsName = "";    // the communicator's name (LogContext)
thread_local bool tlsReadingEnv = false;  // logSettingUp

struct LogState {
  LogConfig cfg{LogLevel::kWarn, kSubALL};
  FILE* out = stderr;
  char host[64] = "?";
  std::mutex mu;
};

unsigned subsysBit(const std::string& name) {
  // Subsystem i is bit i (log.h).
  static const char* const kNames[] = {"INIT",  "COLL",   "P2P", "SHM",       "NET",
                                       "GRAPH", "TUNING", "ENV", "BOOTSTRAP", "PROXY"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == 10 && kSubPROXY == 1u << 9, "a name for every subsystem");
  if (strcasecmp(name.c_str(), "ALL") == 0) return kSubALL;
  for (unsigned i = 0; i < sizeof(kNames) / sizeof(kNames[0]); ++i)
    if (strcasecmp(kNames[i], name.c_str()) == 0) return 1u << i;
  return 0;
}

// Level, subsystems and destination from the environment.
void readEnv(LogState* st) {
  struct Flag {
    Flag() { tlsReadingEnv = true; }
    ~Flag() { tlsReadingEnv = false; }
  } settingUp;
  LogLevel level = LogLevel::kWarn;
  std::string lvl = param(StringParam::DEBUG);
  if (strcasecmp(lvl.c_str(), "VERSION") == 0) level = LogLevel::kVersion;
  else if (strcasecmp(lvl.c_str(), "WARN") == 0) level = LogLevel::kWarn;
  else if (strcasecmp(lvl.c_str(), "INFO") == 0) level = LogLevel::kInfo;
  else if (strcasecmp(lvl.c_str(), "TRACE") == 0) level = LogLevel::kTrace;
  else if (strcasecmp(lvl.c_str(), "NONE") == 0) level = LogLevel::kNone;
  st->cfg.level.store(level, std::memory_order_relaxed);
  std::string subs = param(StringParam::DEBUG_SUBSYS);
  bool invert = !subs.empty() && subs[0] == '^';
  if (invert) subs.erase(0, 1);
  unsigned mask = 0;
  size_t pos = 0;
  while (pos <= subs.size()) {
    size_t comma = subs.find(',', pos);
    if (comma == std::string::npos) comma = subs.size();
    mask |= subsysBit(subs.substr(pos, comma - pos));
    pos = comma + 1;
  }
  st->cfg.mask.store(invert ? ~mask : mask, std::memory_order_relaxed);
  std::string file = param(StringParam::DEBUG_FILE);
  if (!file.empty()) {
    std::string path;
    for (size_t i = 0; i < file.size(); ++i) {
      if (file[i] == '%' && i + 1 < file.size()) {
        if (file[i + 1] == 'h') {
          path += st->host;
          ++i;
          continue;
        }
        if (file[i + 1] == 'p') {
          path += std::to_string(getpid());
          ++i;
          continue;
        }
      }
      path += file[i];
    }
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      if (st->out != stderr) std::fclose(st->out);
      st->out = f;
    }
  }
}

LogState& state() {
  static LogState* s = [] {
    auto* st = new LogState();  // never freed: logging must work during exit
    gethostname(st->host, sizeof(st->host) - 1);
    if (char* dot = std::strchr(st->host, '.')) *dot = 0;
    readEnv(st);
    return st;
  }();
  return *s;
}

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::kVersion: return "VERSION";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kTrace: return "TRACE";
    default: return "";
  }
}

const char* subsysName(unsigned sub) {
  static const char* kNames[] = {"INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "BOOTSTRAP", "PROXY"};
  for (int i = 0; i < 10; ++i)
    if (sub == (1u << i)) return kNames[i];
  return "ALL";
}

}  // namespace

const LogConfig& logConfig() { return state().cfg; }

bool logSettingUp() { return tlsReadingEnv; }

void setLogRank(int rank) { tlsRank = rank; }

void logReset() {
  LogState& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.out != stderr) std::fclose(st.out);
  st.out = stderr;
  readEnv(&st);
}

LogContext::LogContext(int rank, const std::string& name) : prevRank_(tlsRank), prevName_(tlsName) {
  tlsRank = rank;
  tlsName = name.c_str();
}
LogContext::~LogContext() {
  tlsRank = prevRank_;
  tlsName = prevName_;
}

void logWrite(LogLevel lvl, unsigned sub, const char* file, int line, const char* fmt, ...) {
  int savedErrno = errno;
  LogState& st = state();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char rank[96] = "";
  if (tlsRank >= 0 && tlsName[0]) snprintf(rank, sizeof(rank), " [%s %d]", tlsName, tlsRank);
  else if (tlsRank >= 0) snprintf(rank, sizeof(rank), " [%d]", tlsRank);
  else if (tlsName[0]) snprintf(rank, sizeof(rank), " [%s]", tlsName);
  const char* base = std::strrchr(file, '/');
  {
    std::lock_guard<std::mutex> lock(st.mu);
    if (lvl == LogLevel::kTrace)
      fprintf(st.out, "%s:%d:%ld%s COLL %s %s %s:%d %s\n", st.host, getpid(), static_cast<long>(syscall(SYS_gettid)),
              rank, levelName(lvl), subsysName(sub), base ? base + 1 : file, line, msg);
    else
      fprintf(st.out, "%s:%d:%ld%s COLL %s %s %s\n", st.host, getpid(), static_cast<long>(syscall(SYS_gettid)), rank,
              levelName(lvl), subsysName(sub), msg);
    fflush(st.out);
  }
  errno = savedErrno;
}

}  // namespace coll

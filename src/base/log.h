// Logging: COLL_DEBUG picks the level (VERSION, WARN, INFO, TRACE), COLL_DEBUG_SUBSYS the
// subsystems, COLL_DEBUG_FILE the destination. The macros test level and subsystem
// before formatting anything, and preserve errno. Lines read
//   host:pid:tid [rank] COLL INFO NET message
#pragma once

#include <atomic>
#include <cstdarg>
#include <string>

namespace coll {

enum class LogLevel { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

enum LogSubsys : unsigned {
  kSubINIT = 1u << 0,
  kSubCOLL = 1u << 1,
  kSubP2P = 1u << 2,
  kSubSHM = 1u << 3,
  kSubNET = 1u << 4,
  kSubGRAPH = 1u << 5,
  kSubTUNING = 1u << 6,
  kSubENV = 1u << 7,
  kSubBOOTSTRAP = 1u << 8,
  kSubPROXY = 1u << 9,
  kSubALL = ~0u,
};

// Atomics: logReset changes them while other threads may be logging (relaxed: a line
// written meanwhile may follow either setting, as logReset says).
struct LogConfig {
  std::atomic<LogLevel> level;
  std::atomic<unsigned> mask;
};
// Reads the environment once (thread-safe).
const LogConfig& logConfig();
// The VERSION banner shows at level VERSION and from INFO up, never at the default WARN
// (NCCL's rule: a default run prints warnings only).
inline bool logEnabled(LogLevel lvl, unsigned sub) {
  const LogConfig& c = logConfig();
  const LogLevel level = c.level.load(std::memory_order_relaxed);
  if (lvl == LogLevel::kVersion) return level == LogLevel::kVersion || level >= LogLevel::kInfo;
  return static_cast<int>(lvl) <= static_cast<int>(level) &&
         (lvl == LogLevel::kWarn || (c.mask.load(std::memory_order_relaxed) & sub));
}
// Reads COLL_DEBUG, COLL_DEBUG_SUBSYS and COLL_DEBUG_FILE again (collResetDebugInit).
// Meant for a quiet moment: lines being written meanwhile may use either setting.
void logReset();
void logWrite(LogLevel lvl, unsigned sub, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// Whether this thread is reading the log's settings (where a line may not be written:
// env_plugin.h defers its messages).
bool logSettingUp();
// The rank printed in this thread's log lines (-1: none).
void setLogRank(int rank);

// For its lifetime, this thread's log lines name `rank` and the communicator's name
// (collConfig_t.commName; empty: none); the previous context comes back after.
class LogContext {
 public:
  // name is kept by address, not copied: it must outlive the context (a communicator's
  // name, while a call holds the communicator).
  LogContext(int rank, const std::string& name);
  ~LogContext();
  LogContext(const LogContext&) = delete;
  LogContext& operator=(const LogContext&) = delete;

 private:
  int prevRank_;
  const char* prevName_;
};

}  // namespace coll

#define COLL_LOG_(lvl, sub, ...)                                                 \
  do {                                                                           \
    if (::coll::logEnabled(lvl, ::coll::kSub##sub))                              \
      ::coll::logWrite(lvl, ::coll::kSub##sub, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define COLL_WARN(sub, ...) COLL_LOG_(::coll::LogLevel::kWarn, sub, __VA_ARGS__)
#define COLL_INFO(sub, ...) COLL_LOG_(::coll::LogLevel::kInfo, sub, __VA_ARGS__)
#define COLL_TRACE(sub, ...) COLL_LOG_(::coll::LogLevel::kTrace, sub, __VA_ARGS__)

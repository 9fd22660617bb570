// Logging: COLL_DEBUG picks the level (VERSION, WARN, INFO, TRACE), COLL_DEBUG_SUBSYS the
// subsystems, COLL_DEBUG_FILE the destination. The macros test level and subsystem
// before formatting anything, and preserve errno. Lines read
//   host:pid:tid [rank] COLL INFO NET message
#pragma once

#include <cstdarg>

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

struct LogConfig {
  LogLevel level;
  unsigned mask;
};
// Reads the environment once (thread-safe).
const LogConfig& logConfig();
inline bool logEnabled(LogLevel lvl, unsigned sub) {
  const LogConfig& c = logConfig();
  return static_cast<int>(lvl) <= static_cast<int>(c.level) &&
         (lvl == LogLevel::kWarn || lvl == LogLevel::kVersion || (c.mask & sub));
}
void logWrite(LogLevel lvl, unsigned sub, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// The rank printed in this thread's log lines (-1: none).
void setLogRank(int rank);

}  // namespace coll

#define COLL_LOG_(lvl, sub, ...)                                                 \
  do {                                                                           \
    if (::coll::logEnabled(lvl, ::coll::kSub##sub))                             \
      ::coll::logWrite(lvl, ::coll::kSub##sub, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define COLL_WARN(sub, ...) COLL_LOG_(::coll::LogLevel::kWarn, sub, __VA_ARGS__)
#define COLL_INFO(sub, ...) COLL_LOG_(::coll::LogLevel::kInfo, sub, __VA_ARGS__)
#define COLL_TRACE(sub, ...) COLL_LOG_(::coll::LogLevel::kTrace, sub, __VA_ARGS__)

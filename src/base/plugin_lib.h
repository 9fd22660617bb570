// Opening NCCL's external plugin libraries (tuner, profiler, env; the net plugin has its
// own loader in transport/net/plugin) the way NCCL names them, and the logger NCCL hands
// every plugin.
//
// A plugin is named by a variable (NCCL_TUNER_PLUGIN, ...): unset, the library
// libnccl-KIND.so is tried; "none" disables the kind; a path or a library name
// ("libfoo.so") is opened as given; any other word NAME is tried as given and then as
// libnccl-KIND-NAME.so. One library may carry several kinds: each kind looks up its own
// versioned symbol in it.
#pragma once

#include <cstdarg>
#include <string>
#include <vector>

#include "base/status.h"

namespace coll {

// The plugin kinds named by NCCL's library prefixes: "tuner", "profiler", "env", "net".
struct PluginHandle {
  void* handle = nullptr;  // from dlopen; never closed (a plugin's code may still run at exit)
  std::string path;        // the file the loader found
};

// The names tried for `spec` (see above), in order.
std::vector<std::string> pluginLibraryNames(const char* kind, const std::string& spec);
// dlopen of the first name that loads; the loader's reason for each that did not.
Result<PluginHandle> openPluginLib(const char* kind, const std::string& spec);
// Whether the variable's value turns the kind off ("none", any case).
bool pluginDisabled(const char* spec);

// The logger given to plugins (NCCL's ncclDebugLogger_t): NCCL's levels (1 version,
// 2 warn, 3 info, 4 abort, 5 trace) and subsystem bits (the first eight equal ours; proxy
// 0x400, bootstrap 0x1000); a line naming none of ours goes to subsystem INIT.
void pluginLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
// The same, with the subsystem for lines that name none of ours.
void pluginLogV(unsigned defaultSub, int level, unsigned long flags, const char* file, int line, const char* fmt,
                va_list ap);

}  // namespace coll

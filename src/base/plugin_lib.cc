#include "base/plugin_lib.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

#include "base/log.h"

namespace coll {

std::vector<std::string> pluginLibraryNames(const char* kind, const std::string& spec) {
  const std::string prefix = std::string("libnccl-") + kind;
  if (spec.empty()) return {prefix + ".so"};
  std::vector<std::string> names{spec};
  const bool isLibName = spec.rfind("lib", 0) == 0 && spec.ends_with(".so");
  if (spec.find('/') == std::string::npos && !isLibName) names.push_back(prefix + "-" + spec + ".so");
  return names;
}

Result<PluginHandle> openPluginLib(const char* kind, const std::string& spec) {
  std::string tried;
  for (const std::string& name : pluginLibraryNames(kind, spec)) {
    if (void* dl = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      PluginHandle lib{dl, name};
      Dl_info info{};
      // The file found on the search path, for messages; any symbol of the library does.
      if (void* sym = dlsym(dl, "_init"); sym && dladdr(sym, &info) && info.dli_fname) lib.path = info.dli_fname;
      return lib;
    }
    const char* why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : name + ": not loadable");
  }
  return Status(Code::kSystem, std::string("cannot load ") + kind + " plugin \"" + spec + "\": " + tried);
}

bool pluginDisabled(const char* spec) { return spec != nullptr && strcasecmp(spec, "none") == 0; }

void pluginLogV(unsigned defaultSub, int level, unsigned long flags, const char* file, int line, const char* fmt,
                va_list ap) {
  LogLevel lvl = LogLevel::kInfo;
  switch (level) {
    case 0: return;
    case 1: lvl = LogLevel::kVersion; break;
    case 2:
    case 4: lvl = LogLevel::kWarn; break;  // warn, abort
    case 5: lvl = LogLevel::kTrace; break;
    default: break;
  }
  unsigned sub = defaultSub;
  if ((flags & defaultSub) == 0) {
    if ((flags & 0xffu) != 0) sub = 1u << __builtin_ctzl(flags & 0xffu);
    else if ((flags & 0x400u) != 0) sub = kSubPROXY;
    else if ((flags & 0x1000u) != 0) sub = kSubBOOTSTRAP;
  }
  if (!logEnabled(lvl, sub) || fmt == nullptr) return;
  char text[1024];
  vsnprintf(text, sizeof(text), fmt, ap);
  size_t n = strlen(text);
  while (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
  logWrite(lvl, sub, file ? file : "plugin", line, "%s", text);
}

void pluginLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pluginLogV(kSubINIT, level, flags, file, line, fmt, ap);
  va_end(ap);
}

}  // namespace coll

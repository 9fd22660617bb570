#include "base/env_plugin.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/plugin_lib.h"

namespace coll {

namespace {

// NCCL's tables (our names; ncclResult_t as int, ncclDebugLogger_t as Logger).
using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);
struct EnvV1 {
  const char* name;
  int (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix);
  int (*finalize)();
  const char* (*getEnv)(const char* name);
};
struct EnvV2 {
  const char* name;
  int (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, Logger log);
  int (*finalize)();
  const char* (*getEnv)(const char* name);
};

struct Loaded {
  int version = 0;
  const char* name = nullptr;
  int (*finalize)() = nullptr;
  const char* (*getEnv)(const char*) = nullptr;
};

Loaded gPlugin;                    // version 0: none
std::atomic<bool> gActive{false};  // loaded and not yet finalized
std::once_flag gOnce;
thread_local bool tlsLoading = false;  // the loader's own reads go to the environment
std::mutex gCallMu;                    // getEnv and finalize, one at a time
// What loading had to say, logged by the first lookup outside the log's own set-up (the
// log reads its level through here).
std::mutex gNoteMu;
std::vector<std::pair<bool, std::string>>* gNotes = new std::vector<std::pair<bool, std::string>>();  // (warn, text)

void note(bool warn, std::string text) {
  std::lock_guard<std::mutex> lock(gNoteMu);
  gNotes->emplace_back(warn, std::move(text));
}

void logNotes() {
  std::vector<std::pair<bool, std::string>> notes;
  {
    std::lock_guard<std::mutex> lock(gNoteMu);
    notes.swap(*gNotes);
  }
  for (const auto& [warn, text] : notes) {
    if (warn) COLL_WARN(ENV, "%s", text.c_str());
    else COLL_INFO(ENV, "%s", text.c_str());
  }
}

// The plugin's own lines; while the log reads its settings (through this plugin) they
// wait with the loader's notes.
void envLog(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (logSettingUp()) {
    char text[1024];
    vsnprintf(text, sizeof(text), fmt ? fmt : "", ap);
    if (level == 2 || level == 3 || level == 4) note(level != 3, text);
  } else {
    pluginLogV(kSubENV, level, flags, file, line, fmt, ap);
  }
  va_end(ap);
}

void finalizeAtExit() {
  std::lock_guard<std::mutex> lock(gCallMu);
  if (!gActive.exchange(false)) return;
  gPlugin.finalize();
}

// The table of the library, newest version first, initialised; why not in *why.
bool useLibrary(const PluginHandle& lib, std::string* why) {
  if (const auto* t = static_cast<const EnvV2*>(dlsym(lib.handle, "ncclEnvPlugin_v2"))) {
    if (!t->name || !t->init || !t->finalize || !t->getEnv) return *why = "ncclEnvPlugin_v2 has a null member", false;
    if (int r = t->init(kNcclMajor, kNcclMinor, kNcclPatch, "", envLog); r != 0)
      return *why = "its init returned error " + std::to_string(r), false;
    gPlugin = {2, t->name, t->finalize, t->getEnv};
    return true;
  }
  if (const auto* t = static_cast<const EnvV1*>(dlsym(lib.handle, "ncclEnvPlugin_v1"))) {
    if (!t->name || !t->init || !t->finalize || !t->getEnv) return *why = "ncclEnvPlugin_v1 has a null member", false;
    if (int r = t->init(kNcclMajor, kNcclMinor, kNcclPatch, ""); r != 0)
      return *why = "its init returned error " + std::to_string(r), false;
    gPlugin = {1, t->name, t->finalize, t->getEnv};
    return true;
  }
  *why = "it exports neither ncclEnvPlugin_v2 nor ncclEnvPlugin_v1 (the versions supported)";
  return false;
}

void load() {
  const char* var = std::getenv("COLL_ENV_PLUGIN") ? "COLL_ENV_PLUGIN" : "NCCL_ENV_PLUGIN";
  const char* raw = std::getenv(var);
  if (pluginDisabled(raw)) return;
  const std::string spec = raw ? raw : "";
  Result<PluginHandle> lib = openPluginLib("env", spec);
  if (!lib.ok()) {
    if (spec.empty()) note(false, "no env plugin: " + lib.status().message());
    else
      note(true, std::string(var) + "=\"" + spec + "\": " + lib.status().message() +
                     "; parameters come from the process environment");
    return;
  }
  std::string why;
  if (!useLibrary(lib.value(), &why)) {
    note(true, "env plugin " + lib.value().path + ": " + why + "; parameters come from the process environment");
    return;
  }
  note(false, "env plugin " + std::string(gPlugin.name) + " loaded (" + lib.value().path + "): ABI v" +
                  std::to_string(gPlugin.version));
  gActive = true;
  std::atexit(finalizeAtExit);
}

bool pluginActive() {
  if (tlsLoading) return false;
  std::call_once(gOnce, [] {
    tlsLoading = true;
    load();
    tlsLoading = false;
  });
  if (!logSettingUp()) logNotes();
  return gActive.load(std::memory_order_acquire);
}

// A stable copy of a value (the plugin's pointer lasts only until its next getEnv of
// that name): each distinct value is kept once.
const char* keep(const char* v) {
  static auto* values = new std::set<std::string>();
  return values->insert(v).first->c_str();
}

}  // namespace

const char* envValue(const char* name) {
  if (!pluginActive()) return std::getenv(name);
  std::lock_guard<std::mutex> lock(gCallMu);
  if (!gActive.load()) return std::getenv(name);  // finalized meanwhile (exit)
  const char* v = gPlugin.getEnv(name);
  return v ? keep(v) : nullptr;
}

const char* envPluginName() { return pluginActive() ? gPlugin.name : nullptr; }
int envPluginVersion() { return pluginActive() ? gPlugin.version : 0; }

}  // namespace coll

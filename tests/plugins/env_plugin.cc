// A test env plugin (NCCL's env plugin ABI), built once per version: TEST_ENV_VERSION=N
// exports ncclEnvPlugin_vN only (0: a version-2 table whose init fails). It serves
// TESTENV_<name> as <name> where that is set, else the process's own <name>, so a test
// sees the plugin's value win. It records its calls (testEnvRecord, found with dlsym).
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

#include "plugin_records.h"

namespace {

using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);

EnvRecord rec;
std::mutex mu;
std::string last;  // the value handed out, kept until the next call (the ABI's promise)

int initCommon(uint8_t major, uint8_t minor, uint8_t patch, bool logger) {
  std::lock_guard<std::mutex> lock(mu);
  ++rec.inits;
  rec.major = major;
  rec.minor = minor;
  rec.patch = patch;
  rec.gotLogger = logger;
  return TEST_ENV_VERSION == 0 ? 3 : 0;
}

int initV1(uint8_t major, uint8_t minor, uint8_t patch, const char*) { return initCommon(major, minor, patch, false); }

int initV2(uint8_t major, uint8_t minor, uint8_t patch, const char*, Logger log) {
  if (log) log(3, 0x80, __FILE__, __LINE__, "test env plugin: init for %d.%d.%d", major, minor, patch);
  return initCommon(major, minor, patch, log != nullptr);
}

int finish() {
  std::lock_guard<std::mutex> lock(mu);
  ++rec.finalizes;
  return 0;
}

const char* get(const char* name) {
  std::lock_guard<std::mutex> lock(mu);
  ++rec.lookups;
  const char* v = std::getenv(("TESTENV_" + std::string(name)).c_str());
  if (!v) v = std::getenv(name);
  if (!v) return nullptr;
  last = v;
  return last.c_str();
}

struct TableV1 {
  const char* name;
  int (*init)(uint8_t, uint8_t, uint8_t, const char*);
  int (*finalize)();
  const char* (*getEnv)(const char*);
};
struct TableV2 {
  const char* name;
  int (*init)(uint8_t, uint8_t, uint8_t, const char*, Logger);
  int (*finalize)();
  const char* (*getEnv)(const char*);
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) EnvRecord* testEnvRecord() { return &rec; }

#if TEST_ENV_VERSION == 1
__attribute__((visibility("default"))) TableV1 ncclEnvPlugin_v1 = {"TestEnv1", initV1, finish, get};
#else
__attribute__((visibility("default")))
TableV2 ncclEnvPlugin_v2 = {TEST_ENV_VERSION == 0 ? "TestEnvBroken" : "TestEnv2", initV2, finish, get};
#endif
}

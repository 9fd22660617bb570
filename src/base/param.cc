#include "base/param.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>

#include "base/env_plugin.h"
#include "base/log.h"

namespace coll {

// Never destroyed: library threads (a bootstrap root's monitor, for one) may still read
// parameters while exit() runs the static destructors (AddressSanitizer found the root's
// thread reading the freed table in a process that exited with a communicator open).
const std::vector<ParamInfo>& allParams() {
  static const auto* kParams = new std::vector<ParamInfo>{
#define COLL_PARAM(type, name, def, unit, doc) {#name, ParamType::k##type, def, unit, doc},
#include "base/params.def"
  };
  return *kParams;
}

// The typed enums take their values from ParamIndex, so they index the table directly.
const ParamInfo& paramInfo(IntParam p) { return allParams()[static_cast<size_t>(p)]; }
const ParamInfo& paramInfo(StringParam p) { return allParams()[static_cast<size_t>(p)]; }

const char* paramRaw(const ParamInfo& p) {
  std::string coll = std::string("COLL_") + p.name;
  if (const char* v = envValue(coll.c_str())) return v;
  std::string nccl = std::string("NCCL_") + p.name;
  return envValue(nccl.c_str());
}

const char* paramRaw(IntParam p) { return paramRaw(paramInfo(p)); }
const char* paramRaw(StringParam p) { return paramRaw(paramInfo(p)); }

bool parseSize(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str()) return false;
  int64_t mult = 1;
  if (*end) {
    switch (*end) {
      case 'k':
      case 'K': mult = 1LL << 10; break;
      case 'm':
      case 'M': mult = 1LL << 20; break;
      case 'g':
      case 'G': mult = 1LL << 30; break;
      default: return false;
    }
    if (end[1] != '\0') return false;
  }
  // Every integer parameter stays within +-kMaxIntParam, so a caller may scale it (seconds
  // to microseconds, a count times a size) without overflow.
  if (v > kMaxIntParam / mult || v < -kMaxIntParam / mult) return false;
  *out = v * mult;
  return true;
}

int64_t param(IntParam p) {
  const ParamInfo& info = paramInfo(p);
  int64_t def = 0;
  parseSize(info.defaultValue, &def);  // tests/test_params.cc checks every Int default parses
  const char* raw = paramRaw(info);
  if (!raw || !*raw) return def;
  int64_t v;
  if (!parseSize(raw, &v)) {
    static std::atomic<bool> warned[static_cast<size_t>(ParamIndex::kCount)];
    if (!warned[static_cast<size_t>(p)].exchange(true))
      COLL_WARN(ENV, "COLL_%s=\"%s\" is not an integer within +-2^40; using the default %lld", info.name, raw,
                static_cast<long long>(def));
    return def;
  }
  return v;
}

std::string param(StringParam p) {
  const char* raw = paramRaw(p);
  return raw ? raw : paramInfo(p).defaultValue;
}

}  // namespace coll

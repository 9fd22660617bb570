// Tunables: every one is declared once (name, type, default, unit, doc) in base/params.def,
// read from COLL_<NAME> or, for NCCL users, NCCL_<NAME> (COLL_ wins), through an env
// plugin where one is loaded (env_plugin.h), else the process environment, and listed by
// `collinfo`. They are read through typed accessors, param(IntParam::BUFFSIZE) or
// param(StringParam::NET), so a misspelt name or the wrong type is a compile error rather
// than a silent 0 or "". Values are read when asked for (at communicator init, never on a
// hot path), so a test may setenv() between communicators.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace coll {

enum class ParamType { kInt, kString };

struct ParamInfo {
  const char* name;  // without prefix, e.g. "BUFFSIZE"
  ParamType type;
  const char* defaultValue;
  const char* unit;
  const char* doc;
};

// A parameter's position in allParams(), i.e. in params.def; the typed enums below take
// their values from it, so an accessor finds its entry by index.
enum class ParamIndex : int {
#define COLL_PARAM(type, name, ...) name,
#include "base/params.def"
  kCount
};

// Each typed enum keeps its own type's parameters: COLL_PARAM_<type>(entry) passes the entry
// through for that type and drops it for the other.
#define COLL_PARAM_ENUMERATOR(name) name = static_cast<int>(ParamIndex::name),

enum class IntParam : int {
#define COLL_PARAM_Int(entry) entry
#define COLL_PARAM_String(entry)
#define COLL_PARAM(type, name, ...) COLL_PARAM_##type(COLL_PARAM_ENUMERATOR(name))
#include "base/params.def"
#undef COLL_PARAM_Int
#undef COLL_PARAM_String
};

enum class StringParam : int {
#define COLL_PARAM_Int(entry)
#define COLL_PARAM_String(entry) entry
#define COLL_PARAM(type, name, ...) COLL_PARAM_##type(COLL_PARAM_ENUMERATOR(name))
#include "base/params.def"
#undef COLL_PARAM_Int
#undef COLL_PARAM_String
};

#undef COLL_PARAM_ENUMERATOR

// Every parameter in declaration order, for listing (collinfo) and checking (tests).
const std::vector<ParamInfo>& allParams();
const ParamInfo& paramInfo(IntParam p);
const ParamInfo& paramInfo(StringParam p);

// Integer parameter; a malformed value is reported once at WARN and the default used.
int64_t param(IntParam p);
// String parameter; set but empty reads as "", unset as the default.
std::string param(StringParam p);

// Raw value from the environment (COLL_ then NCCL_), or nullptr when unset: for telling
// "set to the default" from "not set".
const char* paramRaw(IntParam p);
const char* paramRaw(StringParam p);
const char* paramRaw(const ParamInfo& p);

// The bound on every integer parameter's value, either sign (1 TiB; 12 days in us).
constexpr int64_t kMaxIntParam = int64_t{1} << 40;
// Parses "123", "4K", "16M", "1G" (binary units). Returns false on garbage and on values
// beyond +-kMaxIntParam.
bool parseSize(const std::string& text, int64_t* out);

}  // namespace coll

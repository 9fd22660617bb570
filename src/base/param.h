// Tunables: every one is declared once (name, type, default, unit, doc) in param.cc's
// table, read from COLL_<NAME> or, for NCCL users, NCCL_<NAME> (COLL_ wins), and listed
// by `collinfo`. Values are read when asked for (at communicator init, never on a hot
// path), so a test may setenv() between communicators.
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

const std::vector<ParamInfo>& allParams();

// Raw value from the environment (COLL_ then NCCL_), or nullptr when unset.
const char* paramRaw(const char* name);
// Integer parameter; a malformed value is reported once at WARN and the default used.
int64_t paramInt(const char* name);
std::string paramString(const char* name);
// Parses "123", "4K", "16M", "1G" (binary units). Returns false on garbage.
bool parseSize(const std::string& text, int64_t* out);

}  // namespace coll

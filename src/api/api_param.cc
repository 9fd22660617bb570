// Entry points that read the library's parameters by name (base/params.def is the one
// table): bind a handle and read it typed or as text, read one by key, list the keys,
// log them all. Values come from the environment (COLL_ before NCCL_) or the default,
// read at each call, as the library reads them.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "api/guard.h"
#include "base/param.h"

using coll::ParamInfo;
using coll::Status;
using namespace coll::api;

namespace {

// The parameter named key, with or without its COLL_ / NCCL_ prefix.
const ParamInfo* lookup(const char* key) {
  std::string name = key;
  for (const char* prefix : {"COLL_", "NCCL_"})
    if (name.rfind(prefix, 0) == 0) name.erase(0, std::strlen(prefix));
  for (const ParamInfo& p : coll::allParams())
    if (name == p.name) return &p;
  return nullptr;
}

// A handle is the parameter's entry in the table.
const ParamInfo* entry(collParamHandle_t h) {
  const auto& all = coll::allParams();
  const auto* p = reinterpret_cast<const ParamInfo*>(h);
  if (all.empty() || p < &all.front() || p > &all.back()) return nullptr;
  return p;
}

size_t indexOf(const ParamInfo* p) { return static_cast<size_t>(p - &coll::allParams().front()); }

// The value as text: an integer as the library reads it (a malformed setting: the
// default), a string as set.
std::string textOf(const ParamInfo* p) {
  if (p->type == coll::ParamType::kInt) return std::to_string(coll::param(static_cast<coll::IntParam>(indexOf(p))));
  return coll::param(static_cast<coll::StringParam>(indexOf(p)));
}

Status checkHandle(collParamHandle_t h, const void* out, const ParamInfo** p) {
  *p = entry(h);
  if (!*p) return coll::invalidArgument("h " + ptrStr(h) + " is not a handle collParamBind made");
  if (!out) return coll::invalidArgument("out is NULL");
  return coll::okStatus();
}

template <typename T>
collResult_t getTyped(const char* fn, collParamHandle_t h, T* out) {
  return guarded(fn, nullptr, [&]() -> Status {
    const ParamInfo* p;
    COLL_CHECK(checkHandle(h, out, &p));
    if (p->type != coll::ParamType::kInt)
      return coll::invalidUsage(std::string("parameter ") + p->name +
                                " is a string: read it with collParamGetStr or collParamGet");
    const int64_t v = coll::param(static_cast<coll::IntParam>(indexOf(p)));
    const bool fits = std::is_signed_v<T> ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                                v <= static_cast<int64_t>(std::numeric_limits<T>::max())
                                          : v >= 0 && static_cast<uint64_t>(v) <= std::numeric_limits<T>::max();
    if (!fits)
      return coll::invalidArgument(std::string("parameter ") + p->name + " = " + std::to_string(v) +
                                   " does not fit in the " + std::to_string(8 * sizeof(T)) + "-bit " +
                                   (std::is_signed_v<T> ? "signed" : "unsigned") + " type asked for");
    *out = static_cast<T>(v);
    return coll::okStatus();
  });
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

collResult_t collParamBind(collParamHandle_t* out, const char* key) {
  return guarded("collParamBind", nullptr, [&]() -> Status {
    if (!out) return coll::invalidArgument("out is NULL");
    *out = nullptr;
    if (!key) return coll::invalidArgument("key is NULL");
    const ParamInfo* p = lookup(key);
    if (!p) return coll::invalidArgument(std::string("key \"") + key + "\" is not a parameter (collinfo lists them)");
    *out = reinterpret_cast<collParamHandle_t>(const_cast<ParamInfo*>(p));
    return coll::okStatus();
  });
}

collResult_t collParamGetI8(collParamHandle_t h, int8_t* out) { return getTyped("collParamGetI8", h, out); }
collResult_t collParamGetI16(collParamHandle_t h, int16_t* out) { return getTyped("collParamGetI16", h, out); }
collResult_t collParamGetI32(collParamHandle_t h, int32_t* out) { return getTyped("collParamGetI32", h, out); }
collResult_t collParamGetI64(collParamHandle_t h, int64_t* out) { return getTyped("collParamGetI64", h, out); }
collResult_t collParamGetU8(collParamHandle_t h, uint8_t* out) { return getTyped("collParamGetU8", h, out); }
collResult_t collParamGetU16(collParamHandle_t h, uint16_t* out) { return getTyped("collParamGetU16", h, out); }
collResult_t collParamGetU32(collParamHandle_t h, uint32_t* out) { return getTyped("collParamGetU32", h, out); }
collResult_t collParamGetU64(collParamHandle_t h, uint64_t* out) { return getTyped("collParamGetU64", h, out); }

collResult_t collParamGetStr(collParamHandle_t h, const char** out) {
  return guarded("collParamGetStr", nullptr, [&]() -> Status {
    const ParamInfo* p;
    COLL_CHECK(checkHandle(h, out, &p));
    thread_local std::string text;
    text = textOf(p);
    *out = text.c_str();
    return coll::okStatus();
  });
}

collResult_t collParamGet(collParamHandle_t h, void* out, int maxLen, int* len) {
  return guarded("collParamGet", nullptr, [&]() -> Status {
    const ParamInfo* p;
    COLL_CHECK(checkHandle(h, out, &p));
    if (!len) return coll::invalidArgument("len is NULL");
    const std::string text = textOf(p);
    const size_t need = text.size() + 1;
    *len = static_cast<int>(need);
    if (maxLen < 0 || static_cast<size_t>(maxLen) < need)
      return coll::invalidArgument("maxLen " + std::to_string(maxLen) + " is below the " + std::to_string(need) +
                                   " bytes of " + p->name + "'s value with its NUL (*len says how many)");
    std::memcpy(out, text.c_str(), need);
    return coll::okStatus();
  });
}

collResult_t collParamGetParameter(const char* key, const char** value, int* valueLen) {
  return guarded("collParamGetParameter", nullptr, [&]() -> Status {
    if (!key) return coll::invalidArgument("key is NULL");
    if (!value) return coll::invalidArgument("value is NULL");
    const ParamInfo* p = lookup(key);
    if (!p) return coll::invalidArgument(std::string("key \"") + key + "\" is not a parameter (collinfo lists them)");
    thread_local std::string text;
    text = textOf(p);
    *value = text.c_str();
    if (valueLen) *valueLen = static_cast<int>(text.size());
    return coll::okStatus();
  });
}

collResult_t collParamGetAllParameterKeys(const char* prefix, const char*** table, int* tableLen) {
  return guarded("collParamGetAllParameterKeys", nullptr, [&]() -> Status {
    if (!table) return coll::invalidArgument("table is NULL");
    if (!tableLen) return coll::invalidArgument("tableLen is NULL");
    thread_local std::vector<std::string> names;
    thread_local std::vector<const char*> pointers;
    names.clear();
    pointers.clear();
    for (const ParamInfo& p : coll::allParams()) names.push_back(std::string(prefix ? prefix : "") + p.name);
    for (const std::string& n : names) pointers.push_back(n.c_str());
    *table = pointers.data();
    *tableLen = static_cast<int>(pointers.size());
    return coll::okStatus();
  });
}

void collParamDumpAll(void) {
  try {
    for (const ParamInfo& p : coll::allParams()) {
      const char* raw = coll::paramRaw(p);
      COLL_INFO(ENV, "%s = %s (%s)", p.name, textOf(&p).c_str(), raw ? "from the environment" : "default");
    }
  } catch (...) {
  }
}

}  // extern "C"
#pragma GCC visibility pop

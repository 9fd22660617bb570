// NCCL_IB_HCA: which verbs devices and ports the ib backend uses (NCCL's syntax).
#include <cstdlib>
#include <string>

#include "base/env_plugin.h"
#include "base/log.h"
#include "base/param.h"
#include "transport/net/ib/ib_net.h"

namespace coll {

namespace {

// The variable a user set, for warnings: COLL_IB_HCA wins over NCCL_IB_HCA.
const char* hcaVar() { return envValue("COLL_IB_HCA") ? "COLL_IB_HCA" : "NCCL_IB_HCA"; }

bool parsePort(const std::string& text, int* port) {
  if (text.empty() || text.size() > 3) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  *port = std::atoi(text.c_str());
  return *port >= 1 && *port <= 255;
}

}  // namespace

IbHcaSpec parseIbHca(const std::string& text) {
  IbHcaSpec spec;
  std::string s = text;
  if (!s.empty() && s[0] == '^') {
    spec.exclude = true;
    s.erase(0, 1);
  }
  if (!s.empty() && s[0] == '=') {
    spec.exact = true;
    s.erase(0, 1);
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(start, end - start);
    start = end + 1;
    if (item.empty()) {
      if (!s.empty()) COLL_WARN(ENV, "%s=\"%s\": empty device name ignored", hcaVar(), text.c_str());
      continue;
    }
    IbHcaEntry e;
    const size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (e.name.empty() || (colon != std::string::npos && !parsePort(item.substr(colon + 1), &e.port))) {
      COLL_WARN(ENV, "%s=\"%s\": malformed entry \"%s\" ignored (want name or name:port, port 1..255)", hcaVar(),
                text.c_str(), item.c_str());
      continue;
    }
    spec.entries.push_back(e);
  }
  return spec;
}

bool ibHcaMatches(const IbHcaSpec& spec, const std::string& device, int port) {
  if (spec.entries.empty()) return true;
  bool hit = false;
  for (const IbHcaEntry& e : spec.entries) {
    const bool name = spec.exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (name && (e.port == 0 || e.port == port)) hit = true;
  }
  return spec.exclude ? !hit : hit;
}

}  // namespace coll

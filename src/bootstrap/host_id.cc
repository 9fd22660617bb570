#include "bootstrap/host_id.h"

#include <unistd.h>

#include <fstream>

#include "base/param.h"

namespace coll {

std::string localHostName() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::string localHostId() {
  std::string forced = param(StringParam::HOSTID);
  if (!forced.empty()) return forced;
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return localHostName() + ":" + boot;
}

}  // namespace coll

#include "transport/net/net_device.h"

#include <climits>
#include <cstdlib>
#include <sstream>

namespace coll {

std::vector<std::string> pathComponents(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path);
  for (std::string p; std::getline(in, p, '/');)
    if (!p.empty()) parts.push_back(p);
  return parts;
}

int pciDistance(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return -1;
  const std::vector<std::string> pa = pathComponents(a), pb = pathComponents(b);
  size_t common = 0;
  while (common < pa.size() && common < pb.size() && pa[common] == pb[common]) ++common;
  return static_cast<int>(pa.size() - common + pb.size() - common);
}

std::vector<int> nearestDevices(const std::string& gpuPath, const std::vector<std::string>& nicPaths) {
  std::vector<int> all, best;
  int bestDist = INT_MAX;
  for (size_t i = 0; i < nicPaths.size(); ++i) {
    all.push_back(static_cast<int>(i));
    const int d = pciDistance(gpuPath, nicPaths[i]);
    if (d < 0) continue;
    if (d < bestDist) best.clear(), bestDist = d;
    if (d == bestDist) best.push_back(static_cast<int>(i));
  }
  return best.empty() ? all : best;
}

std::string pciSysPath(const std::string& busId) {
  if (busId.empty()) return "";
  std::string lower;
  for (char c : busId) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  char buf[PATH_MAX];
  return realpath(("/sys/bus/pci/devices/" + lower).c_str(), buf) ? std::string(buf) : std::string();
}

int netDeviceFor(NetBackend* b, const std::string& gpuPath, int channel) {
  const int devs = b->devices();
  if (devs <= 1) return 0;
  std::vector<std::string> paths(static_cast<size_t>(devs));
  for (int d = 0; d < devs; ++d) {
    NetProperties props;
    if (b->properties(d, &props).ok()) paths[static_cast<size_t>(d)] = props.pciPath;
  }
  const std::vector<int> near = nearestDevices(gpuPath, paths);
  return near[static_cast<size_t>(channel) % near.size()];
}

}  // namespace coll

// The hwloc table (hwloc_lib.h): dlopen, symbol lookup, and hwloc's header inlines.
#include "topology/hwloc_lib.h"

#include <dlfcn.h>

#include <cstdio>

#include "base/param.h"

namespace coll {

namespace {

template <typename F>
void assign(void* handle, const char* name, F* entry, std::string* missing) {
  *entry = reinterpret_cast<F>(dlsym(handle, name));
  if (!*entry) *missing += std::string(missing->empty() ? "" : ", ") + name;
}

std::string hexVersion(unsigned v) {
  char b[16];
  std::snprintf(b, sizeof(b), "0x%08x", v);
  return b;
}

}  // namespace

Result<HwlocLib> HwlocLib::loadOne(const std::string& name) {
  dlerror();
  // RTLD_LOCAL: hwloc's names stay out of the global scope, so a program's own hwloc (of
  // another version) is never bound to ours, nor ours to it. hwloc's plugins (Debian's:
  // pci through libpciaccess, gl, opencl) look its names up there, so they do not load;
  // its built-in Linux discovery reads the PCI tree from sysfs instead (on the build
  // machine, the same PCI devices and bridges as the pci plugin finds).
  void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    return Status(Code::kSystem, why ? why : name + ": unknown dlopen error");
  }
  HwlocLib lib;
  lib.path = name;
  COLL_CHECK(lib.resolve(h));
  // hwloc keeps its ABI (struct hwloc_obj's layout, which the probe reads) within a major
  // version: the loaded library's must be the header's.
  const unsigned have = lib.getApiVersion();
  if ((have >> 16) != (HWLOC_API_VERSION >> 16))
    return Status(Code::kSystem, name + " is hwloc API " + hexVersion(have) + ", the probe was built for " +
                                     hexVersion(HWLOC_API_VERSION) + " (another major version)");
  return lib;
}

Result<HwlocLib> HwlocLib::load() {
  const std::string names = param(StringParam::HWLOC_LIB);
  std::string why;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    const std::string name = names.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    Result<HwlocLib> lib = loadOne(name);
    if (lib.ok()) return lib;
    why += (why.empty() ? "" : "; ") + lib.status().message();
  }
  return Status(Code::kSystem, "COLL_HWLOC_LIB \"" + names + "\": " + (why.empty() ? "names no library" : why));
}

Status HwlocLib::resolve(void* h) {
  std::string missing;
  assign(h, "hwloc_get_api_version", &getApiVersion, &missing);
  assign(h, "hwloc_topology_init", &topologyInit, &missing);
  assign(h, "hwloc_topology_set_io_types_filter", &topologySetIoTypesFilter, &missing);
  assign(h, "hwloc_topology_load", &topologyLoad, &missing);
  assign(h, "hwloc_topology_destroy", &topologyDestroy, &missing);
  assign(h, "hwloc_get_type_depth", &getTypeDepth, &missing);
  assign(h, "hwloc_get_nbobjs_by_depth", &getNbobjsByDepth, &missing);
  assign(h, "hwloc_get_obj_by_depth", &getObjByDepth, &missing);
  assign(h, "hwloc_bitmap_first", &bitmapFirst, &missing);
  assign(h, "hwloc_bitmap_last", &bitmapLast, &missing);
  assign(h, "hwloc_bitmap_to_ith_ulong", &bitmapToIthUlong, &missing);
  if (!missing.empty()) return Status(Code::kSystem, path + " lacks " + missing + " (not hwloc 2?)");
  return okStatus();
}

int HwlocLib::nbobjsByType(hwloc_topology_t t, hwloc_obj_type_t type) const {
  const int depth = getTypeDepth(t, type);
  if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE) return 0;
  return static_cast<int>(getNbobjsByDepth(t, depth));
}

hwloc_obj_t HwlocLib::objByType(hwloc_topology_t t, hwloc_obj_type_t type, unsigned idx) const {
  const int depth = getTypeDepth(t, type);
  if (depth == HWLOC_TYPE_DEPTH_UNKNOWN || depth == HWLOC_TYPE_DEPTH_MULTIPLE) return nullptr;
  return getObjByDepth(t, depth, idx);
}

// PCI devices are one level, linked as cousins: walk it from its first object.
hwloc_obj_t HwlocLib::pcidevByBusid(hwloc_topology_t t, unsigned dom, unsigned bus, unsigned dev, unsigned fn) const {
  for (hwloc_obj_t o = objByType(t, HWLOC_OBJ_PCI_DEVICE, 0); o; o = o->next_cousin) {
    const auto& p = o->attr->pcidev;
    if (p.domain == dom && p.bus == bus && p.dev == dev && p.func == fn) return o;
  }
  return nullptr;
}

}  // namespace coll

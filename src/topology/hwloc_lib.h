// hwloc, loaded at run time: the calls the topology probe makes, as a table.
//
// Neither libcollectives nor libnccl.so.2 links libhwloc: HwlocLib::load() dlopens the
// first library of COLL_HWLOC_LIB that loads (default libhwloc.so.15, then libhwloc.so)
// and looks up each call, so the one file libnccl.so.2 runs where hwloc is not installed
// (the probe then reads sysfs: probe.cc). Linking it in is no way out: Debian's
// libhwloc.a is not position-independent code. hwloc's header gives the types only.
//
// Several calls of hwloc's API are static inlines of its header that call exported ones
// (hwloc_get_obj_by_type, hwloc_get_root_obj, hwloc_get_pcidev_by_busid, ...). Calling
// them would link hwloc again; the table holds the exported functions, and its methods
// below do what those inlines do, through the table.
//
// Lifetime: the library stays loaded (never dlclosed): hwloc loads plugins and libudev
// under it, and a second load() gets the same handle. A table is plain data: copies are
// free, and any thread may call through it (hwloc's own rules apply: probe.cc serialises
// topology loads).
#pragma once

#include <hwloc.h>

#include <string>

#include "base/status.h"

namespace coll {

struct HwlocLib {
  // The table of the first library COLL_HWLOC_LIB names (comma-separated names or paths)
  // that loads, exports every entry and is hwloc 2.x (the ABI of the header we build
  // with); otherwise an error naming each library tried and why it was refused.
  static Result<HwlocLib> load();

  std::string path;  // the library the entries come from
  unsigned (*getApiVersion)() = nullptr;
  int (*topologyInit)(hwloc_topology_t* t) = nullptr;
  int (*topologySetIoTypesFilter)(hwloc_topology_t t, hwloc_type_filter_e filter) = nullptr;
  int (*topologyLoad)(hwloc_topology_t t) = nullptr;
  void (*topologyDestroy)(hwloc_topology_t t) = nullptr;
  int (*getTypeDepth)(hwloc_topology_t t, hwloc_obj_type_t type) = nullptr;
  unsigned (*getNbobjsByDepth)(hwloc_topology_t t, int depth) = nullptr;
  hwloc_obj_t (*getObjByDepth)(hwloc_topology_t t, int depth, unsigned idx) = nullptr;
  int (*bitmapFirst)(hwloc_const_bitmap_t set) = nullptr;
  int (*bitmapLast)(hwloc_const_bitmap_t set) = nullptr;
  unsigned long (*bitmapToIthUlong)(hwloc_const_bitmap_t set, unsigned i) = nullptr;

  // The header's inlines, through the table: objects of a type (0 or nullptr where the
  // type has no level, or several), the root, and a PCI device by bus id (nullptr: none).
  int nbobjsByType(hwloc_topology_t t, hwloc_obj_type_t type) const;
  hwloc_obj_t objByType(hwloc_topology_t t, hwloc_obj_type_t type, unsigned idx) const;
  hwloc_obj_t rootObj(hwloc_topology_t t) const { return getObjByDepth(t, 0, 0); }
  hwloc_obj_t pcidevByBusid(hwloc_topology_t t, unsigned dom, unsigned bus, unsigned dev, unsigned fn) const;

 private:
  static Result<HwlocLib> loadOne(const std::string& name);
  Status resolve(void* handle);
};

}  // namespace coll

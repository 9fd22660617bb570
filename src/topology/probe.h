// Probing this machine into NCCL's topology XML, and choosing the topology a process uses.
//
// The probe writes what NCCL's dump holds, so one format serves files, dumps and tests:
//   - one <cpu> per NUMA node: numaid, affinity (sysfs cpumap style, 32-bit hex words,
//     most significant first), arch, vendor, familyid, modelid (/proc/cpuinfo);
//   - every GPU (NVML, loaded with dlopen: absent library or driver means no GPU) and every
//     NIC of the net backend (its interface's sysfs device) at its PCI position, under the
//     PCIe bridges above it, with class, ids, link_speed and link_width from sysfs;
//   - NUMA nodes and PCI bridges come from hwloc, loaded at run time (hwloc_lib.h,
//     COLL_HWLOC_LIB); where it does not load, from sysfs (/sys/devices/system/node, each
//     device's sysfs path and numa_node), or one NUMA node holding every CPU;
//     a NIC without a PCI device (loopback, veth) sits directly under its CPU;
//   - per GPU: dev (the CUDA device number from the driver API, which honours
//     CUDA_VISIBLE_DEVICES; NVML order without it), sm, rank (= dev: a probe sees the
//     machine, not a job),
//     and NVLinks that are up, aggregated per remote device (NVSwitch, GPU or CPU).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "topology/topo.h"
#include "topology/xml.h"

namespace coll {

Result<std::unique_ptr<XmlNode>> probeTopologyXml();

// Completes a loaded file with what the probe knows: a <pci> element of the file whose
// bus id the probe found with a <gpu> or <nic> element, and that has none, gets a copy.
// Returns how many elements were added.
int mergeProbe(XmlNode* file, const XmlNode& probed);

// The topology of this process: COLL_TOPO_FILE / NCCL_TOPO_FILE merged with the probe,
// or the probe alone. `origin` receives where it came from ("probe" or the file).
Result<std::unique_ptr<Topology>> loadSystemTopology(std::string* origin = nullptr);

// Writes the topology's XML to COLL_TOPO_DUMP_FILE / NCCL_TOPO_DUMP_FILE when set.
Status dumpTopologyIfAsked(const Topology& topo);

}  // namespace coll

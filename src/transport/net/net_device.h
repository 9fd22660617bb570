// Which of a net backend's devices (NICs, or interfaces for sockets) serves a connection.
//
// Channels spread over the devices: a rank bound to a GPU uses the devices nearest that
// GPU on the PCI tree (as NCCL pairs each GPU with the NIC under its own PCIe switch, so
// its traffic crosses neither the CPU's root complex nor the socket link), channel c on
// the (c mod k)-th of the k nearest; a host rank, or one whose GPU or NICs the machine's
// sysfs does not place, uses every device, channel c on device c mod n. Distances are
// hops on the PCI tree between two functions' sysfs paths
// (/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0): up from one to the deepest
// bridge the two share, and down to the other.
#pragma once

#include <string>
#include <vector>

#include "transport/net/net.h"

namespace coll {

// The non-empty components of a path ("/sys/devices/pci0000:00" -> sys, devices, pci0000:00).
std::vector<std::string> pathComponents(const std::string& path);

// Hops between two sysfs PCI paths through their deepest shared bridge; -1 when either is
// unknown (""). Functions under different root complexes share only /sys/devices.
int pciDistance(const std::string& a, const std::string& b);

// Indices of the devices of `nicPaths` nearest `gpuPath`; every index when the GPU or
// no device has a known path.
std::vector<int> nearestDevices(const std::string& gpuPath, const std::vector<std::string>& nicPaths);

// The sysfs path of the PCI function with bus id `busId` ("0000:3B:00.0", any case);
// "" when empty or not on this machine.
std::string pciSysPath(const std::string& busId);

// The device of `b` for `channel`, nearest the GPU at `gpuPath` ("" for host ranks).
int netDeviceFor(NetBackend* b, const std::string& gpuPath, int channel);

}  // namespace coll

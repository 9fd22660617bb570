// GPUDirect RDMA: whether a device connector's slots live in GPU memory the NIC reads and
// writes directly, or in pinned host memory the proxy moves (host-memory slots).
//
// The choice, per connection side, as NCCL makes it: the backend's device must register
// GPU memory (NetProperties::hostMemOnly false), the PCI path between the rank's GPU and
// that device must be no farther than NCCL_NET_GDR_LEVEL (PXB by default: through PCIe
// switches but not the CPU), and the GPU memory must be exportable: as a dma-buf
// (cuMemGetHandleForAddressRange, where the backend takes one), else as a CUDA pointer
// (nvidia-peermem). Anything short of that uses host-memory slots, with one INFO line saying why.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "transport/net/net.h"

namespace coll {

// PCI paths between two functions, nearest first (NCCL's names).
enum class PciPath : int { kLoc = 0, kPix = 1, kPxb = 2, kPhb = 3, kSys = 4 };
const char* pciPathName(PciPath p);

// The path between the functions at two sysfs paths: LOC the same function; PIX each at
// most two levels (a switch's downstream port) below a bridge they share beneath the
// root port level; PXB sharing a bridge below the root complex otherwise; PHB sharing the
// root complex, or on two root complexes of one NUMA node; SYS across NUMA nodes, or
// where either path is unknown ("").
PciPath pciPathBetween(const std::string& a, const std::string& b);

// NCCL_NET_GDR_LEVEL: a name above or 0-4; a malformed value is an error naming it.
Result<PciPath> gdrLevel();

struct GdrChoice {
  bool on = false;
  bool dmaBuf = false;  // on: register through a dma-buf (else a CUDA pointer)
  std::string why;      // off: the reason; on: the path and how it registers
};

// The choice for a connection side on a backend device with `props`, for a rank whose
// GPU is at sysfs path `gpuPath` ("" unknown), the GPU able to export dma-bufs or not.
GdrChoice chooseGdr(const NetProperties& props, const std::string& gpuPath, bool gpuDmaBuf, PciPath level);

// Where a device connector's slots live when GPUDirect RDMA serves it: GPU memory (with
// its dma-buf, or none for the CUDA-pointer path) that `keep` owns. data null: host-memory slots.
struct GpuSlots {
  char* data = nullptr;
  NetBackend::GpuRange range;
  std::shared_ptr<void> keep;
};

// The slots of a connection side with `peer` on device `dev` of `b`, for a rank whose GPU
// has PCI bus id `gpuBusId`: GPU memory where chooseGdr says so, else none. Logs the
// choice at INFO, and where it uses host-memory slots, why.
GpuSlots gpuSlotsFor(NetBackend* b, int dev, NetUser user, const std::string& gpuBusId, size_t bytes,
                     const std::string& side);

}  // namespace coll

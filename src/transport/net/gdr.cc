#include "transport/net/gdr.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "base/log.h"
#include "base/param.h"
#include "cuda/gpu.h"
#include "transport/net/net_device.h"

namespace coll {

namespace {

// The NUMA node sysfs gives a PCI function (-1 unknown).
int numaNode(const std::string& path) {
  std::ifstream in(path + "/numa_node");
  int node = -1;
  return in >> node ? node : -1;
}

// Index of the root complex component ("pci0000:3a") in a sysfs PCI path, or -1.
int rootIndex(const std::vector<std::string>& parts) {
  for (size_t i = 0; i < parts.size(); ++i)
    if (parts[i].rfind("pci", 0) == 0) return static_cast<int>(i);
  return -1;
}

}  // namespace

const char* pciPathName(PciPath p) {
  static const char* const kNames[] = {"LOC", "PIX", "PXB", "PHB", "SYS"};
  return kNames[static_cast<int>(p)];
}

PciPath pciPathBetween(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return PciPath::kSys;
  if (a == b) return PciPath::kLoc;
  const std::vector<std::string> pa = pathComponents(a), pb = pathComponents(b);
  const int ra = rootIndex(pa), rb = rootIndex(pb);
  if (ra < 0 || rb < 0) return PciPath::kSys;
  size_t common = 0;
  while (common < pa.size() && common < pb.size() && pa[common] == pb[common]) ++common;
  if (static_cast<int>(common) <= ra) {  // two root complexes
    const int na = numaNode(a), nb = numaNode(b);
    return na >= 0 && na == nb ? PciPath::kPhb : PciPath::kSys;
  }
  if (static_cast<int>(common) == ra + 1) return PciPath::kPhb;  // the root complex only
  const size_t up = pa.size() - common, down = pb.size() - common;
  return up <= 2 && down <= 2 ? PciPath::kPix : PciPath::kPxb;
}

Result<PciPath> gdrLevel() {
  const std::string v = param(StringParam::NET_GDR_LEVEL);
  for (int i = 0; i <= static_cast<int>(PciPath::kSys); ++i) {
    const PciPath p = static_cast<PciPath>(i);
    if (v == pciPathName(p) || v == std::to_string(i)) return p;
  }
  return invalidArgument("NCCL_NET_GDR_LEVEL/COLL_NET_GDR_LEVEL \"" + v +
                         "\" is not one of LOC, PIX, PXB, PHB, SYS or 0-4");
}

GdrChoice chooseGdr(const NetProperties& props, const std::string& gpuPath, bool gpuDmaBuf, PciPath level) {
  GdrChoice c;
  if (props.hostMemOnly) {
    c.why = "net device " + props.name + " registers host memory only";
    return c;
  }
  const PciPath path = pciPathBetween(gpuPath, props.pciPath);
  const std::string where = std::string("PCI path ") + pciPathName(path) + " between the GPU and " + props.name;
  if (static_cast<int>(path) > static_cast<int>(level)) {
    c.why = where + " is farther than NCCL_NET_GDR_LEVEL " + pciPathName(level);
    return c;
  }
  c.dmaBuf = props.dmaBuf && gpuDmaBuf;
  if (!c.dmaBuf && !props.cudaPtr) {
    c.why = std::string(gpuDmaBuf ? "" : "the GPU exports no dma-buf and ") + props.name +
            (props.dmaBuf ? " takes no CUDA pointers (nvidia-peermem is not loaded)" : " takes no dma-buf");
    return c;
  }
  c.on = true;
  c.why = where + (c.dmaBuf ? ", GPU memory registered as dma-buf" : ", GPU memory registered as a CUDA pointer");
  return c;
}

namespace {

// The device emulation's GPU memory: a memfd mapping, whose fd stands in for its dma-buf.
Result<GpuSlots> emulatedGpuMemory(size_t bytes) {
  const int fd = memfd_create("coll-gdr-emulated", MFD_CLOEXEC);
  if (fd < 0) return systemError("memfd_create for emulated GPU memory", errno);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    ::close(fd);
    return systemError("ftruncate of emulated GPU memory to " + std::to_string(bytes) + " bytes", err);
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return systemError("mmap of emulated GPU memory", err);
  }
  GpuSlots s;
  s.data = static_cast<char*>(p);
  s.range.dmaBufFd = fd;
  s.keep = std::shared_ptr<void>(p, [bytes, fd](void* q) {
    munmap(q, bytes);
    ::close(fd);
  });
  return s;
}

Result<GpuSlots> gpuMemory(const std::string& gpuBusId, size_t bytes, bool dmaBuf) {
#if COLL_HAVE_CUDA
  const int dev = gpu::deviceByBusId(gpuBusId.c_str());
  if (dev < 0) return invalidUsage("GPU " + gpuBusId + " is not visible to this process");
  COLL_ASSIGN(gpu::NicBuffer buf, gpu::NicBuffer::allocate(dev, bytes, dmaBuf));
  GpuSlots s;
  s.data = buf.get();
  s.range.dmaBufFd = buf.dmaBufFd();
  s.keep = std::make_shared<gpu::NicBuffer>(std::move(buf));
  return s;
#else
  (void)gpuBusId, (void)bytes, (void)dmaBuf;
  return invalidUsage("this build has no CUDA");
#endif
}

bool gpuExportsDmaBuf(NetUser user, const std::string& gpuBusId) {
  if (user == NetUser::kEmulatedDevice) return true;
#if COLL_HAVE_CUDA
  const int dev = gpu::deviceByBusId(gpuBusId.c_str());
  return dev >= 0 && gpu::dmaBufSupported(dev);
#else
  (void)gpuBusId;
  return false;
#endif
}

}  // namespace

GpuSlots gpuSlotsFor(NetBackend* b, int dev, NetUser user, const std::string& gpuBusId, size_t bytes,
                     const std::string& side) {
  if (user == NetUser::kHost) return {};
  NetProperties props;
  Status st = b->properties(dev, &props);
  Result<PciPath> level = gdrLevel();
  GdrChoice choice;
  if (!st.ok()) choice.why = st.message();
  else if (!level.ok()) choice.why = level.status().message();
  else
    choice = chooseGdr(props, user == NetUser::kEmulatedDevice ? "" : pciSysPath(gpuBusId),
                       gpuExportsDmaBuf(user, gpuBusId), level.value());
  Result<GpuSlots> slots = GpuSlots{};
  if (choice.on) {
    slots = user == NetUser::kEmulatedDevice ? emulatedGpuMemory(bytes) : gpuMemory(gpuBusId, bytes, choice.dmaBuf);
    if (!slots.ok()) choice = GdrChoice{false, false, slots.status().message()};
    else if (!choice.dmaBuf) slots.value().range.dmaBufFd = -1;  // registered as a pointer
  }
  COLL_INFO(NET, "%s over %s device %d: GPUDirect RDMA %s: %s", side.c_str(), b->name(), dev,
            choice.on ? "on" : "off (slots in pinned host memory)", choice.why.c_str());
  return choice.on ? slots.take() : GpuSlots{};
}

}  // namespace coll

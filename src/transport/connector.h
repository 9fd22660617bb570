// Connectors: the one shape every transport presents to executors.
//
// Between a sender and a receiver on a channel sits a FIFO of kFifoSlots slots. The producer
// fills slot (tail % kFifoSlots), records its byte count and advances `tail`; the consumer
// reads slot (head % kFifoSlots) and advances `head`. Counters are 32-bit and wrap; only
// differences are compared. Each counter has its own cache line and a waiter count so a
// producer issues a futex wake only when somebody sleeps.
//
// shm: the FIFO lives in memory both sides map and the sender writes the receiver's slots
// directly. net: each side has a local FIFO and progress() moves slots through a net
// backend. Executors never see the difference: they ask ready(), use the slot, post or
// release, and call progress() while they wait.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/wait.h"

namespace coll {

constexpr int kFifoSlots = 8;

struct alignas(64) FifoCtrl {
  alignas(64) std::atomic<uint32_t> tail{0};
  std::atomic<uint32_t> tailWaiters{0};
  alignas(64) std::atomic<uint32_t> head{0};
  std::atomic<uint32_t> headWaiters{0};
  alignas(64) uint32_t sizes[kFifoSlots] = {};
};

// Bytes of a FIFO with data slots of slotBytes each, control block first.
inline size_t fifoBytes(size_t slotBytes) { return sizeof(FifoCtrl) + kFifoSlots * slotBytes; }

// Producer/consumer halves over a FifoCtrl + slots in memory this process can touch.
// Used directly by shm and as the local FIFO of net.
struct FifoView {
  FifoCtrl* ctrl = nullptr;
  char* data = nullptr;
  size_t slotBytes = 0;

  char* slotAt(uint32_t i) const { return data + (i % kFifoSlots) * slotBytes; }
};

// What both halves of a connection have: the FIFO, the peer, and how they are driven.
class Connector {
 public:
  virtual ~Connector() = default;
  virtual Status progress() { return okStatus(); }
  virtual WaitTarget waitTarget() = 0;  // what to sleep on while the half cannot move
  // The FIFO this side fills (send) or consumes (receive), for device executors
  // (device/device_exec.h): every transport keeps its counters in the FIFO's control
  // block, so a kernel can produce and consume where the host executor does.
  // needsProgress: someone must call progress() meanwhile.
  virtual const FifoView* fifo() const = 0;
  virtual bool needsProgress() const { return false; }
  // The FIFO is device memory (p2p): only device executors can use this connector.
  virtual bool fifoInDeviceMemory() const { return false; }
  // The slots are memory a device executor uses as it is (GPU memory a NIC reaches:
  // transport/net/gdr.h), the counters host memory it maps; device executors only.
  virtual bool slotsInDeviceMemory() const { return fifoInDeviceMemory(); }
  // Both ends' kernels run on one GPU in one process (p2p between thread ranks of one GPU):
  // they may order their FIFO accesses at GPU scope, cheaper than system scope
  // (device/device_lane.h DeviceConn).
  virtual bool sameGpu() const { return false; }
  size_t slotBytes() const { return slotBytes_; }
  int peer() const { return peer_; }
  const char* kind() const { return kind_; }

 protected:
  size_t slotBytes_ = 0;
  int peer_ = -1;
  const char* kind_ = "";
};

class SendConnector : public Connector {
 public:
  virtual bool ready() = 0;                // a slot is free
  virtual char* slot() = 0;                // the free slot
  virtual void post(size_t bytes) = 0;     // hands the slot to the receiver
  virtual bool flushed() { return true; }  // everything posted has left this rank
  // Connectors that can send straight from the caller's memory (net: the backend copies
  // it into the kernel when it sends): postInPlace hands over `bytes` at `data` in place
  // of the slot, which stays reserved as if filled. `data` must stay unchanged until
  // flushed(). Others copy into slot() and post().
  virtual bool canPostInPlace() const { return false; }
  virtual void postInPlace(const char* /*data*/, size_t /*bytes*/) {}
};

class RecvConnector : public Connector {
 public:
  virtual bool ready() = 0;        // a filled slot is available
  virtual const char* slot() = 0;  // the filled slot
  virtual size_t size() = 0;       // its byte count
  virtual void release() = 0;      // gives the slot back
};

}  // namespace coll

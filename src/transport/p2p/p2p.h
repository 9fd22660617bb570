// Peer-to-peer transport for device buffers: the FIFO lives in the receiver's GPU memory
// and the sender's kernel writes the slots directly (same GPU, or another GPU it can
// reach: NVLink or PCIe peer access). Between threads of one process the sender uses the
// receiver's pointer; between processes it opens a CUDA IPC handle of the allocation.
//
// Only device executors touch these FIFOs (the host cannot dereference device memory):
// the connectors belong to a communicator's device set (DeviceComm::conns), never to
// the host executor's; their host-side methods fail loudly instead of hanging.
//
// The first row of the transport table (kP2pTransport): chosen by the receiver for device
// connection jobs when both ranks are on one host and bound to GPUs that are the same or
// peer-accessible, unless COLL_P2P_DISABLE=1; COLL_P2P_LEVEL=LOC keeps it to ranks on the
// same GPU.
#pragma once

#include <memory>

#include "bootstrap/wire.h"
#include "cuda/gpu.h"
#include "transport/connector.h"
#include "transport/table.h"

namespace coll {

struct P2pHandle {
  int32_t pid;  // the receiver's process
  int32_t pad;
  uint64_t localId;  // in-process registry key
  uint64_t slotBytes;
  gpu::IpcHandle ipc;  // of the FIFO allocation
};

extern const Transport kP2pTransport;

// Whether the receiver `self` and the sender `peer` can use p2p (decided by the receiver).
// emulated (COLL_DEVICE_EMULATE): host blocks stand in for GPU memory between threads of
// one process, so CI exercises the handshake and the in-process path.
bool p2pPossible(const PeerInfo& self, const PeerInfo& peer, bool emulated);
// Whether self and peer are ranks of one process on one GPU (emulated: of one process),
// so that their connectors say sameGpu().
bool p2pSameGpu(const PeerInfo& self, const PeerInfo& peer, bool emulated);
// The row's halves; the handle is a P2pHandle; sameGpu: p2pSameGpu of the two ranks.
Result<std::unique_ptr<PendingRecv>> p2pSetupRecv(int peer, size_t slotBytes, int dev, bool emulated, bool sameGpu);
Result<std::unique_ptr<SendConnector>> p2pConnectSend(int peer, std::span<const std::byte> handle, int selfDev,
                                                      const PeerInfo& receiver, bool emulated, bool sameGpu);

}  // namespace coll

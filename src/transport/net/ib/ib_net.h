// The ib net backend: RDMA over libibverbs (InfiniBand or RoCE v2), loaded at run time
// (verbs.h), so the library loads and runs where rdma-core is absent. COLL_NET=IB selects
// it; docs/DESIGN.md ("The ib backend") has its protocol as one diagram.
//
// A connection is COLL_IB_QPS_PER_CONNECTION reliable-connected QPs and one CQ per side,
// set up over a TCP side channel (listen() puts the listener's address in the handle):
//   sender   connect(): TCP connect, QPs to INIT, sends its QP numbers, LID/GID, MTU and
//            the address and rkey of its clear-to-send (CTS) FIFO; returns at once.
//   receiver accept():  takes the TCP connection and the sender's info when they are
//            there (else a pending comm), posts receives, QPs to RTR/RTS, answers with
//            its own info, and is usable once the sender says it reached RTS.
//   sender   finishes in later isend/test calls when the answer arrives: RTR/RTS, "ready".
// Neither call waits for the other side, so one thread may connect every send before it
// accepts any receive. Until a comm is established isend/irecv return null requests.
//
// Data: irecv(buf, max) RDMA-WRITEs a credit {addr, rkey, max, seq} into the sender's CTS
// FIFO (receiver-posted credits); isend waits (in test) for the credit of its sequence
// number, then RDMA-WRITEs the message split across the QPs, each part WITH_IMM carrying
// the total size, so the receiver's request is complete when every QP delivered its
// immediate. Requests complete in posting order. Buffers must lie in ranges given to
// regMr(comm, ...) (one MR per range; registering a range again is free).
//
// GPU memory (GPUDirect RDMA, where properties() clear hostMemOnly): regMrGpu registers a
// CUDA range through its dma-buf (ibv_reg_dmabuf_mr, where the library, provider and kernel
// take it) or, with the peer-memory module loaded, as a CUDA pointer; it then works in
// isend/irecv as host memory does. After a receive into it, iflush posts a 1-byte RDMA
// READ of it over a QP the receiver connects to itself (made by the first iflush): the
// NIC's writes into GPU memory may still be on their way when their completion arrives,
// and a READ from the NIC over the same PCIe path cannot pass them, so its completion
// means the data is there for a kernel.
//
// Errors: an error completion, a QP in ERR, a closed side channel (the peer died) or a
// message larger than the receiver's buffer become the comm's error, naming the peer's
// address, the call and the verbs status text; NetSend/NetRecv add the peer rank.
//
// Threads: a comm is used by one thread at a time (NetBackend's rule); the device list
// and its contexts/PDs are shared, created once under the backend's lock.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/net/net.h"

struct ibv_qp;

namespace coll {

// One entry of NCCL_IB_HCA: a device name (prefix unless the list starts with '='),
// optionally a port (0: any).
struct IbHcaEntry {
  std::string name;
  int port = 0;
};
struct IbHcaSpec {
  bool exclude = false;  // '^': every device but these
  bool exact = false;    // '=': whole names, not prefixes
  std::vector<IbHcaEntry> entries;
};
// Parses NCCL_IB_HCA ("mlx5_0:1,mlx5_1", "^mlx5_2", "=mlx5_0:1"). A malformed entry
// (empty name, port not a number in 1..255) is dropped with a WARN naming the variable.
IbHcaSpec parseIbHca(const std::string& text);
// Whether (device, port) is selected by `spec` (an empty spec selects everything).
bool ibHcaMatches(const IbHcaSpec& spec, const std::string& device, int port);

// The backend, when the verbs library loads and lists a usable (active, selected) port;
// otherwise an error naming the library or the selection and why.
Result<std::unique_ptr<NetBackend>> makeIbBackend();

// For tests and diagnostics: QP i of an (established) ib comm, nullptr if none.
ibv_qp* ibCommQp(NetSendComm* comm, int i);
ibv_qp* ibCommQp(NetRecvComm* comm, int i);

}  // namespace coll

// Schedules are data: an algorithm turns one operation into, per channel, a list of
// primitive Steps over that channel's connectors; an executor (host: comm/executor.cc)
// advances them slice by slice without blocking.
//
// A Step is a combination of flags:
//   kRecv  input from the recv connector's slot
//   kSrc   input from the local source (combined with the received data by the op)
//   kDst   write the result to the local destination
//   kSend  write the result to the send connector's slot
//   kFinal apply the op's post-step (Avg: divide by nranks) to the result
// so NCCL's primitives are: send = Src|Send, recv = Recv|Dst, recvReduceSend =
// Recv|Src|Send, recvReduceCopy = Recv|Src|Dst, recvReduceCopySend = Recv|Src|Dst|Send,
// recvCopySend = Recv|Dst|Send, copy = Src|Dst, copySend = Src|Dst|Send.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "base/datatype.h"
#include "base/status.h"
#include "kernels/host_reduce.h"
#include "kernels/step_flags.h"
#include "profiler/profiler.h"
#include "transport/connector.h"

namespace coll {

struct Step {
  uint8_t flags;
  uint8_t elemSize;
  uint8_t encoding;   // Encoding (kernels/compress.h): the form of the slots' data
  uint16_t op;        // index of the operation in Program::ops (for error messages)
  uint8_t addrEntry;  // kDirect address steps: the entry of the lane's address table moved
  const ReduceKernels* kernels;
  const char* src;
  char* dst;
  size_t bytes;
  SendConnector* send;
  RecvConnector* recv;
};

enum class CollKind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kPeerSend, kPeerRecv };

// What each operation is, said once: every layer reads this table rather than listing kinds.
// A buffer's extent: none, count elements (one block), or count x nranks (every rank's block).
enum class Extent : uint8_t { kNone, kBlock, kAllBlocks };
// A rooted call (OpDesc::root): which buffer only the root uses (broadcast: only the root
// reads its input; reduce: only the root's output is written).
enum class RootOnly : uint8_t { kNotRooted, kInput, kOutput };
struct CollTraits {
  const char* apiName;  // the C API's name, for errors and logs ("collAllReduce")
  bool combines;        // ranks' values are combined: the call takes a reduction op
  RootOnly rooted;      // the call has a root, and the buffer only it uses
  bool peer;            // a send or a receive: OpDesc::root is the peer
  Extent input, output;
};
inline constexpr CollTraits kCollTraits[] = {
    {"collAllReduce", true, RootOnly::kNotRooted, false, Extent::kBlock, Extent::kBlock},
    {"collBroadcast", false, RootOnly::kInput, false, Extent::kBlock, Extent::kBlock},
    {"collReduce", true, RootOnly::kOutput, false, Extent::kBlock, Extent::kBlock},
    {"collAllGather", false, RootOnly::kNotRooted, false, Extent::kBlock, Extent::kAllBlocks},
    {"collReduceScatter", true, RootOnly::kNotRooted, false, Extent::kAllBlocks, Extent::kBlock},
    {"collSend", false, RootOnly::kNotRooted, true, Extent::kBlock, Extent::kNone},
    {"collRecv", false, RootOnly::kNotRooted, true, Extent::kNone, Extent::kBlock},
};
constexpr const CollTraits& collTraits(CollKind k) { return kCollTraits[static_cast<int>(k)]; }
constexpr const char* collKindName(CollKind k) { return collTraits(k).apiName; }
constexpr bool combines(CollKind k) { return collTraits(k).combines; }
constexpr bool rooted(CollKind k) { return collTraits(k).rooted != RootOnly::kNotRooted; }
constexpr bool isPeerOp(CollKind k) { return collTraits(k).peer; }
// Whether count is one rank's block of a buffer of nranks blocks (allgather, reduce-scatter).
constexpr bool spansRanks(CollKind k) {
  return collTraits(k).input == Extent::kAllBlocks || collTraits(k).output == Extent::kAllBlocks;
}

// One operation as the user called it.
// Every member has its initializer, and the constructor is user-provided, so OpDesc{}
// sets each member by itself: value-initializing an aggregate clears the whole first,
// which compilers do with a `rep stos` that costs more than a small operation's checks.
struct OpDesc {
  OpDesc() {}  // NOLINT(modernize-use-equals-default): `= default` would clear first
  CollKind kind{};
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  collDataType_t dtype{};
  collRedOp_t op{};
  int root = 0;  // broadcast/reduce root; send/recv peer
  uint64_t seq = 0;
  bool device = false;        // runs on the device path (device/device_exec.h)
  void* stream = nullptr;     // its cudaStream_t
  const char* via = nullptr;  // the call this send/recv is part of ("collAlltoAll"), for errors
  bool registered = false;    // a send from memory registered with collCommRegister
  uint8_t encoding = 0;       // Encoding: fp32 data carried compressed (kernels/compress.h)
  // A per-call config (coll*Config): an algorithm filter on top of the communicator's
  // (an AllowMask, algorithms/tuner.h), whether one nothing satisfies fails the call (else
  // the tuner's choice stands), channel bounds (0: the communicator's), a profiler's tag.
  uint64_t algos = ~uint64_t{0};
  bool forceAlgos = true;
  int minChannels = 0, maxChannels = 0;
  uint64_t profilerTag = 0;
  size_t chunkBytes = 0;         // a tuner plugin's chunk size (0: the slot; tuner_plugin.h)
  ProfOpEvents prof{};           // its profiler events while it is queued and runs (comm/profile.h)
  std::shared_ptr<void> keep{};  // memory the op reads that the library made (copied inputs)
  // Work due when the op runs rather than when it is called (a PreMulSum op's scaling,
  // which reads its scalar then): the launch calls it first.
  std::shared_ptr<std::function<Status()>> prepare{};
  std::string describe() const;  // "collAllReduce #3 (count 1024, float32, sum)"
  // Bytes of count elements: the whole buffer, or one rank's block where the op spans ranks.
  size_t bytes() const { return count * dataTypeSize(dtype); }
  // Bytes the operation moves as a whole: bytes() times nranks where it spans ranks. The
  // same on every rank, and for a send and its receive.
  size_t spanBytes(int nranks) const { return spansRanks(kind) ? bytes() * static_cast<size_t>(nranks) : bytes(); }
  // Bytes rank reads from sendbuff / writes to recvbuff (0 where it touches none).
  size_t inputBytes(int rank, int nranks) const {
    return touchesSend(rank) ? extentBytes(collTraits(kind).input, nranks) : 0;
  }
  size_t outputBytes(int rank, int nranks) const {
    return touchesRecv(rank) ? extentBytes(collTraits(kind).output, nranks) : 0;
  }
  size_t extentBytes(Extent e, int nranks) const {
    return e == Extent::kNone ? 0 : e == Extent::kBlock ? bytes() : bytes() * static_cast<size_t>(nranks);
  }
  // Whether rank reads sendbuff / writes recvbuff: a rooted call's buffer that only the
  // root uses (CollTraits::rooted) is touched there only.
  bool touchesSend(int rank) const { return collTraits(kind).rooted != RootOnly::kInput || rank == root; }
  bool touchesRecv(int rank) const { return collTraits(kind).rooted != RootOnly::kOutput || rank == root; }
};

// What a stalled lane waits for from its peer; awaitingName gives the words of messages
// ("waiting for data from rank 3").
enum class Awaiting : uint8_t {
  kData,      // a filled slot from the peer
  kRoom,      // a free slot at the peer
  kDelivery,  // what was posted to the peer to leave this rank
};
const char* awaitingName(Awaiting a);

// A sequence of steps run in order by one executor lane (one channel of one
// communicator, or one p2p peer direction).
struct Program {
  std::vector<Step> steps;
  const std::vector<OpDesc>* ops = nullptr;
  struct collComm* comm = nullptr;
  size_t sliceBytes = 0;      // agreed by all ranks
  size_t streamMinBytes = 0;  // COLL_STREAM_MIN_BYTES: results of ops this large stream (kStream)
  int nranks = 1;
  int rank = 0;
  std::string lane;  // "channel 1", "send to rank 3": for stall reports
  int channel = 0;   // the ring channel it runs (send/recv lanes: 0), for profiler events
  // Executor state.
  size_t cur = 0;
  size_t off = 0;
  std::vector<SendConnector*> flushTargets;  // senders that must drain before done
  bool inPlacePending = false;               // slices sent from the caller's memory may not have left
  WaitTarget blockedOn;                      // set when the last advance stalled
  Awaiting blockedFor = Awaiting::kData;     // with blockedPeer >= 0
  int blockedPeer = -1;
  ProfLaneEvents prof;  // the profiler events it has open (comm/profile.h)

  // The caller's bytes moved per slice by step s (a compressed step fits more in a slot).
  size_t sliceFor(const Step& s) const;

  // Appends a step (skipping empty ones) and remembers its send connector for flushing.
  void add(uint8_t flags, const OpDesc& od, uint16_t opIndex, const char* src, char* dst, size_t bytes,
           SendConnector* send, RecvConnector* recv);
  // Appends token steps (kToken): a zero-length slot sent on `send`, then one received.
  void addToken(uint16_t opIndex, SendConnector* send, RecvConnector* recv);
};

}  // namespace coll

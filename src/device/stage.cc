#include "device/stage.h"

#include <algorithm>
#include <cstring>

#include "collectives/config.h"
#include "base/datatype.h"
#include "base/log.h"
#include "device/device_comm.h"
#include "device/proxy.h"  // wallNs
#if COLL_HAVE_CUDA
#include "cuda/gpu.h"
#endif

namespace coll {

namespace {

constexpr size_t kAlign = 64;

size_t aligned(size_t x) { return (x + kAlign - 1) & ~(kAlign - 1); }

// One operation's staged ranges: its input and output, or where they overlap (in place)
// the one range holding both, copied in whole.
struct OpLayout {
  const char* in;  // caller's
  char* out;
  size_t inBytes, outBytes;
  bool joined;     // in and out overlap: one range from lo
  const char* lo;  // joined: the range's start and size
  size_t joinedBytes;
  size_t inOff, outOff;  // where in and out sit in the staged memory
};

OpLayout layOut(const OpDesc& od, int rank, int nranks, size_t& used) {
  OpLayout l{};
  l.in = static_cast<const char*>(od.sendbuff);
  l.out = static_cast<char*>(od.recvbuff);
  l.inBytes = od.inputBytes(rank, nranks);
  l.outBytes = od.outputBytes(rank, nranks);
  l.joined = l.inBytes && l.outBytes && l.in < l.out + l.outBytes && l.out < l.in + l.inBytes;
  if (l.joined) {
    l.lo = std::min<const char*>(l.in, l.out);
    l.joinedBytes = static_cast<size_t>(std::max<const char*>(l.in + l.inBytes, l.out + l.outBytes) - l.lo);
    l.inOff = used + static_cast<size_t>(l.in - l.lo);
    l.outOff = used + static_cast<size_t>(l.out - l.lo);
    used += aligned(l.joinedBytes);
    return l;
  }
  l.inOff = used;
  used += aligned(l.inBytes);
  l.outOff = used;
  used += aligned(l.outBytes);
  if (!l.inBytes) l.inOff = l.outOff;  // unused input (a broadcast's non-root): as in place
  if (!l.outBytes) l.outOff = l.inOff;
  return l;
}

// Host memory for a staged launch: pinned (copies from it run asynchronously and at full
// speed), kept by the communicator for the next one; plain memory under emulation.
Result<char*> stageMemory(DeviceComm& d, size_t bytes, Staging* s) {
  if (d.stageMemoryBytes < bytes) {
    const size_t want = std::max<size_t>(bytes, 64 << 10);
    d.stageMemory.reset();
    d.stageMemoryBytes = 0;
    if (d.emulate) {
      d.stageMemory = std::shared_ptr<void>(new char[want], [](void* p) { delete[] static_cast<char*>(p); });
    } else {
#if COLL_HAVE_CUDA
      COLL_ASSIGN(gpu::MappedHostBuffer b, gpu::MappedHostBuffer::allocate(want));
      d.stageMemory = std::shared_ptr<void>(b.host(), [b](void*) {});
#else
      return invalidUsage("device buffers need a build with CUDA support");
#endif
    }
    d.stageMemoryBytes = want;
  }
  s->memory = d.stageMemory;
  return static_cast<char*>(d.stageMemory.get());
}

// dst <- src, bytes, in the order of `stream` (memcpy under emulation).
Status copy(void* dst, const void* src, size_t bytes, void* stream, bool emulated) {
  if (bytes == 0) return okStatus();
  if (emulated) {
    std::memcpy(dst, src, bytes);
    return okStatus();
  }
#if COLL_HAVE_CUDA
  return gpu::copyOnStream(dst, src, bytes, stream);
#else
  (void)stream;
  return invalidUsage("device buffers need a build with CUDA support");
#endif
}

// Waits for everything queued on the operations' streams (nothing under emulation).
Status syncStreams(const std::vector<void*>& streams, bool emulated) {
#if COLL_HAVE_CUDA
  if (!emulated)
    for (void* s : streams) COLL_CHECK(gpu::syncStream(s));
#else
  (void)streams;
  (void)emulated;
#endif
  return okStatus();
}

}  // namespace

bool stagedOp(const DeviceComm& d, const OpDesc& od) {
  return d.stageBytes != 0 && od.spanBytes(d.core->nranks) <= d.stageBytes;
}

Status stageIn(DeviceComm& d, std::vector<OpDesc>& ops, Staging* s) {
  s->startNs = wallNs();
  s->emulated = d.emulate;
  std::vector<void*> streams;
  for (const OpDesc& od : ops)
    if (std::find(streams.begin(), streams.end(), od.stream) == streams.end()) streams.push_back(od.stream);
#if COLL_HAVE_CUDA
  for (void* st : streams)
    if (!s->emulated && gpu::isCapturing(st))
      return invalidUsage("rank " + std::to_string(d.core->rank) +
                          ": a collective on device buffers cannot be captured into a CUDA graph while ranks of "
                          "other processes share the GPU without MPS (small ones are copied through host memory, "
                          "larger ones run again from the proxy); start the MPS daemon, or set "
                          "COLL_DEVICE_STAGE_BYTES=0 and COLL_DEVICE_YIELD_US=0");
#endif
  // Inputs may be written by work queued before this call.
  COLL_CHECK(syncStreams(streams, s->emulated));
  std::vector<OpLayout> layouts;
  size_t used = 0;
  for (const OpDesc& od : ops) layouts.push_back(layOut(od, d.core->rank, d.core->nranks, used));
  // A client of a copy agent stages in its area of the agent's segment, and the agent
  // copies (device/copy_agent.h); anything else, and whatever the agent refuses, this rank.
  CopyAgent* agent = d.copyAgent && d.copyAgent->isClient() && used <= d.copyAgent->areaBytes() ? d.copyAgent.get()
                                                                                                : nullptr;
  char* host = nullptr;
  if (agent) {
    host = agent->area();
  } else {
    COLL_ASSIGN(host, stageMemory(d, used, s));
  }
  std::vector<StageCopy> ins;
  std::vector<void*> inStreams;
  for (size_t i = 0; i < ops.size(); ++i) {
    OpDesc& od = ops[i];
    const OpLayout& l = layouts[i];
    const char* from = l.joined ? l.lo : l.in;
    const size_t bytes = l.joined ? l.joinedBytes : l.inBytes;
    if (bytes) {
      ins.push_back({const_cast<char*>(from), host + l.inOff - static_cast<size_t>(l.in - from), bytes, false});
      inStreams.push_back(od.stream);
    }
    if (l.outBytes) {
      s->outs.push_back({l.out, host + l.outOff, l.outBytes, true});
      s->outStreams.push_back(od.stream);
    }
    od.sendbuff = host + l.inOff;
    od.recvbuff = host + l.outOff;
    od.device = false;
    od.registered = false;
  }
  s->agent = agent;
  bool copied = false;
  if (agent) {
    COLL_ASSIGN(copied, agent->copy(ins));
  }
  if (!copied) {
    for (size_t i = 0; i < ins.size(); ++i)
      COLL_CHECK(copy(ins[i].host, ins[i].device, ins[i].bytes, inStreams[i], s->emulated));
    COLL_CHECK(syncStreams(streams, s->emulated));
  }
  s->agentCopiedIn = agent && copied;
  s->stagedNs = wallNs();
  return okStatus();
}

Status stageOut(const DeviceComm& d, const Staging& s) {
  const uint64_t ranNs = wallNs();
  bool copied = false;
  if (s.agent) {
    COLL_ASSIGN(copied, s.agent->copy(s.outs));
  }
  std::vector<void*> streams;
  for (size_t i = 0; i < s.outs.size() && !copied; ++i) {
    const StageCopy& o = s.outs[i];
    COLL_CHECK(copy(o.device, o.host, o.bytes, s.outStreams[i], s.emulated));
    if (std::find(streams.begin(), streams.end(), s.outStreams[i]) == streams.end()) streams.push_back(s.outStreams[i]);
  }
  // The staged memory is the next launch's: the copies must have read it.
  COLL_CHECK(syncStreams(streams, s.emulated));
  if (d.timing) {
    auto us = [](uint64_t from, uint64_t to) { return (static_cast<double>(to) - static_cast<double>(from)) / 1e3; };
    COLL_INFO(COLL, "staged timing: rank %d: inputs to host %.1f us, host run %.1f us, outputs back %.1f us%s",
              d.core->rank, us(s.startNs, s.stagedNs), us(s.stagedNs, ranNs), us(ranNs, wallNs()),
              s.agentCopiedIn && copied ? (" (copies by rank " + std::to_string(s.agent->agentRank()) + ")").c_str()
                                        : "");
  }
  return okStatus();
}

}  // namespace coll

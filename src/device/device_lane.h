// The device executor's program format and interpreter, shared by the CUDA kernel
// (device/param_kernel.cu: one thread block per lane) and the host emulation
// (device/device_exec.cc: one thread per lane, COLL_DEVICE_EMULATE), so the code that
// runs on the GPU is the code CI tests on host threads.
//
// A DeviceLane is a Program (algorithms/plan.h) lowered to plain data: its steps with the
// same flags (kRecv, kSrc, kDst, kSend, kFinal), and the FIFOs of its connectors as
// addresses the executor can reach (connector.h: every transport keeps head, tail and
// slot sizes in the FIFO's control block). The protocol is the host executor's: a
// producer waits until tail - head < kFifoSlots, fills slot tail % kFifoSlots, writes its size and
// then tail + 1 (release); a consumer waits until tail != head, checks the size, reads the
// slot and writes head + 1. Nothing else is shared, so a lane may face another kernel, a
// host executor, or a proxy thread moving a net connector's FIFO through sockets.
//
// The interpreter is written for a group of threads with one leader: the leader waits
// and moves counters, every thread moves data (B::slice splits it), and B::sync() orders
// the two. The host backend is one thread; the CUDA backend is a thread block.
#pragma once

#include <cstdint>

#include "kernels/compress.h"
#include "kernels/float_conv.h"  // COLL_HD
#include "kernels/step_flags.h"

namespace coll {

constexpr int kDeviceFifoSlots = 8;   // slots per FIFO: equal to kFifoSlots (checked in device_exec.cc)
constexpr int kDeviceMaxConns = 16;   // connectors one lane may use (tree lanes use the most)
constexpr int kDeviceMaxDirect = 16;  // ranks one direct operation may span: a lane's table entries
// A direct reduction waits for no slot, so its slices are this many FIFO slices long: a
// slice's two barriers and its fence drain the block's loads in flight, and the abort word
// is read once per slice (a read across PCIe).
constexpr uint64_t kDeviceDirectSlices = 8;

// One rank's buffers in a direct operation (kDirect): what its address steps carry, in a
// slot of their own, around the ring. The magic and the size tell a peer that called
// something else (a ring step's data in that slot, another count) from a match.
struct DeviceAddr {
  const char* in;
  char* out;
  uint64_t bytes;
  uint64_t magic;
};
constexpr uint64_t kDeviceAddrMagic = 0x31726944436c6f43ull;  // "CollDir1"

// Kept out of line in the kernel: code that runs once per step, not per slice, inlined
// into deviceRunLane, made ptxas spill in its waiting loop.
#if defined(__CUDACC__)
#define COLL_DEV_OUTLINE __noinline__
#else
#define COLL_DEV_OUTLINE
#endif

// One FIFO end. For a sender `tail` is this side's counter and `head` the consumer's; for
// a receiver the other way round.
struct DeviceConn {
  uint32_t* tail;
  uint32_t* head;
  uint32_t* sizes;  // kDeviceFifoSlots byte counts
  char* data;       // kDeviceFifoSlots slots of slotBytes
  uint64_t slotBytes;
  uint16_t isSend;
  // 1: the other end's kernel runs on this GPU, in this process (p2p between thread
  // ranks of one GPU: transport/connector.h sameGpu), so the counters are waited for and
  // published at GPU scope, cheaper than system scope (an H100: a round trip 2.2 us
  // against 3.1, a step's fence 0.7 against 1.3).
  uint16_t sameGpu;
  int32_t peer;
};

struct DeviceStep {
  const char* src;
  char* dst;
  uint64_t bytes;
  int8_t send;  // index into DeviceLane::conns, -1: none
  int8_t recv;
  uint8_t flags;  // StepFlags
  uint8_t dtype;  // collDataType_t
  uint8_t redop;  // collRedOp_t
  uint8_t elemSize;
  uint8_t encoding;   // Encoding (kernels/compress.h)
  uint8_t addrEntry;  // kDirect address steps: the table entry moved (plan.h Step::addrEntry)
  uint16_t op;        // index of the operation in its launch (for error messages)
};

enum DeviceCode : uint32_t {
  kDeviceRunning = 0,
  kDeviceDone = 1,
  kDeviceAborted = 2,       // the abort word was raised while the lane waited
  kDeviceSizeMismatch = 3,  // a slot's size differs from the slice expected: ranks disagree
  kDeviceYielded = 4,       // waited longer than the lane's yieldNs and gave its block up; a
                            // relaunch of the same lanes resumes it at (step, slice)
};

// What a lane reports when it ends (written by its leader).
struct DeviceLaneResult {
  uint32_t code;
  uint32_t step;  // the step it is in (updated as it runs) or ended in
  uint64_t got;   // kDeviceSizeMismatch: the size found, and the size expected
  uint64_t want;
  int32_t peer;      // the connector's peer it was waiting on or that disagreed
  uint32_t slice;    // kDeviceYielded: the slice of `step` it waited to move
  uint64_t startNs;  // the backend's clock (B::now) when the lane started and ended, for
  uint64_t endNs;    // COLL_DEVICE_TIMING's log (device/proxy.cc)
};

struct DeviceLane {
  const DeviceStep* steps;
  uint32_t nsteps;
  uint32_t nconns;
  uint64_t sliceBytes;
  int32_t nranks;
  // Nonzero: a leader that has waited this long for a peer ends the lane with kDeviceYielded
  // instead (ranks of processes time-sliced on one GPU: the peer's kernel runs only once
  // this one ends; device_exec.h deviceYieldNs).
  uint32_t yieldNs;
  const uint32_t* abortWord;  // nonzero: give up waiting
  DeviceLaneResult* result;
  DeviceConn conns[kDeviceMaxConns];
};

static_assert(sizeof(DeviceLane) % 16 == 0, "kernels copy lanes word by word; plan images keep them 16-byte aligned");

// ---- A launch's plan in the kernel's parameters ------------------------------------------
// A plan copied to device memory before its kernel (cudaMemcpyAsync from pinned memory)
// costs the launching thread a call and the kernel a copy to wait for. Kernels of Volta
// and later take up to 32764 bytes of parameters (CUDA 12.1 and later), so the plans of
// small operations travel in the launch itself as an image: the lanes, then the steps,
// each lane's `steps` the index of its first step. 8 KiB (a launch passes all of it)
// holds an 8-byte allreduce on 32 channels (5 lanes and 67 steps, ~6.7 KB) or a lane with
// 180 steps. The kernel reads its lane from the image into shared memory and its steps
// where they are (param_kernel.cu); the emulation runs lanes from an image the same way
// (device_exec.cc), so packing and addressing are the code CI runs.
constexpr uint32_t kDeviceParamBytes = 8192;
// A plan too large for the image stays in device memory and the kernel gets only its
// address, `lanes` (the one kernel has one parameter size: param_kernel.h says why).
struct DeviceParamPlan {
  uint32_t nlanes;
  uint32_t stepsAt;         // offset of the steps in `bytes`
  const DeviceLane* lanes;  // nonnull: the lanes are here, in device memory, and `bytes` unused
  alignas(16) char bytes[kDeviceParamBytes];
};

// Bytes of an image of `lanes` lanes and `steps` steps.
constexpr uint64_t deviceParamBytes(uint64_t lanes, uint64_t steps) {
  return lanes * sizeof(DeviceLane) + steps * sizeof(DeviceStep);
}

// Host: p holds `lanes` (their `steps` indices into `steps`, results set) and `steps`.
// False where they do not fit.
inline bool devicePackPlan(DeviceParamPlan& p, const DeviceLane* lanes, uint32_t nlanes, const DeviceStep* steps,
                           uint64_t nsteps) {
  if (deviceParamBytes(nlanes, nsteps) > kDeviceParamBytes) return false;
  p.nlanes = nlanes;
  p.lanes = nullptr;
  p.stepsAt = static_cast<uint32_t>(nlanes * sizeof(DeviceLane));
  __builtin_memcpy(p.bytes, lanes, nlanes * sizeof(DeviceLane));
  if (nsteps) __builtin_memcpy(p.bytes + p.stepsAt, steps, nsteps * sizeof(DeviceStep));
  return true;
}

// Lane i's words in the image, and its steps (a lane copied out keeps an index there).
COLL_HD inline const uint32_t* deviceParamLaneWords(const DeviceParamPlan& p, uint32_t i) {
  return reinterpret_cast<const uint32_t*>(p.bytes + i * sizeof(DeviceLane));
}
COLL_HD inline const DeviceStep* deviceParamSteps(const DeviceParamPlan& p, const DeviceLane& copied) {
  return reinterpret_cast<const DeviceStep*>(p.bytes + p.stepsAt) + reinterpret_cast<uintptr_t>(copied.steps);
}

// What the leader hands to the other threads of its group for one slice.
struct DeviceSliceCtl {
  const char* in;
  char* out;
  uint32_t code;
  uint32_t step;  // at the lane's start: where it resumes (a relaunch after kDeviceYielded)
  uint64_t slice;
};

// Whether a launch whose kernel has ended must run again: a lane yielded and none failed.
inline bool deviceResumes(const DeviceLaneResult* results, uint64_t nlanes) {
  bool yielded = false;
  for (uint64_t i = 0; i < nlanes; ++i) {
    const uint32_t code = __atomic_load_n(&results[i].code, __ATOMIC_ACQUIRE);
    if (code != kDeviceDone && code != kDeviceYielded) return false;
    yielded |= code == kDeviceYielded;
  }
  return yielded;
}

// One turn of a leader's wait: a pause, and every 16th turn a look at the abort word
// (host memory: each read crosses PCIe, slower than the FIFO counter polled beside it)
// and, for a lane that yields, at the clock (`since`: the 16th turn's time).
template <class B>
COLL_HD inline void deviceLaneWait(const DeviceLane& L, B& b, uint32_t spins, uint64_t& since, uint32_t& code) {
  if ((spins & 15) == 0) {
    if (b.load(L.abortWord) != 0) {
      code = kDeviceAborted;
      return;
    }
    if (L.yieldNs != 0) {
      const uint64_t t = b.now();
      if (spins == 16) since = t;
      else if (t - since > L.yieldNs) {
        code = kDeviceYielded;
        return;
      }
    }
  }
  b.pause();
}

// The leader's start: the lane's own FIFO counters, and where it resumes (a relaunch
// after kDeviceYielded; a lane done in an earlier run of its launch returns at once).
template <class B>
COLL_HD inline void deviceStart(const DeviceLane& L, B& b, uint32_t* pos) {
  DeviceSliceCtl& c = b.ctl();
  c.code = b.load(&L.result->code);
  c.step = 0;
  c.slice = 0;
  if (c.code == kDeviceRunning) L.result->startNs = b.now();
  if (c.code == kDeviceYielded) {
    c.step = L.result->step;
    c.slice = L.result->slice;
    c.code = kDeviceRunning;
    b.store(&L.result->code, kDeviceRunning);
  }
  for (uint32_t i = 0; i < L.nconns; ++i) pos[i] = b.load(L.conns[i].isSend ? L.conns[i].tail : L.conns[i].head);
}

// An address step (kDirect with a connector), by the leader once its slot is there:
// a send carries the table's entry s.addrEntry (entry 0, this rank's own, filled first from the
// step); a receive checks the entry that came and keeps it as s.addrEntry. A peer that called
// another count, or is running another algorithm's step, is a size mismatch.
template <class B>
COLL_HD COLL_DEV_OUTLINE void deviceAddrStep(const DeviceLane& L, B& b, const DeviceStep& s, DeviceSliceCtl& c) {
  DeviceAddr* t = b.table();
  if (s.recv < 0) {
    if (s.addrEntry == 0) t[0] = DeviceAddr{s.src, s.dst, s.bytes, kDeviceAddrMagic};
    *reinterpret_cast<DeviceAddr*>(c.out) = t[s.addrEntry];
    return;
  }
  const DeviceAddr e = *reinterpret_cast<const DeviceAddr*>(c.in);
  if (e.magic != kDeviceAddrMagic || e.bytes != s.bytes) {
    c.code = kDeviceSizeMismatch;
    L.result->got = e.magic == kDeviceAddrMagic ? e.bytes : sizeof(DeviceAddr);
    L.result->want = s.bytes;
    return;
  }
  t[s.addrEntry] = e;
}

// A direct reduction (kDirect|kSrc|kDst), by every thread: slice [off, off + len) of
// this rank's block, at the same place in every rank's buffers (table entry j: the rank
// j ring positions after this one). Combined in the ring's order (ring.cc: the block of
// position p is summed from p + 1 round to p), so the bits equal the ring's: entry 1's
// input first, this rank's last. Sums and averages of float, fp16 and bf16 take one pass
// that writes each element's result to every rank's output (device_slice.h deviceSliceDirect);
// the other types and ops a chain of passes, the partial sum kept in entry 1's output
// (read already, when in place) and copied to the others' outputs at the end, two per pass.
template <class B>
COLL_HD COLL_DEV_OUTLINE void deviceDirect(const DeviceLane& L, B& b, const DeviceStep& s, uint64_t off, uint64_t len) {
  const DeviceAddr* t = b.table();
  const int n = L.nranks;
  const uint64_t at = static_cast<uint64_t>(s.src - t[0].in) + off;
  if (b.sliceDirect(s, t, at, len, n)) return;
  DeviceStep pass = s;
  pass.flags = s.flags & ~kFinal;
  char* acc = t[1].out + at;
  if (n > 2) b.slice(pass, t[1].in + at, t[2].in + at, acc, nullptr, len, n);
  for (int j = 3; j < n; ++j) {
    b.sync();
    b.slice(pass, acc, t[j].in + at, acc, nullptr, len, n);
  }
  if (n > 2) b.sync();
  pass.flags = s.flags;  // this rank's input last, with Avg's division
  b.slice(pass, n > 2 ? acc : t[1].in + at, t[0].in + at, t[0].out + at, acc, len, n);
  pass.flags = kDst;  // a copy
  for (int j = 2; j < n; j += 2) {
    b.sync();
    b.slice(pass, acc, nullptr, t[j].out + at, j + 1 < n ? t[j + 1].out + at : nullptr, len, n);
  }
}

// Whether a step's fence may be at GPU scope: it receives or sends, and only on connectors
// whose other end runs on this GPU (a step with neither fences at a step's end, for a
// direct reduction's writes: system scope, as the kernel's results are).
COLL_HD inline bool deviceGpuScope(const DeviceLane& L, const DeviceStep& s) {
  if (s.recv < 0 && s.send < 0) return false;
  return (s.recv < 0 || L.conns[s.recv].sameGpu) && (s.send < 0 || L.conns[s.send].sameGpu);
}

// The leader's part of slice k of step si: waits for the slot to receive and for room to
// send, checks the size received, moves an address step's entry; ctl says what came of it
// (a code other than kDeviceRunning is also stored in the lane's result).
template <class B>
COLL_HD COLL_DEV_OUTLINE void deviceLead(const DeviceLane& L, B& b, const DeviceStep& s, uint32_t si, uint64_t k,
                                         uint64_t encodedLen, uint32_t* pos) {
  DeviceSliceCtl& c = b.ctl();
  c.code = kDeviceRunning;
  c.in = nullptr;
  c.out = nullptr;
  int32_t waitPeer = -1;
  uint64_t since = 0;
  if (s.recv >= 0) {
    const DeviceConn& r = L.conns[s.recv];
    waitPeer = r.peer;
    for (uint32_t spins = 0; b.load(r.tail, r.sameGpu) == pos[s.recv] && c.code == kDeviceRunning;)
      deviceLaneWait(L, b, ++spins, since, c.code);
    if (c.code == kDeviceRunning) {
      const uint32_t got = b.load(&r.sizes[pos[s.recv] % kDeviceFifoSlots], r.sameGpu);
      if (got != encodedLen) {
        c.code = kDeviceSizeMismatch;
        L.result->got = got;
        L.result->want = (s.flags & kDirect) ? s.bytes : encodedLen;  // an address step: the op's size
      }
      c.in = r.data + (pos[s.recv] % kDeviceFifoSlots) * r.slotBytes;
    }
  }
  if (s.send >= 0 && c.code == kDeviceRunning) {
    const DeviceConn& w = L.conns[s.send];
    waitPeer = w.peer;
    for (uint32_t spins = 0; pos[s.send] - b.load(w.head, w.sameGpu) >= static_cast<uint32_t>(kDeviceFifoSlots) &&
                             c.code == kDeviceRunning;)
      deviceLaneWait(L, b, ++spins, since, c.code);
    c.out = w.data + (pos[s.send] % kDeviceFifoSlots) * w.slotBytes;
  }
  if (c.code == kDeviceRunning && (s.flags & kDirect)) {
    // An address step moves its entry; a reduction writes into peers' buffers and waits for
    // nothing, so it looks at the abort word instead, once per (kDeviceDirectSlices times
    // longer) slice.
    if (c.in || c.out) deviceAddrStep(L, b, s, c);
    else if (b.load(L.abortWord) != 0) c.code = kDeviceAborted;
  }
  if (c.code != kDeviceRunning) {  // step and code by atomic stores: the stall report reads them
    L.result->peer = waitPeer;
    b.note(&L.result->slice, static_cast<uint32_t>(k));
    b.store(&L.result->step, si);
    b.store(&L.result->code, c.code);
  }
}

// A run of tokens from step si (kToken: one zero-length slot each way, plan.h), by the
// leader alone: each waited for, checked and published in turn as deviceLead's, with no
// barrier, step read by every thread or fence between them (no data moves). A step costs
// the block ~4-8 us on an H100; the channels an 8-byte operation leaves empty put 16
// tokens in a lane. Stores ctl's code and, in ctl.step, the step after the last it did.
template <class B>
COLL_HD COLL_DEV_OUTLINE void deviceTokens(const DeviceLane& L, B& b, uint32_t si, uint32_t* pos) {
  DeviceSliceCtl& c = b.ctl();
  c.code = kDeviceRunning;
  for (; si < L.nsteps && c.code == kDeviceRunning; ++si) {
    const DeviceStep s = L.steps[si];
    if (!(s.flags & kToken)) break;
    b.note(&L.result->step, si);
    deviceLead(L, b, s, si, 0, 0, pos);
    if (c.code != kDeviceRunning) break;
    if (s.recv >= 0) b.store(L.conns[s.recv].head, ++pos[s.recv], L.conns[s.recv].sameGpu);
    if (s.send >= 0) {
      const DeviceConn& w = L.conns[s.send];
      b.note(&w.sizes[pos[s.send] % kDeviceFifoSlots], 0);  // the tail's release orders it
      b.store(w.tail, ++pos[s.send], w.sameGpu);
    }
  }
  c.step = si;
}

// Where a lane never yields, a run of tokens on distinct connectors (a merged lane's 8
// sends, then its 8 receives; plan.h) is waited for at once, a thread each: one round
// trip instead of 16 in a row. The batch from step si ends before a step that is not a
// token, moves both ways, or reuses a connector of the batch.
COLL_HD inline uint32_t deviceTokenBatchEnd(const DeviceLane& L, uint32_t si) {
  uint32_t used = 0;  // a bit per connector (kDeviceMaxConns of them)
  for (; si < L.nsteps; ++si) {
    const DeviceStep& s = L.steps[si];
    if (!(s.flags & kToken) || (s.send >= 0) == (s.recv >= 0)) break;
    const uint32_t bit = 1u << (s.send >= 0 ? s.send : s.recv);
    if (used & bit) break;
    used |= bit;
  }
  return si;
}

// What one thread's token came to (deviceTokenOne).
constexpr uint64_t kDeviceTokenDone = 0;
constexpr uint64_t kDeviceTokenStopped = 1;  // another token of the batch failed first
COLL_HD inline uint64_t deviceTokenFailed(uint32_t code, uint32_t got) { return uint64_t{code} << 32 | got; }

// One token of a batch, by one thread. This side's counter is read from its FIFO (only
// this lane moves it, and the leader's last store came before the batch's barrier). A
// thread that fails stores its code in ctl, which stops the others' waits.
template <class B>
COLL_HD COLL_DEV_OUTLINE uint64_t deviceTokenOne(const DeviceLane& L, B& b, const DeviceStep& s) {
  volatile uint32_t& stop = b.ctl().code;
  const bool recv = s.recv >= 0;
  const DeviceConn& f = L.conns[recv ? s.recv : s.send];
  const uint32_t p = b.load(recv ? f.head : f.tail);
  uint32_t code = kDeviceRunning;
  uint64_t since = 0;
  for (uint32_t spins = 0; recv ? b.load(f.tail, f.sameGpu) == p
                                : p - b.load(f.head, f.sameGpu) >= static_cast<uint32_t>(kDeviceFifoSlots);) {
    if (stop != kDeviceRunning) return kDeviceTokenStopped;
    deviceLaneWait(L, b, ++spins, since, code);
    if (code != kDeviceRunning) {
      stop = code;
      return deviceTokenFailed(code, 0);
    }
  }
  if (recv) {
    const uint32_t got = b.load(&f.sizes[p % kDeviceFifoSlots], f.sameGpu);
    if (got != 0) {
      stop = kDeviceSizeMismatch;
      return deviceTokenFailed(kDeviceSizeMismatch, got);
    }
    b.store(f.head, p + 1, f.sameGpu);
  } else {
    b.note(&f.sizes[p % kDeviceFifoSlots], 0);  // the tail's release orders it
    b.store(f.tail, p + 1, f.sameGpu);
  }
  return kDeviceTokenDone;
}

// A batch of tokens from step si, by every thread (B::tid, B::threads, B::scratch: a
// result per token); then the leader advances its counters and reports the first token
// that failed, as deviceLead would. Leaves ctl's code, and in ctl.step the step after it.
template <class B>
COLL_HD COLL_DEV_OUTLINE void deviceTokenBatch(const DeviceLane& L, B& b, uint32_t si, uint32_t* pos) {
  DeviceSliceCtl& c = b.ctl();
  if (b.leader()) {
    c.code = kDeviceRunning;
    c.step = deviceTokenBatchEnd(L, si);
    uint32_t r = si;  // the stall report's step: the batch's first receive, what waits
    while (r + 1 < c.step && L.steps[r].recv < 0) ++r;
    b.note(&L.result->step, r);
  }
  b.sync();
  const uint32_t n = c.step - si;
  uint64_t* res = b.scratch();
  for (uint32_t t = b.tid(); t < n; t += b.threads()) res[t] = deviceTokenOne(L, b, L.steps[si + t]);
  b.sync();
  if (!b.leader()) return;
  c.code = kDeviceRunning;
  for (uint32_t t = 0; t < n; ++t) {
    const DeviceStep& s = L.steps[si + t];
    const int k = s.send >= 0 ? s.send : s.recv;
    if (res[t] == kDeviceTokenDone) ++pos[k];
    if (res[t] <= kDeviceTokenStopped || c.code != kDeviceRunning) continue;
    c.code = static_cast<uint32_t>(res[t] >> 32);
    L.result->got = static_cast<uint32_t>(res[t]);
    L.result->want = 0;
    L.result->peer = L.conns[k].peer;
    b.note(&L.result->slice, 0);
    b.store(&L.result->step, si + t);
    b.store(&L.result->code, c.code);
  }
}

// Runs lane L to its end, or until it yields (kDeviceYielded; run again, it resumes there),
// with backend b, which provides:
//   bool leader();  void sync();  DeviceSliceCtl& ctl();  DeviceAddr* table() (kDeviceMaxDirect entries)
//   unsigned tid(), threads() (this thread's index in its group, the group's size)
//   uint64_t* scratch() (kDeviceMaxConns entries, shared by the group)
//   uint32_t load(const uint32_t*, bool gpu = false) (acquire);  void store(uint32_t*, uint32_t,
//       bool gpu = false) (release); gpu: at GPU scope (a connector whose other end is on
//       this GPU, DeviceConn::sameGpu), else system scope
//   void note(uint32_t*, uint32_t) (relaxed: progress only the stall report reads)
//   void fence(bool gpu = false) (makes this group's data writes visible before a release
//       store, to this GPU only where gpu)
//   void post(uint32_t*, uint32_t) (a counter's relaxed store after fence(), which releases it)
//   void pause() (while waiting)
//   uint64_t now() (nanoseconds: the GPU's global timer, or the host's clock)
//   void slice(const DeviceStep&, const char* in, const char* src, char* dst, char* out,
//              uint64_t len, int nranks)
//   bool sliceDirect(const DeviceStep&, const DeviceAddr* table, uint64_t at, uint64_t len,
//                    int nranks) (a direct reduction's one pass over every rank's buffers;
//                    false for a type or op it does not take)
template <class B>
COLL_HD inline void deviceRunLane(const DeviceLane& L, B& b) {
  uint32_t pos[kDeviceMaxConns];  // per connector: this side's counter (leader only)
  if (b.leader()) deviceStart(L, b, pos);
  b.sync();
  const DeviceSliceCtl start = b.ctl();
  b.sync();  // every thread has read it before the leader moves on
  if (start.code != kDeviceRunning) return;
  for (uint32_t si = start.step; si < L.nsteps; ++si) {
    const DeviceStep s = L.steps[si];             // one read of the step (it may live in host memory)
    if (b.leader()) b.note(&L.result->step, si);  // live progress, for stall reports
    if (s.flags & kToken) {                       // a run of them: at once, or by the leader
      if (L.yieldNs == 0 && (s.send >= 0) != (s.recv >= 0)) deviceTokenBatch(L, b, si, pos);
      else if (b.leader()) deviceTokens(L, b, si, pos);
      b.sync();
      const DeviceSliceCtl c = b.ctl();
      b.sync();  // read by every thread before the leader writes it again
      if (c.code != kDeviceRunning) return;
      si = c.step - 1;
      continue;
    }
    // An address step moves one entry.
    const bool addr = (s.flags & kDirect) && (s.send >= 0 || s.recv >= 0);
    // A compressed step moves more of the caller's bytes per slot (compress.h); a direct
    // reduction has no slot.
    const bool reduceDirect = (s.flags & kDirect) && !addr;
    const uint64_t sliceBytes = reduceDirect ? L.sliceBytes * kDeviceDirectSlices
                                             : sliceBytesFor(s.encoding, L.sliceBytes);
    const uint64_t nslices = addr ? 1 : (s.bytes + sliceBytes - 1) / sliceBytes;
    for (uint64_t k = si == start.step ? start.slice : 0; k < nslices; ++k) {
      const uint64_t off = k * sliceBytes;
      const uint64_t len = addr ? sizeof(DeviceAddr) : s.bytes - off < sliceBytes ? s.bytes - off : sliceBytes;
      const uint64_t encodedLen = s.encoding != kEncodingNone ? encodedBytes(s.encoding, len / 4) : len;
      if (b.leader()) deviceLead(L, b, s, si, k, encodedLen, pos);
      b.sync();
      const DeviceSliceCtl c = b.ctl();
      if (c.code != kDeviceRunning) return;
      if (!(s.flags & kDirect))
        b.slice(s, c.in, s.src ? s.src + off : nullptr, s.dst ? s.dst + off : nullptr, c.out, len, L.nranks);
      else if (!addr) deviceDirect(L, b, s, off, len);
      b.sync();
      if (b.leader()) {
        // One fence releases the block's writes (the slot sent, the size), its reads of the
        // slot received, and, at a step's end, everything for the next step's stores (a
        // token after a direct reduction, from any thread of the block); the counters after
        // it are plain stores (a release store is a fence of its own: three were ~3 round
        // trips to memory per slice).
        if (s.send >= 0)
          b.note(&L.conns[s.send].sizes[pos[s.send] % kDeviceFifoSlots], static_cast<uint32_t>(encodedLen));
        if (s.recv >= 0 || s.send >= 0 || k + 1 == nslices) b.fence(deviceGpuScope(L, s));
        if (s.recv >= 0) b.post(L.conns[s.recv].head, ++pos[s.recv]);
        if (s.send >= 0) b.post(L.conns[s.send].tail, ++pos[s.send]);
      }
    }
  }
  if (b.leader()) {
    L.result->endNs = b.now();
    b.store(&L.result->step, L.nsteps);
    b.store(&L.result->code, kDeviceDone);
  }
}

}  // namespace coll

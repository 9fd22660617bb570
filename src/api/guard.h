// What every entry point of the C ABI shares: the wrapper that catches everything and
// records the error text, the "in use" hold on a communicator, and argument checks that
// name the argument and its value. Only src/api includes this.
#pragma once

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "api/options.h"
#include "collectives/collectives.h"
#include "collectives/config.h"
#include "comm/comm.h"
#include "base/datatype.h"
#include "comm/group.h"
#include "base/log.h"
#include "comm/premulsum.h"
#include "device/device_exec.h"
#if COLL_HAVE_CUDA
#include "cuda/gpu.h"
#endif

namespace coll::api {

// The calling thread's last error, for calls without a usable communicator.
std::string& lastErrorText();

inline std::string ptrStr(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}

inline void record(collComm* comm, const char* fn, const Status& st) {
  std::string text = std::string(fn) + ": " + st.message();
  if (st.code() == Code::kInvalidArgument || st.code() == Code::kInvalidUsage || st.code() == Code::kInProgress)
    COLL_INFO(COLL, "%s", text.c_str());
  else COLL_WARN(COLL, "%s", text.c_str());
  lastErrorText() = text;
  if (comm && isLiveComm(comm)) comm->lastError = text;
}

// Runs body, mapping every outcome to a collResult_t. `comm` is where the error is
// recorded (may be null). collInProgress is an answer, not an error: not recorded. A call
// that fails inside a group also fails the group (group.h groupNoteError).
template <typename F>
collResult_t guarded(const char* fn, collComm* comm, F&& body) {
  Status st;
  try {
    st = body();
  } catch (const std::bad_alloc&) {
    st = Status(Code::kSystem, "out of memory");
  } catch (const std::exception& e) {
    st = internalError(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    st = internalError("unexpected exception");
  }
  if (!st.ok() && st.code() != Code::kInProgress) {
    record(comm, fn, st);
    if (inGroup()) groupNoteError(Status(st.code(), std::string(fn) + ": " + st.message()));
  }
  return st.result();
}

// Holds comm "in use" for the duration of a call so collCommAbort waits for it, and
// names the communicator in the call's log lines.
class CommUse {
 public:
  explicit CommUse(collComm* c) : c_(c), ok_(c && acquireComm(c)) {
    if (ok_) log_.emplace(c->rank, c->options.name);
  }
  ~CommUse() {
    log_.reset();
    if (ok_) releaseComm(c_);
  }
  // A live communicator, whatever its init state.
  Status check(const char* arg = "comm") const {
    if (ok_) [[likely]]
      return okStatus();
    return notLive(arg);
  }
  // A live communicator whose init has completed.
  Status ready(const char* arg = "comm") const {
    if (ok_ && c_->initState.load(std::memory_order_acquire) == collSuccess &&
        !c_->suspended.load(std::memory_order_relaxed)) [[likely]]
      return okStatus();
    return notReady(arg);
  }

 private:
  // Why check() / ready() refuse (out of line: only failures build messages).
  Status notLive(const char* arg) const;
  Status notReady(const char* arg) const;

  collComm* c_;
  bool ok_;
  std::optional<LogContext> log_;
};

// The int a C caller passed for an enum argument. C lets any int through an enum
// parameter (the invalid-argument tests pass -1 and 99), but in C++ an enum object holding
// a value outside its enumerators' range is undefined, and UBSan reports every load of
// one. So entry points read an enum argument's bytes, never loading it as the enum, check
// the int, and make the enum again only from a checked value.
template <typename E>
int rawArg(const E& e) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof(v));
  return v;
}

// An operation as called: od with its datatype and op left at their zero values, which
// are kept as the ints passed (rawArg) until checked; runOp then sets them in od.
struct OpCall {
  OpDesc od;
  int dtype;
  int op;
  collDataType_t type() const { return static_cast<collDataType_t>(dtype); }  // once checked
};

// The OpCall of an entry point's arguments (root: the root, or send/recv's peer; -1: none).
inline OpCall opCall(CollKind kind, const void* sendbuff, void* recvbuff, size_t count, int dtype, int op, int root) {
  OpCall call{OpDesc{}, dtype, op};
  call.od.kind = kind;
  call.od.sendbuff = sendbuff;
  call.od.recvbuff = recvbuff;
  call.od.count = count;
  call.od.root = root;
  return call;
}

Status badType(int t);
inline Status checkType(int t) {
  if (validDataType(t)) [[likely]]
    return okStatus();
  return badType(t);
}

// A built-in op, or a PreMulSum op of comm made for datatype t.
Status checkOp(int op, collDataType_t t, const collComm* comm);

// count elements of t times `mult` must fit in size_t bytes.
Status bytesOverflow(const char* arg, size_t count, size_t mult, collDataType_t t);
inline Status checkBytes(const char* arg, size_t count, size_t mult, collDataType_t t) {
  size_t bytes;
  if (!__builtin_mul_overflow(count, dataTypeSize(t), &bytes) && !__builtin_mul_overflow(bytes, mult, &bytes))
      [[likely]]
    return okStatus();
  return bytesOverflow(arg, count, mult, t);
}

// Which kinds of buffers an operation was given (only those it will touch are checked).
struct BufKinds {
  const char* deviceArg = nullptr;  // the first buffer on the device path
  const char* hostArg = nullptr;    // the first host buffer
};

Status nullBuffer(const char* arg, size_t count);
inline Status checkBuf(const char* arg, const void* p, size_t count, const collComm* c, BufKinds* kinds) {
  if (!p && count > 0) return nullBuffer(arg, count);
  if (count == 0) return okStatus();
#if COLL_HAVE_CUDA
  if (c->dev.emulate && gpu::isDeviceMemory(p))
    return invalidArgument(std::string(arg) +
                           " is CUDA device memory, but COLL_DEVICE_EMULATE=1 runs the device path on host "
                           "threads: host buffers only");
#endif
  if (devicePathFor(c->dev, p)) {
    if (!kinds->deviceArg) kinds->deviceArg = arg;
  } else if (!kinds->hostArg) {
    kinds->hostArg = arg;
  }
  return okStatus();
}

Status rankOutOfRange(const char* arg, int r, int nranks);
inline Status checkRank(const char* arg, int r, int nranks) {
  if (r >= 0 && r < nranks) [[likely]]
    return okStatus();
  return rankOutOfRange(arg, r, nranks);
}

// The device path for device buffers (never mixed with host buffers in one call), on
// the caller's stream.
inline Status placeOp(OpDesc* od, const BufKinds& kinds, collStream_t stream) {
  if (kinds.deviceArg && kinds.hostArg)
    return invalidArgument(std::string(kinds.deviceArg) + " is CUDA device memory but " + kinds.hostArg +
                           " is host memory: one operation takes buffers of one kind");
  od->device = kinds.deviceArg != nullptr;
  od->stream = stream;
  return okStatus();
}

// Device reductions, and compressed collectives, load whole elements (16 bytes at a time
// where they can, else one element): a device buffer off its element's alignment would
// fault the kernel (a crash of the context), so it is refused by name. Copies need no
// alignment (kernels/slice.h moves the widest unit the pointers share).
inline Status checkElementAlignment(const OpDesc& od, int rank) {
  if (!od.device || od.count == 0 || (!combines(od.kind) && od.encoding == 0)) return okStatus();
  const size_t es = dataTypeSize(od.dtype);
  auto check = [&](const char* arg, const void* p) -> Status {
    if (reinterpret_cast<uintptr_t>(p) % es == 0) return okStatus();
    return invalidArgument(std::string(arg) + " " + ptrStr(p) + " is not aligned to its " + std::to_string(es) +
                           "-byte " + dataTypeName(od.dtype) +
                           " elements: device reductions and compressed collectives read whole elements");
  };
  if (od.touchesSend(rank)) COLL_CHECK(check("sendbuff", od.sendbuff));
  if (od.touchesRecv(rank)) COLL_CHECK(check("recvbuff", od.recvbuff));
  return okStatus();
}

// Drops comm's PreMulSum ops from the process-wide registry (before comm is freed).
void forgetOps(const collComm* comm);

// Whether [p, p+bytes) lies inside one of comm's registrations (api_mem.cc).
bool isRegistered(const collComm* comm, const void* p, size_t bytes);

// Enqueues od (or runs it), recording the error on the rank that failed.
inline Status enqueueOp(const char* fn, collComm* comm, OpDesc&& od) {
  if (od.kind == CollKind::kPeerSend) od.registered = isRegistered(comm, od.sendbuff, od.bytes());
  collComm* failed = nullptr;
  Status st = enqueue(comm, std::move(od), &failed);
  if (!st.ok() && failed && failed != comm && isLiveComm(failed))
    failed->lastError = std::string(fn) + ": " + st.message();
  return st;
}

// Runs work() (collective management on comm: a split, a shrink, a window agreement) on
// a thread of its own, holding comm in use and on its device, and calls publish() at the
// outermost collGroupEnd if it succeeded (group.h groupDefer).
template <typename Work>
void deferOnComm(collComm* comm, Work work, std::function<void()> publish) {
  groupDefer(
      [comm, work]() -> Status {
        if (!acquireComm(comm)) return invalidUsage("the communicator was destroyed before collGroupEnd");
        LogContext log(comm->rank, comm->options.name);
#if COLL_HAVE_CUDA
        if (comm->dev.cudaDev >= 0) (void)gpu::setDevice(comm->dev.cudaDev);
#endif
        Status st = work();
        releaseComm(comm);
        return st;
      },
      std::move(publish));
}

// A split or shrink inside a group: make() runs as deferOnComm's work, and its
// communicator is written to *out at the group end.
template <typename Make>
void deferToGroupEnd(collComm* comm, collComm** out, Make make) {
  auto made = std::make_shared<collComm*>(nullptr);
  deferOnComm(
      comm,
      [made, make]() -> Status {
        COLL_ASSIGN(*made, make());
        return okStatus();
      },
      [out, made] { *out = *made; });
}

// The arguments of collective call (not send/recv), its datatype checked, named as the
// caller named them (api.cc).
Status checkArgs(const OpCall& call, collComm* c, BufKinds* k);

// The encoding a compressed call's wiretype (rawArg) asks for (kEncodingNone where it is
// none: checkCompressed says why).
uint8_t encodingOf(int wiretype);

// The arguments only compressed calls have: fp32 buffers, a 16-bit floating wire type,
// and for reductions an op compression supports.
Status checkCompressed(const OpCall& call, int wiretype);

// The encoding comm's default compression gives od (kEncodingNone where it does not apply).
uint8_t defaultEncoding(const collComm* comm, const OpDesc& od);

// Checks call (its datatype, then validate(call, comm, &kinds), which checks the rest, its
// op included) and its per-call config, and enqueues it.
template <typename Validate>
collResult_t runOp(const char* fn, collComm* comm, OpCall call, collStream_t stream, Validate&& validate,
                   const collCollConfig_t* config = nullptr) {
  CommUse use(comm);
  return guarded(fn, comm, [&]() -> Status {
    COLL_CHECK(use.ready());
    COLL_CHECK(checkType(call.dtype));
    BufKinds kinds;
    COLL_CHECK(validate(call, comm, &kinds));
    OpDesc& od = call.od;  // the call is ours (taken by value): no copy
    od.dtype = call.type();
    od.op = static_cast<collRedOp_t>(call.op);
    COLL_CHECK(placeOp(&od, kinds, stream));
    COLL_CHECK(applyCollConfig(config, comm, &od));
    if (od.encoding == 0 && comm->compress != 0) od.encoding = defaultEncoding(comm, od);
    COLL_CHECK(checkElementAlignment(od, comm->rank));
    COLL_CHECK(lowerPreMulSum(comm, &od));
    return enqueueOp(fn, comm, std::move(od));
  });
}

}  // namespace coll::api

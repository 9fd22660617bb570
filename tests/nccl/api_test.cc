// The NCCL API of libnccl.so.2, exercised through nccl.h alone.
//
// This one file is compiled twice: against NVIDIA's nccl.h (nccl_api_test_nvidia) and
// against Collectives' own include/collectives/nccl/nccl.h (nccl_api_test_ours). Both
// link only the drop-in, so the first checks that a program built for NVIDIA's NCCL runs
// on it (names, values, layouts, calling conventions), the second that our header says
// the same. Nothing here names a coll function: what it knows of the library is NCCL's
// contract plus the drop-in's documented choices for machines without a GPU:
//   - buffers are host memory, so every call completes before it returns (or at the
//     outermost ncclGroupEnd) and the stream argument is ignored (we pass 0);
//   - a rank that never touched CUDA is a host-memory rank (ncclCommCuDevice gives -1).
//
// A Catch2 program: one test per case, tagged with the modes it runs in
// (`--list-tests`). Usage: [VARIABLES] nccl_api_test_X [Catch2 options] [CASE,... | "[MODE]"]
//   NCCL_API_TEST_MODE=local    one process, no shared communicator (process-level
//                               calls, InitAll)
//                      threads  the ranks as threads of one process
//                      procs    the ranks as forked processes (shared memory unless the
//                               environment picks TCP: COLL_SHM_DISABLE=1, or simulated
//                               hosts: NCCL_API_TEST_HOSTS=K gives each process
//                               COLL_HOSTID apitest-host<k>)
//                      unset    each case in its first mode: local, else procs
//   NCCL_API_TEST_NRANKS=N      ranks of each case (default 3 local, 4 otherwise)
//   NCCL_API_TEST_TIMEOUT_SCALE=S  multiplies every case's watchdog (30-120 s)
//   NCCL_API_TEST_NOTES=1       print the cases' notes (error texts, timings)
// Each case runs in its own forked process (threads, local) or processes (procs) under
// a watchdog, so a crash or a hang fails that case only, and the rest still run. Every
// check that fails prints "FAIL <case> rank <r>: <what>"; the failed cases are repeated
// after Catch2's summary. Catch2's own code never calls the library, so no library
// thread exists when a case forks.
#define CATCH_CONFIG_MAIN
// A case's processes die of signals on purpose and are judged by their parent: Catch2
// must not catch those signals in them.
#define CATCH_CONFIG_NO_POSIX_SIGNALS
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <nccl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

const cudaStream_t kStream = nullptr;  // host buffers: the stream is ignored

constexpr int kMaxIds = 16;
constexpr int kMaxRanks = 16;
constexpr int kMaxSlots = 16;

double nowS() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
void sleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// ---------------------------------------------------------------------------------------
// Ranks of one case and what they share: MAP_SHARED memory made before the ranks exist,
// so forked ranks see it as threads do. Unique ids travel through it as NCCL programs
// pass them (rank 0 makes one, the others copy the bytes).
struct Shared {
  std::atomic<int> idState[kMaxIds];  // 0 not made, 1 ready, 2 ncclGetUniqueId failed
  ncclUniqueId ids[kMaxIds];
  std::atomic<long long> slot[kMaxSlots];
  std::atomic<int> slotReady[kMaxSlots];
  std::atomic<int> barrierArrived;
  std::atomic<int> barrierGeneration;
  std::atomic<int> expectedDeath[kMaxRanks];  // the case kills this rank on purpose
  // The case's first failure, repeated in the summary line: CI logs keep a run's head and
  // tail, and a failure in the middle of a long run must still be readable there.
  std::atomic<int> firstFailureSet;
  char firstFailure[512];
};

Shared* newShared() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    std::exit(100);
  }
  return new (p) Shared();
}

std::mutex gOutMutex;

// One write per line, so lines of ranks (threads or processes) do not interleave.
bool gNotes = false;  // NCCL_API_TEST_NOTES: print the cases' notes

void emit(const std::string& line) {
  std::lock_guard<std::mutex> lock(gOutMutex);
  ssize_t w = write(STDOUT_FILENO, line.data(), line.size());
  (void)w;
}

std::string vformat(const char* fmt, va_list ap) {
  char buf[2048];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  return buf;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

struct Ctx {
  const char* caseName = "";
  int rank = 0;
  int nranks = 1;
  bool procs = false;  // ranks are processes (setenv and killing oneself are allowed)
  Shared* sh = nullptr;
  ncclComm_t comm = nullptr;  // ncclCommInitRank on id(0); the runner destroys it unless null
  int failures = 0;

  void fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    ++failures;
    std::string line = format("FAIL %s rank %d: %s\n", caseName, rank, s.c_str());
    if (sh && sh->firstFailureSet.exchange(1) == 0)
      std::snprintf(sh->firstFailure, sizeof sh->firstFailure, "%s", line.c_str());
    emit(line);
  }
  // Informative lines (error texts, timings): with -v only, and from rank 0 only, so that
  // a failing run's log (what CI shows of it is its head) is mostly PASS and FAIL lines.
  void note(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (rank != 0 || !gNotes) return;
    va_list ap;
    va_start(ap, fmt);
    std::string s = vformat(fmt, ap);
    va_end(ap);
    emit(format("  note %s: %s\n", caseName, s.c_str()));
  }

  // Unique id number k: rank 0 makes it, the others wait for its bytes.
  ncclUniqueId id(int k) {
    ncclUniqueId out;
    std::memset(&out, 0, sizeof(out));
    if (rank == 0) {
      ncclResult_t r = ncclGetUniqueId(&sh->ids[k]);
      if (r != ncclSuccess) fail("ncclGetUniqueId: %d %s", r, ncclGetLastError(nullptr));
      sh->idState[k].store(r == ncclSuccess ? 1 : 2);
    } else {
      double deadline = nowS() + 60;
      while (sh->idState[k].load() == 0 && nowS() < deadline) sleepMs(1);
      if (sh->idState[k].load() != 1) fail("no unique id %d from rank 0", k);
    }
    if (sh->idState[k].load() == 1) out = sh->ids[k];
    return out;
  }

  // A value rank 0 publishes for the others (a port, a size).
  long long share(int k, long long v) {
    if (rank == 0) {
      sh->slot[k].store(v);
      sh->slotReady[k].store(1);
      return v;
    }
    double deadline = nowS() + 60;
    while (!sh->slotReady[k].load() && nowS() < deadline) sleepMs(1);
    return sh->slot[k].load();
  }

  // A barrier outside the library, over the first `count` ranks (default all).
  bool barrier(int count = 0) {
    if (count == 0) count = nranks;
    int gen = sh->barrierGeneration.load();
    if (sh->barrierArrived.fetch_add(1) + 1 == count) {
      sh->barrierArrived.store(0);
      sh->barrierGeneration.fetch_add(1);
      return true;
    }
    double deadline = nowS() + 60;
    while (sh->barrierGeneration.load() == gen) {
      if (nowS() > deadline) {
        fail("barrier: the other ranks never came");
        return false;
      }
      sleepMs(1);
    }
    return true;
  }
};

const char* resultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclTimeout: return "ncclTimeout";
    default: return "(not an ncclResult_t)";
  }
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// True when text contains one of the '|'-separated words (case-insensitive).
bool mentions(const char* text, const char* words) {
  std::string t = lower(text ? text : "");
  std::string w = words;
  size_t start = 0;
  while (start <= w.size()) {
    size_t bar = w.find('|', start);
    std::string one = lower(w.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (!one.empty() && t.find(one) != std::string::npos) return true;
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return false;
}

// What makes an error text not NCCL's (null where nothing does): the library's own API
// names (collX, COLL_X), or more than one line (source locations are for NCCL_DEBUG=INFO).
const char* notNcclWords(const char* text) {
  for (const char* p = text; *p; ++p) {
    const bool start = p == text || !(std::isalnum(static_cast<unsigned char>(p[-1])) || p[-1] == '_');
    if (start && std::strncmp(p, "coll", 4) == 0 && std::isupper(static_cast<unsigned char>(p[4])))
      return "a coll API name";
    if (start && std::strncmp(p, "COLL_", 5) == 0) return "a COLL_ name";
    if (*p == '\n') return "several lines";
  }
  return nullptr;
}

bool expectOk(Ctx& c, ncclResult_t r, const char* what, ncclComm_t comm, int line) {
  if (r == ncclSuccess) return true;
  const char* last = ncclGetLastError(comm);
  c.fail("line %d: %s returned %s (%d): %s", line, what, resultName(r), r, last ? last : "(NULL)");
  return false;
}

// An error call: the result must be one of the accepted codes, and ncclGetLastError must
// say something containing one of `words`. Errors are noted with their text.
bool expectErr(Ctx& c, ncclResult_t r, const char* what, ncclComm_t comm, const char* words, bool usageOk, int line) {
  const char* last = ncclGetLastError(comm);
  if (last == nullptr) {
    c.fail("line %d: %s: ncclGetLastError returned NULL", line, what);
    return false;
  }
  bool codeOk = r == ncclInvalidArgument || (usageOk && r == ncclInvalidUsage);
  if (!codeOk) {
    c.fail("line %d: %s returned %s (%d), want ncclInvalidArgument%s; last error: \"%s\"", line, what, resultName(r), r,
           usageOk ? " or ncclInvalidUsage" : "", last);
    return false;
  }
  if (!mentions(last, words)) {
    c.fail("line %d: %s: ncclGetLastError does not mention '%s': \"%s\"", line, what, words, last);
    return false;
  }
  if (const char* foreign = notNcclWords(last)) {
    c.fail("line %d: %s: ncclGetLastError is not in NCCL's words (%s): \"%s\"", line, what, foreign, last);
    return false;
  }
  c.note("%s -> %s: %s", what, resultName(r), last);
  return true;
}

#define OK(call) expectOk(c, (call), #call, c.comm, __LINE__)
#define OKC(comm, call) expectOk(c, (call), #call, (comm), __LINE__)
// Must fail with ncclInvalidArgument, the last error (of `comm`) mentioning `words`.
#define BADARG(comm, words, call) expectErr(c, (call), #call, (comm), (words), false, __LINE__)
// Must fail with ncclInvalidArgument or ncclInvalidUsage.
#define BAD(comm, words, call) expectErr(c, (call), #call, (comm), (words), true, __LINE__)
#define EXPECTL(cond, fmt, ...)                                    \
  do {                                                             \
    if (!(cond)) c.fail("line %d: " fmt, __LINE__, ##__VA_ARGS__); \
  } while (0)

// Polls a non-blocking communicator until it is no longer ncclInProgress.
ncclResult_t waitReady(ncclComm_t comm, ncclResult_t first, double timeoutS = 60) {
  if (first != ncclInProgress) return first;
  if (comm == nullptr) return ncclInProgress;
  double deadline = nowS() + timeoutS;
  ncclResult_t state = ncclInProgress;
  while (nowS() < deadline) {
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return r;
    if (state != ncclInProgress) return state;
    sleepMs(1);
  }
  return ncclInProgress;
}

// ---------------------------------------------------------------------------------------
// Data types. Low-precision values are encoded here from doubles (round to nearest even;
// fp8 saturates as CUDA's satfinite conversion does), so expected results are computed
// with the same rounding as the library documents.

enum class Kind { kSigned, kUnsigned, kFloat };
struct TypeDesc {
  ncclDataType_t type;
  const char* name;
  size_t size;
  Kind kind;
  double eps;  // relative spacing of the type's values near 1 (0 for integers)
};
const TypeDesc kTypes[] = {
    {ncclInt8, "int8", 1, Kind::kSigned, 0},
    {ncclUint8, "uint8", 1, Kind::kUnsigned, 0},
    {ncclInt32, "int32", 4, Kind::kSigned, 0},
    {ncclUint32, "uint32", 4, Kind::kUnsigned, 0},
    {ncclInt64, "int64", 8, Kind::kSigned, 0},
    {ncclUint64, "uint64", 8, Kind::kUnsigned, 0},
    {ncclFloat16, "half", 2, Kind::kFloat, 1.0 / 1024},
    {ncclFloat32, "float", 4, Kind::kFloat, 1.2e-7},
    {ncclFloat64, "double", 8, Kind::kFloat, 2.3e-16},
    {ncclBfloat16, "bfloat16", 2, Kind::kFloat, 1.0 / 128},
    {ncclFloat8e4m3, "fp8e4m3", 1, Kind::kFloat, 1.0 / 8},
    {ncclFloat8e5m2, "fp8e5m2", 1, Kind::kFloat, 1.0 / 4},
};
static_assert(sizeof(kTypes) / sizeof(kTypes[0]) == ncclNumTypes, "one entry per NCCL type");

double decodeMini(uint32_t bits, int E, int M, bool e4m3) {
  const int bias = (1 << (E - 1)) - 1;
  const uint32_t sign = (bits >> (E + M)) & 1u;
  const uint32_t exp = (bits >> M) & ((1u << E) - 1);
  const uint32_t man = bits & ((1u << M) - 1);
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(man), 1 - bias - M);
  else if (!e4m3 && exp == (1u << E) - 1) v = man ? NAN : INFINITY;
  else if (e4m3 && exp == 15 && man == 7) v = NAN;
  else v = std::ldexp(static_cast<double>((1u << M) | man), static_cast<int>(exp) - bias - M);
  return sign ? -v : v;
}

uint32_t encodeMini(double x, int E, int M, bool e4m3, bool saturate) {
  const uint32_t signBit = std::signbit(x) ? 1u << (E + M) : 0u;
  if (std::isnan(x)) return (1u << (E + M)) - 1;
  const double a = std::fabs(x);
  const int bias = (1 << (E - 1)) - 1;
  const uint32_t maxCode = e4m3 ? 0x7eu : ((((1u << E) - 2) << M) | ((1u << M) - 1));
  uint32_t code;
  if (a == 0) {
    code = 0;
  } else if (std::isinf(a)) {
    code = maxCode + 1;
  } else {
    int e;
    std::frexp(a, &e);
    int ue = e - 1;
    if (ue < 1 - bias) ue = 1 - bias;  // subnormals share the smallest normal's spacing
    double q = std::nearbyint(std::ldexp(a, M - ue));
    if (q >= std::ldexp(1.0, M + 1)) {
      ++ue;
      q = std::ldexp(q, -1);
    }
    if (q < std::ldexp(1.0, M)) code = static_cast<uint32_t>(q);
    else code = (static_cast<uint32_t>(ue + bias) << M) | (static_cast<uint32_t>(q) - (1u << M));
  }
  if (code > maxCode) code = saturate ? maxCode : maxCode + 1;
  return signBit | code;
}

void setValue(ncclDataType_t t, void* buf, size_t i, double v) {
  switch (t) {
    case ncclInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(static_cast<int64_t>(v)); break;
    case ncclUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(static_cast<int64_t>(v)); break;
    case ncclInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(static_cast<int64_t>(v)); break;
    case ncclUint32: static_cast<uint32_t*>(buf)[i] = static_cast<uint32_t>(static_cast<int64_t>(v)); break;
    case ncclInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case ncclUint64: static_cast<uint64_t*>(buf)[i] = static_cast<uint64_t>(static_cast<int64_t>(v)); break;
    case ncclFloat16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(encodeMini(v, 5, 10, false, false)); break;
    case ncclFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case ncclFloat64: static_cast<double*>(buf)[i] = v; break;
    case ncclBfloat16: static_cast<uint16_t*>(buf)[i] = static_cast<uint16_t>(encodeMini(v, 8, 7, false, false)); break;
    case ncclFloat8e4m3: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(encodeMini(v, 4, 3, true, true)); break;
    case ncclFloat8e5m2: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(encodeMini(v, 5, 2, false, true)); break;
    default: break;
  }
}

double getValue(ncclDataType_t t, const void* buf, size_t i) {
  switch (t) {
    case ncclInt8: return static_cast<const int8_t*>(buf)[i];
    case ncclUint8: return static_cast<const uint8_t*>(buf)[i];
    case ncclInt32: return static_cast<const int32_t*>(buf)[i];
    case ncclUint32: return static_cast<const uint32_t*>(buf)[i];
    case ncclInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case ncclUint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case ncclFloat16: return decodeMini(static_cast<const uint16_t*>(buf)[i], 5, 10, false);
    case ncclFloat32: return static_cast<const float*>(buf)[i];
    case ncclFloat64: return static_cast<const double*>(buf)[i];
    case ncclBfloat16: return decodeMini(static_cast<const uint16_t*>(buf)[i], 8, 7, false);
    case ncclFloat8e4m3: return decodeMini(static_cast<const uint8_t*>(buf)[i], 4, 3, true);
    case ncclFloat8e5m2: return decodeMini(static_cast<const uint8_t*>(buf)[i], 5, 2, false);
    default: return NAN;
  }
}

// The value v rounded as the type stores it.
double roundTo(ncclDataType_t t, double v) {
  unsigned char b[8];
  setValue(t, b, 0, v);
  return getValue(t, b, 0);
}

using Bytes = std::vector<unsigned char>;

// A byte of the pattern that rank `src` sends for block `blk` at byte `i` (copies move bit
// patterns, so every byte value occurs, NaN encodings included).
unsigned char patternByte(int src, int blk, size_t i, int salt) {
  uint64_t x = (static_cast<uint64_t>(src) * 1000003u) ^ (static_cast<uint64_t>(blk) * 7919u) ^ (i * 2654435761u) ^
               (static_cast<uint64_t>(salt) * 40503u);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  return static_cast<unsigned char>(x);
}
void fillPattern(unsigned char* p, size_t bytes, int src, int blk, int salt) {
  for (size_t i = 0; i < bytes; ++i) p[i] = patternByte(src, blk, i, salt);
}
// Index of the first byte that differs from the pattern, or SIZE_MAX.
size_t checkPattern(const unsigned char* p, size_t bytes, int src, int blk, int salt) {
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != patternByte(src, blk, i, salt)) return i;
  return SIZE_MAX;
}
constexpr unsigned char kSentinel = 0xA5;
bool untouched(const Bytes& b) {
  for (unsigned char x : b)
    if (x != kSentinel) return false;
  return true;
}

// Float allreduce of in[i] = rank + i%7 with a check, the smoke test used after
// management calls. `ranks` is the number of ranks in comm, `base` the sum of their
// rank values (they need not be 0..n-1: callers pass what each rank contributes).
bool allreduceWorks(Ctx& c, ncclComm_t comm, int myValue, int ranks, int sumValues, const char* what,
                    size_t count = 1031) {
  std::vector<float> in(count), out(count, -1.f);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>(myValue + static_cast<int>(i % 7));
  ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, comm, kStream);
  if (r != ncclSuccess) {
    c.fail("%s: ncclAllReduce returned %s: %s", what, resultName(r), ncclGetLastError(comm));
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    float want = static_cast<float>(sumValues + ranks * static_cast<int>(i % 7));
    if (out[i] != want) {
      c.fail("%s: allreduce out[%zu] = %g, want %g", what, i, out[i], want);
      return false;
    }
  }
  return true;
}
bool allreduceWorks(Ctx& c, ncclComm_t comm, const char* what) {
  return allreduceWorks(c, comm, c.rank, c.nranks, c.nranks * (c.nranks - 1) / 2, what);
}

// ---------------------------------------------------------------------------------------
// Local cases: one process, no communicator made by the runner.

void caseVersion(Ctx& c) {
  int v = -1;
  OK(ncclGetVersion(&v));
  EXPECTL(v == 23203, "ncclGetVersion gave %d, want 23203", v);
  EXPECTL(NCCL_VERSION_CODE == 23203, "NCCL_VERSION_CODE is %d", NCCL_VERSION_CODE);
  EXPECTL(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH) == v, "NCCL_VERSION(major, minor, patch) != %d", v);
  OK(pncclGetVersion(&v));
  EXPECTL(v == 23203, "pncclGetVersion gave %d", v);
  BADARG(nullptr, "version", ncclGetVersion(nullptr));
}

void caseErrorStrings(Ctx& c) {
  std::vector<std::string> seen;
  for (int r = ncclSuccess; r < ncclNumResults; ++r) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    if (s == nullptr || *s == 0) {
      c.fail("ncclGetErrorString(%d) is %s", r, s ? "empty" : "NULL");
      continue;
    }
    for (auto& other : seen)
      if (other == s) c.fail("ncclGetErrorString(%d) repeats \"%s\"", r, s);
    seen.push_back(s);
    const char* p = pncclGetErrorString(static_cast<ncclResult_t>(r));
    if (p == nullptr || std::strcmp(p, s) != 0) c.fail("pncclGetErrorString(%d) differs", r);
  }
  for (int r : {static_cast<int>(ncclNumResults), 99, -1}) {
    const char* s = ncclGetErrorString(static_cast<ncclResult_t>(r));
    EXPECTL(s != nullptr, "ncclGetErrorString(%d) is NULL", r);
  }
  c.note("ncclGetErrorString(ncclInvalidArgument) = \"%s\"", ncclGetErrorString(ncclInvalidArgument));
}

void caseLastError(Ctx& c) {
  const char* s = ncclGetLastError(nullptr);
  EXPECTL(s != nullptr, "ncclGetLastError(NULL) is NULL before any error");
  BADARG(nullptr, "comm", ncclCommCount(nullptr, nullptr));
  const char* after = ncclGetLastError(nullptr);
  EXPECTL(after != nullptr && *after != 0, "ncclGetLastError(NULL) is empty after a refused call");
}

void caseResetDebugInit(Ctx& c) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  setenv("NCCL_DEBUG", "WARN", 1);
  ncclResetDebugInit();
  unsetenv("NCCL_DEBUG");
  ncclResetDebugInit();
  pncclResetDebugInit();
#pragma GCC diagnostic pop
  int v = 0;
  OK(ncclGetVersion(&v));
}

void caseMemAlloc(Ctx& c) {
  const long page = sysconf(_SC_PAGESIZE);
  for (size_t size : {size_t{1}, size_t{4096}, size_t{100003}, size_t{1} << 22}) {
    void* p = nullptr;
    if (!OK(ncclMemAlloc(&p, size))) continue;
    EXPECTL(p != nullptr, "ncclMemAlloc(%zu) gave NULL", size);
    if (!p) continue;
    EXPECTL(reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(page) == 0,
            "ncclMemAlloc(%zu) = %p is not page aligned", size, p);
    std::memset(p, 0x5a, size);
    EXPECTL(static_cast<unsigned char*>(p)[size - 1] == 0x5a, "memory of ncclMemAlloc not writable");
    OK(ncclMemFree(p));
    ncclResult_t r = ncclMemFree(p);
    EXPECTL(r != ncclSuccess, "ncclMemFree twice of %p succeeded", p);
  }
  void* q = nullptr;
  OK(pncclMemAlloc(&q, 64));
  OK(pncclMemFree(q));
  void* foreign = std::malloc(4096);
  BADARG(nullptr, "ptr|pointer|memalloc", ncclMemFree(foreign));
  std::free(foreign);
  int onStack = 0;
  BADARG(nullptr, "ptr|pointer|memalloc", ncclMemFree(&onStack));
  BADARG(nullptr, "ptr", ncclMemAlloc(nullptr, 64));
}

void caseLocalBadArgs(Ctx& c) {
  ncclUniqueId id;
  BADARG(nullptr, "uniqueid|id", ncclGetUniqueId(nullptr));
  if (!OK(ncclGetUniqueId(&id))) return;
  ncclComm_t comm = reinterpret_cast<ncclComm_t>(0x1);
  BADARG(nullptr, "rank", ncclCommInitRank(&comm, 2, id, 2));
  BADARG(nullptr, "rank", ncclCommInitRank(&comm, 2, id, -1));
  BADARG(nullptr, "nranks", ncclCommInitRank(&comm, 0, id, 0));
  BADARG(nullptr, "comm", ncclCommInitRank(nullptr, 1, id, 0));
  ncclUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  BADARG(nullptr, "id|commid", ncclCommInitRank(&comm, 1, zero, 0));
  // Configs that no NCCL_CONFIG_INITIALIZER made: refused before any rendezvous.
  struct BadConfig {
    const char* what;
    std::function<void(ncclConfig_t&)> spoil;
    const char* words;
  };
  const BadConfig bad[] = {
      {"size 0", [](ncclConfig_t& g) { g.size = 0; }, "size|config"},
      {"size 3", [](ncclConfig_t& g) { g.size = 3; }, "size|config"},
      {"size huge", [](ncclConfig_t& g) { g.size = sizeof(ncclConfig_t) * 1000; }, "size|config"},
      {"magic 0", [](ncclConfig_t& g) { g.magic = 0; }, "magic|config"},
      {"magic ~", [](ncclConfig_t& g) { g.magic = ~0xcafebeefu; }, "magic|config"},
      {"version 0", [](ncclConfig_t& g) { g.version = 0; }, "version|config"},
      {"version 99.99", [](ncclConfig_t& g) { g.version = 999999; }, "version|config"},
      {"blocking 7", [](ncclConfig_t& g) { g.blocking = 7; }, "blocking|config"},
  };
  for (auto& b : bad) {
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    b.spoil(cfg);
    ncclUniqueId fresh;
    if (!OK(ncclGetUniqueId(&fresh))) return;
    ncclComm_t made = nullptr;
    ncclResult_t r = ncclCommInitRankConfig(&made, 1, fresh, 0, &cfg);
    if (!expectErr(c, r, format("ncclCommInitRankConfig(config with %s)", b.what).c_str(), nullptr, b.words, false,
                   __LINE__) &&
        r == ncclSuccess && made)
      ncclCommDestroy(made);
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclComm_t made = nullptr;
  ncclUniqueId two[2] = {id, id};
  BADARG(nullptr, "nid|id", ncclCommInitRankScalable(&made, 1, 0, 0, two, &cfg));
  BADARG(nullptr, "commids|id", ncclCommInitRankScalable(&made, 1, 0, 1, nullptr, &cfg));
  BADARG(nullptr, "nid|id", ncclCommInitRankScalable(&made, 1, 0, 2, two, nullptr));
  BADARG(nullptr, "ndev", ncclCommInitAll(&made, 0, nullptr));
  BADARG(nullptr, "comm", ncclCommInitAll(nullptr, 2, nullptr));
  BAD(nullptr, "group", ncclGroupEnd());
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  BAD(nullptr, "group", ncclGroupSimulateEnd(&sim));
  // Calls on no communicator.
  float x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  BADARG(nullptr, "comm", ncclAllReduce(x, y, 4, ncclFloat, ncclSum, nullptr, kStream));
  BADARG(nullptr, "comm", ncclSend(x, 4, ncclFloat, 0, nullptr, kStream));
  // As NVIDIA's library (and free(NULL)): destroying or aborting NULL is a no-op.
  OKC(nullptr, ncclCommDestroy(nullptr));
  OKC(nullptr, ncclCommAbort(nullptr));
  BADARG(nullptr, "comm", ncclCommFinalize(nullptr));
  ncclResult_t st;
  BADARG(nullptr, "comm", ncclCommGetAsyncError(nullptr, &st));
  int n;
  BADARG(nullptr, "comm", ncclCommUserRank(nullptr, &n));
  BADARG(nullptr, "comm", ncclCommCuDevice(nullptr, &n));
  EXPECTL(y[0] == 0 && y[3] == 0, "a call that failed wrote its output");
}

// ncclCommInitRankConfig with a config of an older NCCL (2.18: fields up to splitShare,
// size and version as its NCCL_CONFIG_INITIALIZER set them): NVIDIA's library accepts
// configs of older headers, so programs built against them keep working.
void caseConfigOldLayout(Ctx& c) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.size = offsetof(ncclConfig_t, trafficClass);
  cfg.version = NCCL_VERSION(2, 18, 1);
  // Later fields hold garbage, as memory past an old struct would.
  std::memset(reinterpret_cast<char*>(&cfg) + cfg.size, 0x7b, sizeof(cfg) - cfg.size);
  ncclUniqueId id;
  if (!OK(ncclGetUniqueId(&id))) return;
  ncclComm_t comm = nullptr;
  if (OKC(nullptr, ncclCommInitRankConfig(&comm, 1, id, 0, &cfg))) {
    allreduceWorks(c, comm, 0, 1, 0, "2.18 config");
    OKC(comm, ncclCommDestroy(comm));
  }
}

// n host ranks in one process, driven by one thread inside groups.
void caseInitAll(Ctx& c) {
  const int n = c.nranks;
  std::vector<ncclComm_t> comms(n, nullptr);
  if (!OKC(nullptr, ncclCommInitAll(comms.data(), n, nullptr))) return;
  for (int i = 0; i < n; ++i) {
    int count = -1, rank = -1, dev = -2;
    OKC(comms[i], ncclCommCount(comms[i], &count));
    OKC(comms[i], ncclCommUserRank(comms[i], &rank));
    OKC(comms[i], ncclCommCuDevice(comms[i], &dev));
    EXPECTL(count == n && rank == i && dev == -1, "comms[%d]: count %d rank %d device %d", i, count, rank, dev);
  }
  const size_t count = 100003;
  std::vector<std::vector<double>> in(n, std::vector<double>(count)), out(n, std::vector<double>(count, -1));
  std::vector<std::vector<int32_t>> ring(n, std::vector<int32_t>(count, -1));
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < count; ++k) in[i][k] = i * 0.5 + static_cast<double>(k % 11);
  OKC(nullptr, ncclGroupStart());
  for (int i = 0; i < n; ++i)
    OKC(comms[i], ncclAllReduce(in[i].data(), out[i].data(), count, ncclDouble, ncclSum, comms[i], kStream));
  OKC(nullptr, ncclGroupEnd());
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < count; ++k) {
      double want = 0.5 * n * (n - 1) / 2 + n * static_cast<double>(k % 11);
      if (out[i][k] != want) {
        c.fail("InitAll allreduce: comms[%d] out[%zu] = %g, want %g", i, k, out[i][k], want);
        break;
      }
    }
  // A ring of sends and receives plus a broadcast, all in one group.
  std::vector<std::vector<int32_t>> src(n, std::vector<int32_t>(count));
  std::vector<std::vector<int32_t>> bc(n, std::vector<int32_t>(count, -1));
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < count; ++k) src[i][k] = static_cast<int32_t>(i * 1000000 + k);
  OKC(nullptr, ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    OKC(comms[i], ncclSend(src[i].data(), count, ncclInt32, (i + 1) % n, comms[i], kStream));
    OKC(comms[i], ncclRecv(ring[i].data(), count, ncclInt32, (i + n - 1) % n, comms[i], kStream));
    OKC(comms[i], ncclBroadcast(src[i].data(), bc[i].data(), count, ncclInt32, n - 1, comms[i], kStream));
  }
  OKC(nullptr, ncclGroupEnd());
  for (int i = 0; i < n; ++i) {
    EXPECTL(ring[i] == src[(i + n - 1) % n], "InitAll ring: comms[%d] did not receive rank %d's data", i,
            (i + n - 1) % n);
    EXPECTL(bc[i] == src[n - 1], "InitAll broadcast: comms[%d] wrong", i);
  }
  for (int i = 0; i < n; ++i) OKC(comms[i], ncclCommDestroy(comms[i]));
}

// NCCL's one-thread, several-ranks init: ncclCommInitRank for each rank inside a group.
void caseInitRankGroup(Ctx& c) {
  const int n = c.nranks;
  // All ranks are in this process: if init does not wait for the group's end, the first
  // call waits for ranks that never come; let it say so after 3 s, not the default.
  setenv("COLL_BOOTSTRAP_TIMEOUT_S", "3", 1);
  ncclUniqueId id;
  if (!OK(ncclGetUniqueId(&id))) return;
  std::vector<ncclComm_t> comms(n, nullptr);
  OKC(nullptr, ncclGroupStart());
  for (int i = 0; i < n; ++i) OKC(nullptr, ncclCommInitRank(&comms[i], n, id, i));
  if (!OKC(nullptr, ncclGroupEnd())) return;
  std::vector<std::vector<float>> buf(n, std::vector<float>(1000));
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < 1000; ++k) buf[i][k] = static_cast<float>(i + k);
  OKC(nullptr, ncclGroupStart());
  for (int i = 0; i < n; ++i)
    OKC(comms[i], ncclAllReduce(buf[i].data(), buf[i].data(), 1000, ncclFloat, ncclMax, comms[i], kStream));
  OKC(nullptr, ncclGroupEnd());
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < 1000; ++k)
      if (buf[i][k] != static_cast<float>(n - 1 + k)) {
        c.fail("group-initialised comms[%d]: max allreduce out[%zu] = %g", i, k, buf[i][k]);
        break;
      }
  for (int i = 0; i < n; ++i) OKC(comms[i], ncclCommDestroy(comms[i]));
}

// ncclCommSplit of every rank of an InitAll clique from one thread, inside a group.
void caseInitAllSplitGroup(Ctx& c) {
  const int n = c.nranks;
  std::vector<ncclComm_t> comms(n, nullptr), halves(n, nullptr);
  if (!OKC(nullptr, ncclCommInitAll(comms.data(), n, nullptr))) return;
  OKC(nullptr, ncclGroupStart());
  for (int i = 0; i < n; ++i) OKC(comms[i], ncclCommSplit(comms[i], i % 2, i, &halves[i], nullptr));
  if (OKC(nullptr, ncclGroupEnd())) {
    std::vector<int32_t> v(n);
    OKC(nullptr, ncclGroupStart());
    for (int i = 0; i < n; ++i) {
      v[i] = i;
      OKC(halves[i], ncclAllReduce(&v[i], &v[i], 1, ncclInt32, ncclSum, halves[i], kStream));
    }
    OKC(nullptr, ncclGroupEnd());
    for (int i = 0; i < n; ++i) {
      int want = 0;
      for (int j = i % 2; j < n; j += 2) want += j;
      EXPECTL(v[i] == want, "split half of comms[%d]: sum %d, want %d", i, v[i], want);
    }
    for (int i = 0; i < n; ++i)
      if (halves[i]) OKC(halves[i], ncclCommDestroy(halves[i]));
  }
  for (int i = 0; i < n; ++i) OKC(comms[i], ncclCommDestroy(comms[i]));
}

// A communicator of one rank: every collective is a copy or an identity.
void caseSingleRank(Ctx& c) {
  ncclUniqueId id;
  if (!OK(ncclGetUniqueId(&id))) return;
  ncclComm_t comm = nullptr;
  if (!OKC(nullptr, ncclCommInitRank(&comm, 1, id, 0))) return;
  const size_t count = 777;
  std::vector<int64_t> a(count), b(count, -1);
  for (size_t i = 0; i < count; ++i) a[i] = static_cast<int64_t>(i * i) - 5000;
  OKC(comm, ncclAllReduce(a.data(), b.data(), count, ncclInt64, ncclProd, comm, kStream));
  EXPECTL(a == b, "1-rank allreduce differs from its input");
  std::fill(b.begin(), b.end(), -1);
  OKC(comm, ncclAllGather(a.data(), b.data(), count, ncclInt64, comm, kStream));
  EXPECTL(a == b, "1-rank allgather");
  std::fill(b.begin(), b.end(), -1);
  OKC(comm, ncclReduceScatter(a.data(), b.data(), count, ncclInt64, ncclMin, comm, kStream));
  EXPECTL(a == b, "1-rank reduce-scatter");
  std::fill(b.begin(), b.end(), -1);
  OKC(comm, ncclAlltoAll(a.data(), b.data(), count, ncclInt64, comm, kStream));
  EXPECTL(a == b, "1-rank alltoall");
  std::fill(b.begin(), b.end(), -1);
  OKC(comm, ncclGather(a.data(), b.data(), count, ncclInt64, 0, comm, kStream));
  EXPECTL(a == b, "1-rank gather");
  std::fill(b.begin(), b.end(), -1);
  OKC(comm, ncclScatter(a.data(), b.data(), count, ncclInt64, 0, comm, kStream));
  EXPECTL(a == b, "1-rank scatter");
  std::fill(b.begin(), b.end(), -1);
  OKC(nullptr, ncclGroupStart());
  OKC(comm, ncclSend(a.data(), count, ncclInt64, 0, comm, kStream));
  OKC(comm, ncclRecv(b.data(), count, ncclInt64, 0, comm, kStream));
  OKC(nullptr, ncclGroupEnd());
  EXPECTL(a == b, "1-rank send/receive to self");
  OKC(comm, ncclCommDestroy(comm));
}

// ---------------------------------------------------------------------------------------
// Communicator cases: every rank runs the body with c.comm from ncclCommInitRank.

void caseCommBasics(Ctx& c) {
  int count = -1, rank = -1, dev = -2;
  OK(ncclCommCount(c.comm, &count));
  OK(ncclCommUserRank(c.comm, &rank));
  OK(ncclCommCuDevice(c.comm, &dev));
  EXPECTL(count == c.nranks, "ncclCommCount %d, want %d", count, c.nranks);
  EXPECTL(rank == c.rank, "ncclCommUserRank %d, want %d", rank, c.rank);
  EXPECTL(dev == -1, "ncclCommCuDevice %d on a host rank, want -1", dev);
  OK(pncclCommCount(c.comm, &count));
  ncclResult_t st = ncclInternalError;
  OK(ncclCommGetAsyncError(c.comm, &st));
  EXPECTL(st == ncclSuccess, "ncclCommGetAsyncError of a healthy comm: %s", resultName(st));
  EXPECTL(ncclGetLastError(c.comm) != nullptr, "ncclGetLastError(comm) is NULL");
  allreduceWorks(c, c.comm, "ncclCommInitRank comm");
  // pncclX names run the same operations.
  int32_t v = c.rank + 1;
  OK(pncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, c.comm, kStream));
  EXPECTL(v == c.nranks * (c.nranks + 1) / 2, "pncclAllReduce gave %d", v);
}

void caseInitConfig(Ctx& c) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  cfg.cgaClusterSize = 2;
  cfg.minCTAs = 1;
  cfg.maxCTAs = 2;
  cfg.splitShare = 1;
  cfg.trafficClass = 0;
  cfg.commName = "api-test";
  cfg.collnetEnable = 0;
  cfg.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  cfg.shrinkShare = 0;
  cfg.nvlsCTAs = 1;
  cfg.nChannelsPerNetPeer = 1;
  cfg.nvlinkCentricSched = 0;
  ncclComm_t comm = nullptr;
  if (OKC(nullptr, ncclCommInitRankConfig(&comm, c.nranks, c.id(1), c.rank, &cfg))) {
    allreduceWorks(c, comm, "configured comm");
    int rank = -1;
    OKC(comm, ncclCommUserRank(comm, &rank));
    EXPECTL(rank == c.rank, "user rank %d", rank);
    OKC(comm, ncclCommDestroy(comm));
  }
  comm = nullptr;
  if (OKC(nullptr, ncclCommInitRankConfig(&comm, c.nranks, c.id(2), c.rank, nullptr))) {
    allreduceWorks(c, comm, "comm of NULL config");
    OKC(comm, ncclCommDestroy(comm));
  }
  // Two communicators of the same ranks at once, used alternately.
  comm = nullptr;
  if (OKC(nullptr, pncclCommInitRank(&comm, c.nranks, c.id(3), c.rank))) {
    allreduceWorks(c, comm, "second comm");
    allreduceWorks(c, c.comm, "first comm");
    allreduceWorks(c, comm, "second comm again");
    OKC(comm, ncclCommDestroy(comm));
  }
}

void caseInitNonblocking(Ctx& c) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, c.nranks, c.id(1), c.rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    c.fail("non-blocking ncclCommInitRankConfig returned %s: %s", resultName(r), ncclGetLastError(nullptr));
    return;
  }
  if (comm == nullptr) {
    c.fail("non-blocking ncclCommInitRankConfig returned %s without setting *comm", resultName(r));
    return;
  }
  c.note("non-blocking init returned %s", resultName(r));
  ncclResult_t state = waitReady(comm, r);
  if (state != ncclSuccess) {
    c.fail("non-blocking init ended in %s: %s", resultName(state), ncclGetLastError(comm));
    ncclCommAbort(comm);
    return;
  }
  // Operations on a non-blocking communicator may return ncclInProgress too.
  std::vector<float> in(4099, 1.f + static_cast<float>(c.rank)), out(4099, 0.f);
  r = waitReady(comm, ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat, ncclSum, comm, kStream));
  if (OKC(comm, r))
    EXPECTL(out[4098] == static_cast<float>(c.nranks * (c.nranks + 1) / 2), "non-blocking comm allreduce %g",
            out[4098]);
  // A split of it, with a non-blocking config.
  ncclComm_t child = nullptr;
  r = ncclCommSplit(comm, 0, c.nranks - c.rank, &child, &cfg);
  if (r == ncclSuccess || r == ncclInProgress) {
    r = waitReady(child, r);
    if (OKC(comm, r) && child) {
      int rank = -1;
      OKC(child, ncclCommUserRank(child, &rank));
      EXPECTL(rank == c.nranks - 1 - c.rank, "non-blocking split: rank %d, want %d", rank, c.nranks - 1 - c.rank);
      int32_t v = 1;
      r = waitReady(child, ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, child, kStream));
      if (OKC(child, r)) EXPECTL(v == c.nranks, "non-blocking split allreduce %d", v);
      OKC(child, ncclCommDestroy(child));
    }
  } else {
    c.fail("non-blocking ncclCommSplit returned %s: %s", resultName(r), ncclGetLastError(comm));
  }
  // Finalize of a non-blocking communicator: ncclInProgress until quiescent.
  r = ncclCommFinalize(comm);
  EXPECTL(r == ncclSuccess || r == ncclInProgress, "non-blocking ncclCommFinalize returned %s", resultName(r));
  OKC(comm, waitReady(comm, r));
  OKC(comm, ncclCommDestroy(comm));
}

void caseInitScalable(Ctx& c) {
  ncclUniqueId ids[2] = {c.id(1), c.id(2)};
  ncclComm_t comm = nullptr;
  if (c.nranks >= 2 && OKC(nullptr, ncclCommInitRankScalable(&comm, c.nranks, c.rank, 2, ids, nullptr))) {
    allreduceWorks(c, comm, "scalable init, 2 ids");
    int rank = -1;
    OKC(comm, ncclCommUserRank(comm, &rank));
    EXPECTL(rank == c.rank, "scalable init: rank %d", rank);
    OKC(comm, ncclCommDestroy(comm));
  }
  // One id per rank, as large jobs do.
  std::vector<ncclUniqueId> all;
  for (int k = 0; k < c.nranks; ++k) all.push_back(c.id(4 + k));
  comm = nullptr;
  if (OKC(nullptr, ncclCommInitRankScalable(&comm, c.nranks, c.rank, c.nranks, all.data(), nullptr))) {
    allreduceWorks(c, comm, "scalable init, one id per rank");
    OKC(comm, ncclCommDestroy(comm));
  }
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.commName = "scalable";
  ncclUniqueId one = c.id(3);
  comm = nullptr;
  if (OKC(nullptr, pncclCommInitRankScalable(&comm, c.nranks, c.rank, 1, &one, &cfg))) {
    allreduceWorks(c, comm, "scalable init, 1 id");
    OKC(comm, ncclCommDestroy(comm));
  }
}

void caseFinalize(Ctx& c) {
  allreduceWorks(c, c.comm, "before finalize");
  ncclResult_t r = ncclCommFinalize(c.comm);
  EXPECTL(r == ncclSuccess || r == ncclInProgress, "ncclCommFinalize returned %s: %s", resultName(r),
          ncclGetLastError(c.comm));
  OK(waitReady(c.comm, r));
  OK(ncclCommDestroy(c.comm));
  c.comm = nullptr;
}

void caseAbort(Ctx& c) {
  allreduceWorks(c, c.comm, "before abort");
  OK(ncclCommAbort(c.comm));
  c.comm = nullptr;
}

// ncclCommAbort from another thread ends a call that waits for peers that never come.
void caseAbortUnblocks(Ctx& c) {
  if (c.nranks < 2) return;  // needs a peer
  if (c.rank == 0) {
    double abortedAt = 0;
    std::thread aborter([&] {
      sleepMs(500);
      abortedAt = nowS();
      ncclResult_t r = ncclCommAbort(c.comm);
      EXPECTL(r == ncclSuccess, "ncclCommAbort from another thread returned %s", resultName(r));
    });
    std::vector<float> buf(1024, 1.f);
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, c.comm, kStream);
    double took = nowS() - abortedAt;
    aborter.join();
    EXPECTL(r != ncclSuccess, "an allreduce no peer joined succeeded");
    EXPECTL(took < 5, "the aborted allreduce returned %.1f s after ncclCommAbort", took);
    c.note("allreduce ended %.2f s after the abort with %s", took, resultName(r));
    c.comm = nullptr;
    c.barrier();
  } else {
    c.barrier();  // rank 0's call has returned
    OK(ncclCommAbort(c.comm));
    c.comm = nullptr;
  }
}

// A rank that aborts (and then exits, as a process would) while the others wait in an
// allreduce for it: they fail within a second, over shared memory as over TCP (a rank
// that left is a rank whose data will never come, not one to wait a grace period for).
void casePeerAborts(Ctx& c) {
  const int n = c.nranks;
  if (n < 2) return;
  if (c.rank == n - 1) {
    sleepMs(300);  // the others are waiting in their allreduce by now
    const double at = nowS();
    long long bits;
    std::memcpy(&bits, &at, sizeof(at));
    c.sh->slot[3].store(bits);
    c.sh->slotReady[3].store(1);
    OK(ncclCommAbort(c.comm));
    c.comm = nullptr;
    c.barrier();
    return;
  }
  std::vector<float> buf(1 << 18, 1.f);
  ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, c.comm, kStream);
  const double end = nowS();
  while (!c.sh->slotReady[3].load()) sleepMs(1);
  const long long bits = c.sh->slot[3].load();
  double at = 0;
  std::memcpy(&at, &bits, sizeof(at));
  EXPECTL(r != ncclSuccess, "an allreduce whose rank %d aborted succeeded", n - 1);
  EXPECTL(end - at < 1.0, "the allreduce failed %.2f s after rank %d aborted (want < 1 s)", end - at, n - 1);
  EXPECTL(mentions(ncclGetLastError(c.comm), std::to_string(n - 1).c_str()), "the error does not name rank %d: %s",
          n - 1, ncclGetLastError(c.comm));
  c.note("failed %.2f s after the abort: %s", end - at, ncclGetLastError(c.comm));
  OK(ncclCommAbort(c.comm));
  c.comm = nullptr;
  c.barrier();
}

void caseSplit(Ctx& c) {
  const int n = c.nranks;
  // Two colors, keys reversing the order.
  ncclComm_t half = nullptr;
  if (OK(ncclCommSplit(c.comm, c.rank % 2, n - c.rank, &half, nullptr))) {
    int members = 0, myIndex = 0, sum = 0;
    for (int r = n - 1; r >= 0; --r)
      if (r % 2 == c.rank % 2) {
        if (r > c.rank) ++myIndex;
        ++members;
        sum += r;
      }
    int count = -1, rank = -1;
    OKC(half, ncclCommCount(half, &count));
    OKC(half, ncclCommUserRank(half, &rank));
    EXPECTL(count == members && rank == myIndex, "split by parity: count %d rank %d, want %d %d", count, rank, members,
            myIndex);
    allreduceWorks(c, half, c.rank, members, sum, "split by parity");
    // A split of the split, with a config.
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 1;
    cfg.commName = "split-of-split";
    ncclComm_t again = nullptr;
    if (OKC(half, ncclCommSplit(half, 0, 0, &again, &cfg)) && again) {
      allreduceWorks(c, again, c.rank, members, sum, "split of split");
      OKC(again, ncclCommDestroy(again));
    }
    OKC(half, ncclCommDestroy(half));
  }
  // Rank 0 out (NCCL_SPLIT_NOCOLOR), the others in one communicator keyed by rank.
  ncclComm_t rest = reinterpret_cast<ncclComm_t>(0x1);
  int color = c.rank == 0 ? NCCL_SPLIT_NOCOLOR : 7;
  if (OK(pncclCommSplit(c.comm, color, c.rank, &rest, nullptr))) {
    if (c.rank == 0) {
      EXPECTL(rest == nullptr, "NCCL_SPLIT_NOCOLOR gave a communicator %p", static_cast<void*>(rest));
    } else if (rest == nullptr) {
      c.fail("split without rank 0 gave NULL");
    } else {
      int rank = -1;
      OKC(rest, ncclCommUserRank(rest, &rank));
      EXPECTL(rank == c.rank - 1, "split without rank 0: rank %d", rank);
      allreduceWorks(c, rest, c.rank, n - 1, n * (n - 1) / 2, "split without rank 0");
      OKC(rest, ncclCommDestroy(rest));
    }
  }
  // Every rank NOCOLOR.
  ncclComm_t none = reinterpret_cast<ncclComm_t>(0x1);
  if (OK(ncclCommSplit(c.comm, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr)))
    EXPECTL(none == nullptr, "all NCCL_SPLIT_NOCOLOR gave a communicator");
  allreduceWorks(c, c.comm, "parent after splits");
}

void caseShrink(Ctx& c) {
  const int n = c.nranks;
  if (n < 2) return;
  // Rank n-1 leaves; the others shrink a healthy parent.
  if (c.rank < n - 1) {
    int exclude = n - 1;
    ncclComm_t small = nullptr;
    if (OK(ncclCommShrink(c.comm, &exclude, 1, &small, nullptr, NCCL_SHRINK_DEFAULT)) && small) {
      int count = -1, rank = -1;
      OKC(small, ncclCommCount(small, &count));
      OKC(small, ncclCommUserRank(small, &rank));
      EXPECTL(count == n - 1 && rank == c.rank, "shrunk comm: count %d rank %d", count, rank);
      allreduceWorks(c, small, c.rank, n - 1, (n - 1) * (n - 2) / 2, "shrunk comm");
      // Shrink again, excluding the first rank, with a config.
      if (n >= 3 && c.rank > 0) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.commName = "shrunk-twice";
        cfg.blocking = 0;
        int first = 0;
        ncclComm_t smaller = nullptr;
        ncclResult_t r = pncclCommShrink(small, &first, 1, &smaller, &cfg, NCCL_SHRINK_DEFAULT);
        if (OKC(small, waitReady(smaller, r)) && smaller) {
          OKC(smaller, ncclCommUserRank(smaller, &rank));
          EXPECTL(rank == c.rank - 1, "shrunk twice: rank %d, want %d", rank, c.rank - 1);
          allreduceWorks(c, smaller, c.rank, n - 2, (n - 1) * (n - 2) / 2 - 0, "shrunk twice");
          OKC(smaller, ncclCommDestroy(smaller));
        }
      }
      OKC(small, ncclCommDestroy(small));
    }
  }
  c.barrier();
  allreduceWorks(c, c.comm, "parent after shrink");
}

void caseRevoke(Ctx& c) {
  const int n = c.nranks;
  allreduceWorks(c, c.comm, "before revoke");
  BADARG(c.comm, "flag", ncclCommRevoke(c.comm, 1));
  allreduceWorks(c, c.comm, "after a refused revoke");
  OK(ncclCommRevoke(c.comm, NCCL_REVOKE_DEFAULT));
  ncclResult_t st = ncclSuccess;
  double deadline = nowS() + 30;
  do {
    OK(ncclCommGetAsyncError(c.comm, &st));
  } while (st == ncclInProgress && nowS() < deadline && (sleepMs(1), true));
  c.note("ncclCommGetAsyncError after revoke: %s", resultName(st));
  std::vector<float> in(64, 1.f), out(64, -7.f);
  ncclResult_t r = ncclAllReduce(in.data(), out.data(), 64, ncclFloat, ncclSum, c.comm, kStream);
  EXPECTL(r != ncclSuccess, "allreduce on a revoked comm succeeded");
  c.note("allreduce on a revoked comm: %s: %s", resultName(r), ncclGetLastError(c.comm));
  EXPECTL(out[0] == -7.f, "failed allreduce wrote its output");
  r = ncclSend(in.data(), 64, ncclFloat, (c.rank + 1) % n, c.comm, kStream);
  EXPECTL(r != ncclSuccess, "send on a revoked comm succeeded");
  r = ncclBroadcast(in.data(), out.data(), 64, ncclFloat, 0, c.comm, kStream);
  EXPECTL(r != ncclSuccess, "broadcast on a revoked comm succeeded");
  // nccl.h: once revoked and quiescent, "management operations (destroy, split, shrink)
  // can proceed safely".
  ncclComm_t dup = nullptr;
  r = ncclCommSplit(c.comm, 0, c.rank, &dup, nullptr);
  EXPECTL(r == ncclSuccess,
          "ncclCommSplit of a revoked comm returned %s: %s (nccl.h: split may proceed after "
          "revoke)",
          resultName(r), ncclGetLastError(c.comm));
  if (r == ncclSuccess && dup) {
    allreduceWorks(c, dup, "split of a revoked comm");
    OKC(dup, ncclCommDestroy(dup));
  }
  // The ranks that stay shrink the revoked communicator.
  if (c.rank < n - 1 || n == 1) {
    int exclude = n - 1;
    ncclComm_t small = nullptr;
    if (OK(ncclCommShrink(c.comm, &exclude, n > 1 ? 1 : 0, &small, nullptr, NCCL_SHRINK_DEFAULT)) && small) {
      int m = n > 1 ? n - 1 : 1;
      allreduceWorks(c, small, c.rank, m, m * (m - 1) / 2, "shrunk revoked comm");
      OKC(small, ncclCommDestroy(small));
    }
  }
}

// ncclCommRevoke from another thread ends a call that waits for peers that never come.
void caseRevokeInflight(Ctx& c) {
  if (c.nranks < 2) return;  // needs a peer
  if (c.rank == 0) {
    double revokedAt = 0;
    std::thread revoker([&] {
      sleepMs(500);
      revokedAt = nowS();
      ncclResult_t r = ncclCommRevoke(c.comm, NCCL_REVOKE_DEFAULT);
      EXPECTL(r == ncclSuccess, "ncclCommRevoke from another thread returned %s", resultName(r));
    });
    std::vector<float> buf(1024, 1.f);
    ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat, ncclSum, c.comm, kStream);
    double took = nowS() - revokedAt;
    revoker.join();
    EXPECTL(r != ncclSuccess, "an allreduce no peer joined succeeded");
    EXPECTL(took < 5, "the revoked allreduce returned %.1f s after ncclCommRevoke", took);
    c.note("allreduce ended %.2f s after the revoke with %s: %s", took, resultName(r), ncclGetLastError(c.comm));
    c.barrier();
  } else {
    c.barrier();
    OK(ncclCommRevoke(c.comm, NCCL_REVOKE_DEFAULT));
  }
  // Everyone shrinks it to all ranks but the last.
  const int n = c.nranks;
  if (n >= 2 && c.rank < n - 1) {
    int exclude = n - 1;
    ncclComm_t small = nullptr;
    if (OK(ncclCommShrink(c.comm, &exclude, 1, &small, nullptr, NCCL_SHRINK_DEFAULT)) && small) {
      allreduceWorks(c, small, c.rank, n - 1, (n - 1) * (n - 2) / 2, "shrunk after in-flight revoke");
      OKC(small, ncclCommDestroy(small));
    }
  }
}

// A rank dies after init (SIGKILL, or _exit without destroying anything); the survivors'
// next collective fails within a bounded time, they shrink with NCCL_SHRINK_ABORT and
// carry on.
void killCase(Ctx& c, int victim, bool viaExit, bool abortOld) {
  const int n = c.nranks;
  allreduceWorks(c, c.comm, "before the kill");
  // Every rank finishes that allreduce before the victim dies: a death fails the
  // operations in flight on every rank, even those that no longer need the dead rank
  // (the victim, done first, used to die while rank 2 still waited for rank 1).
  c.barrier();
  if (c.rank == victim) {
    c.sh->expectedDeath[victim].store(1);
    if (viaExit) _exit(0);
    raise(SIGKILL);
  }
  std::vector<float> in(4096, 1.f), out(4096, -3.f);
  double t0 = nowS();
  ncclResult_t r = ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat, ncclSum, c.comm, kStream);
  double took = nowS() - t0;
  const char* last = ncclGetLastError(c.comm);
  if (r == ncclSuccess) {
    c.fail("allreduce with rank %d dead succeeded", victim);
  } else {
    c.note("allreduce with rank %d dead: %s after %.2f s: %s", victim, resultName(r), took, last);
    EXPECTL(mentions(last, std::to_string(victim).c_str()), "the error does not name dead rank %d: \"%s\"", victim,
            last);
  }
  EXPECTL(took < 30, "the survivors' allreduce took %.1f s to fail (bug: should be seconds)", took);
  ncclResult_t st = ncclSuccess;
  OK(ncclCommGetAsyncError(c.comm, &st));
  EXPECTL(st != ncclSuccess && st != ncclInProgress, "ncclCommGetAsyncError after a peer died: %s", resultName(st));
  int exclude = victim;
  ncclComm_t small = nullptr;
  t0 = nowS();
  if (OK(ncclCommShrink(c.comm, &exclude, 1, &small, nullptr, NCCL_SHRINK_ABORT)) && small) {
    took = nowS() - t0;
    c.note("ncclCommShrink(NCCL_SHRINK_ABORT) took %.2f s", took);
    EXPECTL(took < 30, "ncclCommShrink took %.1f s", took);
    int count = -1, rank = -1;
    OKC(small, ncclCommCount(small, &count));
    OKC(small, ncclCommUserRank(small, &rank));
    int want = c.rank - (c.rank > victim ? 1 : 0);
    EXPECTL(count == n - 1 && rank == want, "shrunk comm: count %d rank %d, want %d %d", count, rank, n - 1, want);
    allreduceWorks(c, small, c.rank, n - 1, n * (n - 1) / 2 - victim, "survivors' comm");
    allreduceWorks(c, small, c.rank, n - 1, n * (n - 1) / 2 - victim, "survivors' comm again", 300000);
    OKC(small, ncclCommDestroy(small));
  }
  if (abortOld) OK(ncclCommAbort(c.comm));
  else OK(ncclCommDestroy(c.comm));
  c.comm = nullptr;
}
void caseKillLast(Ctx& c) { killCase(c, c.nranks - 1, false, false); }

// A rank killed while every rank loops on 4 MiB allreduces (data in flight): each
// survivor's current or next call fails, then they shrink with NCCL_SHRINK_ABORT.
void caseKillMidOp(Ctx& c) {
  const int n = c.nranks, victim = n / 2;
  const size_t count = 1 << 20;
  std::vector<float> in(count, 1.f), out(count);
  if (c.rank == victim) {
    c.sh->expectedDeath[victim].store(1);
    std::thread([] {
      sleepMs(300);
      raise(SIGKILL);
    }).detach();
  }
  double t0 = nowS(), failedAt = 0;
  int iters = 0;
  ncclResult_t r = ncclSuccess;
  while (nowS() - t0 < 60) {
    r = ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream);
    if (r != ncclSuccess) {
      failedAt = nowS();
      break;
    }
    ++iters;
  }
  if (c.rank == victim) {  // still alive after 60 s?
    c.fail("the victim was not killed");
    return;
  }
  EXPECTL(r != ncclSuccess, "allreduces kept succeeding for 60 s after rank %d was killed", victim);
  EXPECTL(failedAt - t0 < 30, "the first failure came %.1f s after the start (the kill is at 0.3 s)", failedAt - t0);
  c.note("%d allreduces, then %s after %.2f s: %s", iters, resultName(r), failedAt - t0, ncclGetLastError(c.comm));
  int exclude = victim;
  ncclComm_t small = nullptr;
  double s0 = nowS();
  if (OK(ncclCommShrink(c.comm, &exclude, 1, &small, nullptr, NCCL_SHRINK_ABORT)) && small) {
    EXPECTL(nowS() - s0 < 30, "ncclCommShrink took %.1f s", nowS() - s0);
    allreduceWorks(c, small, c.rank, n - 1, n * (n - 1) / 2 - victim, "survivors' comm", 300000);
    OKC(small, ncclCommDestroy(small));
  }
  OK(ncclCommAbort(c.comm));
  c.comm = nullptr;
}

// Init where one rank never comes: the others fail within COLL_BOOTSTRAP_TIMEOUT_S (set
// to 3 s here), naming it.
void caseInitMissingRank(Ctx& c) {
  setenv("COLL_BOOTSTRAP_TIMEOUT_S", "3", 1);
  const int n = c.nranks, missing = n - 1;
  ncclUniqueId id = c.id(1);
  if (c.rank == missing) return;
  ncclComm_t comm = nullptr;
  double t0 = nowS();
  ncclResult_t r = ncclCommInitRank(&comm, n, id, c.rank);
  double took = nowS() - t0;
  const char* last = ncclGetLastError(nullptr);
  EXPECTL(r != ncclSuccess, "init without rank %d succeeded", missing);
  EXPECTL(took < 20, "init without rank %d failed only after %.1f s", missing, took);
  EXPECTL(mentions(last, std::to_string(missing).c_str()), "the error does not name rank %d: \"%s\"", missing, last);
  c.note("init without rank %d: %s after %.1f s: %s", missing, resultName(r), took, last);
  if (r == ncclSuccess && comm) ncclCommDestroy(comm);
}

// ncclCommAbort of a non-blocking communicator whose init cannot finish (a rank never
// comes): returns promptly, and nothing is left running.
void caseAbortDuringInit(Ctx& c) {
  const int n = c.nranks;
  ncclUniqueId id = c.id(1);
  if (c.rank == n - 1) return;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, c.rank, &cfg);
  EXPECTL(r == ncclInProgress, "non-blocking init without rank %d returned %s", n - 1, resultName(r));
  if (comm == nullptr) return;
  sleepMs(300);
  ncclResult_t st = ncclSuccess;
  OKC(comm, ncclCommGetAsyncError(comm, &st));
  EXPECTL(st == ncclInProgress, "init without rank %d: state %s after 0.3 s", n - 1, resultName(st));
  c.barrier(n - 1);  // no rank aborts (and ends the rendezvous for all) before all looked
  double t0 = nowS();
  OKC(comm, ncclCommAbort(comm));
  EXPECTL(nowS() - t0 < 2, "ncclCommAbort during init took %.1f s", nowS() - t0);
}

// Two communicators of the same ranks, each driven by its own thread at once (NCCL
// allows different communicators on different threads).
void caseTwoCommsThreads(Ctx& c) {
  const int n = c.nranks;
  ncclComm_t dup = nullptr;
  if (!OK(ncclCommSplit(c.comm, 0, c.rank, &dup, nullptr)) || !dup) return;
  auto loopAllReduce = [&](ncclComm_t comm, int salt) {
    const size_t count = 20011;
    std::vector<int32_t> in(count), out(count);
    for (int it = 0; it < 30; ++it) {
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(c.rank * salt + it + i % 13);
      ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, kStream);
      if (r != ncclSuccess) {
        c.fail("concurrent comm %d: allreduce %d returned %s: %s", salt, it, resultName(r), ncclGetLastError(comm));
        return;
      }
      for (size_t i = 0; i < count; i += 101)
        if (out[i] != static_cast<int32_t>(salt * n * (n - 1) / 2 + n * (it + static_cast<int>(i % 13)))) {
          c.fail("concurrent comm %d: allreduce %d [%zu] = %d", salt, it, i, out[i]);
          return;
        }
    }
  };
  auto loopAllGather = [&](ncclComm_t comm) {
    const size_t count = 7001;
    std::vector<double> in(count), out(count * n);
    for (int it = 0; it < 30; ++it) {
      for (size_t i = 0; i < count; ++i) in[i] = c.rank + it * 0.5 + static_cast<double>(i);
      ncclResult_t r = ncclAllGather(in.data(), out.data(), count, ncclDouble, comm, kStream);
      if (r != ncclSuccess) {
        c.fail("concurrent allgather %d returned %s: %s", it, resultName(r), ncclGetLastError(comm));
        return;
      }
      for (int q = 0; q < n; ++q)
        if (out[q * count + count - 1] != q + it * 0.5 + static_cast<double>(count - 1)) {
          c.fail("concurrent allgather %d: block %d wrong", it, q);
          return;
        }
    }
  };
  std::thread a([&] { loopAllReduce(c.comm, 3); });
  std::thread b([&] {
    loopAllGather(dup);
    loopAllReduce(dup, 5);
  });
  a.join();
  b.join();
  OKC(dup, ncclCommDestroy(dup));
}

// Symmetric windows of different sizes on different ranks: refused on every rank, no hang.
void caseWindowMismatch(Ctx& c) {
  if (c.nranks < 2) return;  // needs a peer
  void* buf = nullptr;
  if (!OK(ncclMemAlloc(&buf, 65536)) || !buf) return;
  ncclWindow_t win = nullptr;
  ncclResult_t r = ncclCommWindowRegister(c.comm, buf, 4096 * static_cast<size_t>(c.rank + 1), &win,
                                          NCCL_WIN_COLL_SYMMETRIC);
  EXPECTL(r != ncclSuccess, "symmetric windows of different sizes were accepted");
  c.note("symmetric windows of different sizes: %s: %s", resultName(r), ncclGetLastError(c.comm));
  if (r == ncclSuccess && win) ncclCommWindowDeregister(c.comm, win);
  OK(ncclMemFree(buf));
}
void caseKillRoot(Ctx& c) { killCase(c, 0, true, true); }

// NCCL_COMM_ID: every process makes the same id from the address.
// A loopback port free now, below the kernel's ephemeral range: a port from that range
// could be handed to another socket's connect() before the root binds it.
long long freeFixedPort() {
  int low = 32768, high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  const int span = std::max(1000, std::min(low - 1024, 20000));
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = low - 1 -
                     static_cast<int>((static_cast<unsigned>(getpid()) * 7919u + attempt * 104729u) %
                                      static_cast<unsigned>(span));
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(s);
    if (ok) return port;
  }
  return 0;
}

void caseCommIdEnv(Ctx& c) {
  long long port = c.rank == 0 ? freeFixedPort() : 0;
  port = c.share(0, port);
  if (port == 0) {
    c.fail("no free loopback port below the ephemeral range");
    return;
  }
  setenv("NCCL_COMM_ID", format("127.0.0.1:%lld", port).c_str(), 1);
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  if (OKC(nullptr, ncclGetUniqueId(&id)) && OKC(nullptr, ncclCommInitRank(&comm, c.nranks, id, c.rank))) {
    allreduceWorks(c, comm, "NCCL_COMM_ID comm");
    OKC(comm, ncclCommDestroy(comm));
  }
  unsetenv("NCCL_COMM_ID");
}

// Every type x op through allreduce, reduce and reduce-scatter, out of place and in
// place, with values whose sums and products every type holds exactly (sums of at most
// 8 in magnitude, the largest integer range fp8e5m2 holds, for up to 8 ranks; products
// are powers of two), so results are exact except Avg of floats.
double inputValue(const TypeDesc& t, ncclRedOp_t op, int nranks, int rank, size_t i) {
  const size_t r = static_cast<size_t>(rank);
  if (op == ncclProd) {
    double v = (r + i) % 3 == 0 ? 2 : 1;
    if (t.kind != Kind::kUnsigned && (r + 2 * i) % 5 == 0) v = -v;
    return v;
  }
  const size_t span = nranks <= 4 ? 3 : 2;  // 0..2 (or 0..1) per rank
  if (t.kind == Kind::kUnsigned) return static_cast<double>((r * 5 + i * 3) % span);
  return static_cast<double>((r * 5 + i * 3) % (span + 1)) - 1;
}

double expected(const TypeDesc& t, ncclRedOp_t op, int nranks, size_t i) {
  double acc = inputValue(t, op, nranks, 0, i);
  for (int r = 1; r < nranks; ++r) {
    double v = inputValue(t, op, nranks, r, i);
    switch (op) {
      case ncclSum:
      case ncclAvg: acc += v; break;
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  if (op == ncclAvg) {
    if (t.kind == Kind::kFloat) acc /= nranks;
    else acc = static_cast<double>(static_cast<int64_t>(acc) / nranks);  // truncates toward zero
  }
  return acc;
}

bool closeEnough(const TypeDesc& t, ncclRedOp_t op, double got, double want) {
  if (t.kind != Kind::kFloat || op != ncclAvg) return got == want;
  return std::fabs(got - want) <= 2 * t.eps * std::max(1.0, std::fabs(want)) + 1e-12;
}

const char* opName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

void caseReduceOps(Ctx& c) {
  const int n = c.nranks;
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  for (const TypeDesc& t : kTypes) {
    for (ncclRedOp_t op : ops) {
      std::vector<size_t> counts = {1, 13, 1000};
      if (op == ncclSum) counts = {0, 1, 13, 1000, 100003};
      for (size_t count : counts) {
        const size_t bytes = count * t.size;
        Bytes in(bytes + 1), out(bytes + 1, kSentinel);
        for (size_t i = 0; i < count; ++i) setValue(t.type, in.data(), i, inputValue(t, op, n, c.rank, i));
        auto checkOut = [&](const unsigned char* buf, size_t first, size_t num, const char* coll, bool inPlace) {
          for (size_t i = 0; i < num; ++i) {
            double got = getValue(t.type, buf, i), want = roundTo(t.type, expected(t, op, n, first + i));
            if (!closeEnough(t, op, got, want)) {
              c.fail("%s %s %s count %zu%s: [%zu] = %g, want %g", coll, t.name, opName(op), count,
                     inPlace ? " in place" : "", first + i, got, want);
              return false;
            }
          }
          return true;
        };
        // Allreduce, out of place then in place.
        if (OK(ncclAllReduce(in.data(), out.data(), count, t.type, op, c.comm, kStream)))
          checkOut(out.data(), 0, count, "allreduce", false);
        EXPECTL(out[bytes] == kSentinel, "allreduce %s wrote past the end", t.name);
        Bytes io = in;
        if (OK(ncclAllReduce(io.data(), io.data(), count, t.type, op, c.comm, kStream)))
          checkOut(io.data(), 0, count, "allreduce", true);
        if (count > 1000) continue;  // the rest at small sizes only
        // Reduce to root 0 and to the last rank; non-roots pass recvbuff NULL.
        for (int root : {0, n - 1}) {
          std::fill(out.begin(), out.end(), kSentinel);
          void* recv = c.rank == root ? out.data() : nullptr;
          if (OK(ncclReduce(in.data(), recv, count, t.type, op, root, c.comm, kStream)) && c.rank == root)
            checkOut(out.data(), 0, count, "reduce", false);
          io = in;
          if (OK(ncclReduce(io.data(), io.data(), count, t.type, op, root, c.comm, kStream)) && c.rank == root)
            checkOut(io.data(), 0, count, "reduce", true);
        }
        // Reduce-scatter: rank r gets block r of the n-block input.
        Bytes big(bytes * n);
        for (int b = 0; b < n; ++b)
          for (size_t i = 0; i < count; ++i)
            setValue(t.type, big.data(), b * count + i, inputValue(t, op, n, c.rank, b * count + i));
        std::fill(out.begin(), out.end(), kSentinel);
        if (OK(ncclReduceScatter(big.data(), out.data(), count, t.type, op, c.comm, kStream)))
          checkOut(out.data(), c.rank * count, count, "reduce-scatter", false);
        EXPECTL(out[bytes] == kSentinel, "reduce-scatter %s wrote past the end", t.name);
        if (OK(ncclReduceScatter(big.data(), big.data() + c.rank * bytes, count, t.type, op, c.comm, kStream)))
          checkOut(big.data() + c.rank * bytes, c.rank * count, count, "reduce-scatter", true);
      }
    }
  }
}

// Integer sums that wrap, and Avg of integers (truncation toward zero).
void caseIntegerEdges(Ctx& c) {
  const int n = c.nranks;
  int8_t i8 = 100;
  OK(ncclAllReduce(&i8, &i8, 1, ncclInt8, ncclSum, c.comm, kStream));
  EXPECTL(i8 == static_cast<int8_t>(100 * n), "int8 sum wraps to %d, want %d", i8, static_cast<int8_t>(100 * n));
  uint32_t u32 = 0xffffffffu;
  OK(ncclAllReduce(&u32, &u32, 1, ncclUint32, ncclSum, c.comm, kStream));
  EXPECTL(u32 == static_cast<uint32_t>(0xffffffffull * n), "uint32 sum %u", u32);
  int64_t big = INT64_MAX - c.rank;
  OK(ncclAllReduce(&big, &big, 1, ncclInt64, ncclMax, c.comm, kStream));
  EXPECTL(big == INT64_MAX, "int64 max %" PRId64, big);
  uint64_t ubig = UINT64_MAX - static_cast<uint64_t>(c.rank);
  OK(ncclAllReduce(&ubig, &ubig, 1, ncclUint64, ncclMin, c.comm, kStream));
  EXPECTL(ubig == UINT64_MAX - static_cast<uint64_t>(n - 1), "uint64 min %" PRIu64, ubig);
  int32_t neg = -(c.rank + 1);
  OK(ncclAllReduce(&neg, &neg, 1, ncclInt32, ncclAvg, c.comm, kStream));
  int32_t want = -(n * (n + 1) / 2) / n;
  EXPECTL(neg == want, "int32 avg of -1..-%d = %d, want %d", n, neg, want);
}

// Every type through the copying collectives, at counts 0, 1, odd and large, roots 0 and
// last, in place per nccl.h.
void caseCopyOps(Ctx& c) {
  const int n = c.nranks, me = c.rank;
  int salt = 0;
  for (const TypeDesc& t : kTypes) {
    const std::vector<size_t> counts = {0, 1, 13, 100003};
    for (size_t count : counts) {
      ++salt;
      const size_t bytes = count * t.size;
      auto tag = [&](const char* what, int root, bool inPlace) {
        return format("%s %s count %zu%s%s", what, t.name, count, root >= 0 ? format(" root %d", root).c_str() : "",
                      inPlace ? " in place" : "");
      };
      auto verify = [&](const unsigned char* p, int src, int blk, const std::string& what) {
        size_t bad = checkPattern(p, bytes, src, blk, salt);
        if (bad != SIZE_MAX) c.fail("%s: byte %zu of rank %d's block %d wrong", what.c_str(), bad, src, blk);
      };
      // Broadcast and Bcast.
      for (int root : {0, n - 1}) {
        Bytes send(bytes), recv(bytes + 1, kSentinel);
        fillPattern(send.data(), bytes, me, 0, salt);
        if (OK(ncclBroadcast(send.data(), recv.data(), count, t.type, root, c.comm, kStream)))
          verify(recv.data(), root, 0, tag("broadcast", root, false));
        EXPECTL(recv[bytes] == kSentinel, "%s wrote past the end", tag("broadcast", root, false).c_str());
        Bytes io(bytes);
        fillPattern(io.data(), bytes, me, 0, salt);
        if (OK(ncclBroadcast(io.data(), io.data(), count, t.type, root, c.comm, kStream)))
          verify(io.data(), root, 0, tag("broadcast", root, true));
        fillPattern(io.data(), bytes, me, 0, salt);
        if (OK(ncclBcast(io.data(), count, t.type, root, c.comm, kStream)))
          verify(io.data(), root, 0, tag("bcast", root, true));
      }
      // Allgather.
      {
        Bytes send(bytes), recv(bytes * n + 1, kSentinel);
        fillPattern(send.data(), bytes, me, 0, salt);
        if (OK(ncclAllGather(send.data(), recv.data(), count, t.type, c.comm, kStream)))
          for (int r = 0; r < n; ++r) verify(recv.data() + r * bytes, r, 0, tag("allgather", -1, false));
        EXPECTL(recv[bytes * n] == kSentinel, "allgather wrote past the end");
        Bytes io(bytes * n, kSentinel);
        fillPattern(io.data() + me * bytes, bytes, me, 0, salt);
        if (OK(ncclAllGather(io.data() + me * bytes, io.data(), count, t.type, c.comm, kStream)))
          for (int r = 0; r < n; ++r) verify(io.data() + r * bytes, r, 0, tag("allgather", -1, true));
      }
      // Alltoall: block j of rank i's input goes to rank j at block i.
      {
        Bytes send(bytes * n), recv(bytes * n + 1, kSentinel);
        for (int j = 0; j < n; ++j) fillPattern(send.data() + j * bytes, bytes, me, j, salt);
        if (OK(ncclAlltoAll(send.data(), recv.data(), count, t.type, c.comm, kStream)))
          for (int i = 0; i < n; ++i) verify(recv.data() + i * bytes, i, me, tag("alltoall", -1, false));
        EXPECTL(recv[bytes * n] == kSentinel, "alltoall wrote past the end");
        if (OK(ncclAlltoAll(send.data(), send.data(), count, t.type, c.comm, kStream)))
          for (int i = 0; i < n; ++i) verify(send.data() + i * bytes, i, me, tag("alltoall", -1, true));
      }
      for (int root : {0, n - 1}) {
        // Gather: non-roots pass recvbuff NULL; in place on the root is sendbuff ==
        // recvbuff + root*count.
        {
          Bytes send(bytes), recv(bytes * n + 1, kSentinel);
          fillPattern(send.data(), bytes, me, 1, salt);
          if (OK(ncclGather(send.data(), me == root ? recv.data() : nullptr, count, t.type, root, c.comm, kStream)) &&
              me == root) {
            for (int r = 0; r < n; ++r) verify(recv.data() + r * bytes, r, 1, tag("gather", root, false));
            EXPECTL(recv[bytes * n] == kSentinel, "gather wrote past the end");
          }
          Bytes io(bytes * n, kSentinel);
          fillPattern(io.data() + (me == root ? root * bytes : 0), bytes, me, 1, salt);
          const void* sendp = me == root ? io.data() + root * bytes : io.data();
          if (OK(ncclGather(sendp, me == root ? io.data() : nullptr, count, t.type, root, c.comm, kStream)) &&
              me == root)
            for (int r = 0; r < n; ++r) verify(io.data() + r * bytes, r, 1, tag("gather", root, true));
        }
        // Scatter: non-roots pass sendbuff NULL; in place on the root is recvbuff ==
        // sendbuff + root*count.
        {
          Bytes send(bytes * n), recv(bytes + 1, kSentinel);
          for (int j = 0; j < n; ++j) fillPattern(send.data() + j * bytes, bytes, root, j + 2, salt);
          if (OK(ncclScatter(me == root ? send.data() : nullptr, recv.data(), count, t.type, root, c.comm, kStream)))
            verify(recv.data(), root, me + 2, tag("scatter", root, false));
          EXPECTL(recv[bytes] == kSentinel, "scatter wrote past the end");
          if (me == root) {
            if (OK(ncclScatter(send.data(), send.data() + root * bytes, count, t.type, root, c.comm, kStream))) {
              for (int j = 0; j < n; ++j) verify(send.data() + j * bytes, root, j + 2, tag("scatter", root, true));
            }
          } else {
            Bytes mine(bytes, kSentinel);
            if (OK(ncclScatter(nullptr, mine.data(), count, t.type, root, c.comm, kStream)))
              verify(mine.data(), root, me + 2, tag("scatter", root, true));
          }
        }
      }
      // Send/receive: a ring in a group, and to self in a group.
      {
        Bytes send(bytes), recv(bytes + 1, kSentinel), self(bytes, kSentinel);
        fillPattern(send.data(), bytes, me, 9, salt);
        OK(ncclGroupStart());
        OK(ncclSend(send.data(), count, t.type, (me + 1) % n, c.comm, kStream));
        OK(ncclRecv(recv.data(), count, t.type, (me + n - 1) % n, c.comm, kStream));
        OK(ncclSend(send.data(), count, t.type, me, c.comm, kStream));
        OK(ncclRecv(self.data(), count, t.type, me, c.comm, kStream));
        if (OK(ncclGroupEnd())) {
          verify(recv.data(), (me + n - 1) % n, 9, tag("send/recv ring", -1, false));
          verify(self.data(), me, 9, tag("send/recv to self", -1, false));
        }
        EXPECTL(recv[bytes] == kSentinel, "recv wrote past the end");
      }
    }
  }
  // Send/receive outside a group, in pairs (even ranks send first).
  const size_t count = 50001;
  std::vector<int32_t> a(count), b(count, -1);
  for (size_t i = 0; i < count; ++i) a[i] = static_cast<int32_t>(me * 100000 + i);
  int peer = me ^ 1;
  if (peer < n) {
    if (me % 2 == 0) {
      OK(ncclSend(a.data(), count, ncclInt32, peer, c.comm, kStream));
      OK(ncclRecv(b.data(), count, ncclInt32, peer, c.comm, kStream));
    } else {
      OK(ncclRecv(b.data(), count, ncclInt32, peer, c.comm, kStream));
      OK(ncclSend(a.data(), count, ncclInt32, peer, c.comm, kStream));
    }
    EXPECTL(b[0] == peer * 100000 && b[count - 1] == static_cast<int32_t>(peer * 100000 + count - 1),
            "ungrouped send/recv from %d: %d ... %d", peer, b[0], b[count - 1]);
  }
}

// Several operations in one group, nested groups, and a group over two communicators.
void caseGroup(Ctx& c) {
  const int n = c.nranks, me = c.rank;
  const size_t count = 10007;
  std::vector<float> ar(count), bcast(count), gathered(count * n, -1.f), ring(count, -1.f);
  std::vector<int64_t> red(count), rs(count * n), rsOut(count, -1);
  for (size_t i = 0; i < count; ++i) {
    ar[i] = static_cast<float>(me + i % 5);
    bcast[i] = me == 1 % n ? static_cast<float>(i) : -1.f;
    red[i] = me + 1;
  }
  for (size_t i = 0; i < count * n; ++i) rs[i] = static_cast<int64_t>(i);
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(me * 7 + i % 3);
  OK(ncclGroupStart());
  OK(ncclGroupStart());  // nested: everything runs at the outermost end
  OK(ncclAllReduce(ar.data(), ar.data(), count, ncclFloat, ncclSum, c.comm, kStream));
  OK(ncclBroadcast(bcast.data(), bcast.data(), count, ncclFloat, 1 % n, c.comm, kStream));
  OK(ncclGroupEnd());
  OK(ncclAllGather(mine.data(), gathered.data(), count, ncclFloat, c.comm, kStream));
  OK(ncclReduce(red.data(), red.data(), count, ncclInt64, ncclProd, 0, c.comm, kStream));
  OK(ncclReduceScatter(rs.data(), rsOut.data(), count, ncclInt64, ncclSum, c.comm, kStream));
  OK(ncclRecv(ring.data(), count, ncclFloat, (me + n - 1) % n, c.comm, kStream));
  OK(ncclSend(mine.data(), count, ncclFloat, (me + 1) % n, c.comm, kStream));
  if (!OK(ncclGroupEnd())) return;
  for (size_t i = 0; i < count; ++i) {
    float want = static_cast<float>(n * (n - 1) / 2 + n * static_cast<int>(i % 5));
    if (ar[i] != want) {
      c.fail("group allreduce [%zu] %g want %g", i, ar[i], want);
      break;
    }
  }
  for (size_t i = 0; i < count; ++i)
    if (bcast[i] != static_cast<float>(i)) {
      c.fail("group broadcast [%zu] %g", i, bcast[i]);
      break;
    }
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      if (gathered[r * count + i] != static_cast<float>(r * 7 + i % 3)) {
        c.fail("group allgather block %d [%zu] %g", r, i, gathered[r * count + i]);
        r = n;
        break;
      }
  if (me == 0) {
    int64_t prod = 1;
    for (int r = 0; r < n; ++r) prod *= r + 1;
    EXPECTL(red[0] == prod && red[count - 1] == prod, "group reduce prod %" PRId64 " want %" PRId64, red[0], prod);
  }
  for (size_t i = 0; i < count; ++i)
    if (rsOut[i] != static_cast<int64_t>(n * (me * count + i))) {
      c.fail("group reduce-scatter [%zu] %" PRId64, i, rsOut[i]);
      break;
    }
  int from = (me + n - 1) % n;
  EXPECTL(ring[count - 1] == static_cast<float>(from * 7 + (count - 1) % 3), "group recv from %d wrong", from);
  // One group over two communicators (the parent and a duplicate from a split).
  ncclComm_t dup = nullptr;
  if (OK(ncclCommSplit(c.comm, 0, me, &dup, nullptr)) && dup) {
    int32_t x = me, y = 10 * me;
    OK(ncclGroupStart());
    OK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, c.comm, kStream));
    OKC(dup, ncclAllReduce(&y, &y, 1, ncclInt32, ncclMax, dup, kStream));
    OK(ncclGroupEnd());
    EXPECTL(x == n * (n - 1) / 2 && y == 10 * (n - 1), "group over two comms: %d %d", x, y);
    OKC(dup, ncclCommDestroy(dup));
  }
  // An empty group.
  OK(ncclGroupStart());
  OK(ncclGroupEnd());
  allreduceWorks(c, c.comm, "after groups");
}

void caseSimulate(Ctx& c) {
  const size_t count = 1 << 20;
  std::vector<float> in(count, 1.f + static_cast<float>(c.rank)), out(count, -5.f);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECTL(sim.size == sizeof(ncclSimInfo_t) && sim.estimatedTime == NCCL_UNDEF_FLOAT, "NCCL_SIM_INFO_INITIALIZER");
  OK(ncclGroupStart());
  OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream));
  OK(ncclAllGather(in.data(), out.data(), count / c.nranks, ncclFloat, c.comm, kStream));
  if (OK(ncclGroupSimulateEnd(&sim))) {
    EXPECTL(sim.estimatedTime > 0 || c.nranks == 1, "estimatedTime %g for a 4 MiB allreduce and an allgather",
            sim.estimatedTime);
    c.note("estimatedTime %g us", sim.estimatedTime);
  }
  bool same = true;
  for (size_t i = 0; i < count; ++i) same = same && out[i] == -5.f;
  EXPECTL(same, "ncclGroupSimulateEnd ran the operations (output written)");
  // Nothing queued survives: the next real operation is the next one.
  allreduceWorks(c, c.comm, "after a simulated group");
  ncclSimInfo_t empty = NCCL_SIM_INFO_INITIALIZER;
  OK(ncclGroupStart());
  OK(pncclGroupSimulateEnd(&empty));
  c.note("empty group: estimatedTime %g", empty.estimatedTime);
  // A larger group is predicted to take longer.
  ncclSimInfo_t small = NCCL_SIM_INFO_INITIALIZER, large = NCCL_SIM_INFO_INITIALIZER;
  OK(ncclGroupStart());
  OK(ncclAllReduce(in.data(), out.data(), 1024, ncclFloat, ncclSum, c.comm, kStream));
  OK(ncclGroupSimulateEnd(&small));
  OK(ncclGroupStart());
  OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream));
  OK(ncclGroupSimulateEnd(&large));
  EXPECTL(large.estimatedTime > small.estimatedTime || c.nranks == 1, "estimated 4 KiB: %g us, 4 MiB: %g us",
          small.estimatedTime, large.estimatedTime);
  allreduceWorks(c, c.comm, "after simulated groups");
}

// PreMulSum over every type: each rank's input times the scalar, summed. Inputs and
// scalars are chosen so every product and partial sum is exact in every type (for up
// to 8 ranks: multiples of 1/4 up to 2, of 1/2 up to 4).
void casePreMulSum(Ctx& c) {
  const int n = c.nranks;
  for (const TypeDesc& t : kTypes) {
    const bool isFloat = t.kind == Kind::kFloat;
    const double s1 = isFloat ? 0.5 : 3, s2 = isFloat ? 0.25 : 5;
    auto input = [&](int r, size_t i) {
      return t.kind == Kind::kUnsigned ? static_cast<double>((r + i) % 3) : static_cast<double>((r + 2 * i) % 3) - 1;
    };
    auto check = [&](const unsigned char* buf, size_t count, double scalar, const char* what) {
      for (size_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r = 0; r < n; ++r) want += scalar * input(r, i);
        want = roundTo(t.type, want);
        double got = getValue(t.type, buf, i);
        if (got != want) {
          c.fail("premulsum %s %s count %zu: [%zu] = %g, want %g", t.name, what, count, i, got, want);
          return;
        }
      }
    };
    for (size_t count : {size_t{1}, size_t{1000}, size_t{100003}}) {
      Bytes in(count * t.size), out(count * t.size, kSentinel);
      for (size_t i = 0; i < count; ++i) setValue(t.type, in.data(), i, input(c.rank, i));
      // Host-immediate: the scalar is read at creation.
      unsigned char scalar[8] = {};
      setValue(t.type, scalar, 0, s1);
      ncclRedOp_t op = ncclSum;
      if (!OK(ncclRedOpCreatePreMulSum(&op, scalar, t.type, ncclScalarHostImmediate, c.comm))) continue;
      EXPECTL(op >= ncclNumOps && op <= ncclMaxRedOp, "ncclRedOpCreatePreMulSum made op %d", static_cast<int>(op));
      setValue(t.type, scalar, 0, s2);  // too late to matter
      if (OK(ncclAllReduce(in.data(), out.data(), count, t.type, op, c.comm, kStream)))
        check(out.data(), count, s1, "host-immediate");
      Bytes io = in;
      if (OK(ncclAllReduce(io.data(), io.data(), count, t.type, op, c.comm, kStream)))
        check(io.data(), count, s1, "host-immediate in place");
      OK(ncclRedOpDestroy(op, c.comm));
      // "Device" residence with a host pointer: read when each operation runs.
      setValue(t.type, scalar, 0, s1);
      if (!OK(pncclRedOpCreatePreMulSum(&op, scalar, t.type, ncclScalarDevice, c.comm))) continue;
      if (OK(ncclAllReduce(in.data(), out.data(), count, t.type, op, c.comm, kStream)))
        check(out.data(), count, s1, "scalar in memory, first value");
      setValue(t.type, scalar, 0, s2);
      if (OK(ncclAllReduce(in.data(), out.data(), count, t.type, op, c.comm, kStream)))
        check(out.data(), count, s2, "scalar in memory, changed");
      OK(pncclRedOpDestroy(op, c.comm));
    }
  }
  // A scalar read when the operation runs: inside a group, that is at ncclGroupEnd.
  {
    int32_t scalar = 2, v = c.rank + 1;
    ncclRedOp_t op;
    if (OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclInt32, ncclScalarDevice, c.comm))) {
      OK(ncclGroupStart());
      OK(ncclAllReduce(&v, &v, 1, ncclInt32, op, c.comm, kStream));
      scalar = 7;
      if (OK(ncclGroupEnd()))
        EXPECTL(v == 7 * n * (n + 1) / 2,
                "device-residence scalar changed before ncclGroupEnd: sum %d, want %d (x7) "
                "not %d (x2)",
                v, 7 * n * (n + 1) / 2, 2 * n * (n + 1) / 2);
      OK(ncclRedOpDestroy(op, c.comm));
    }
  }
  // PreMulSum with reduce, reduce-scatter and inside a group; scalars that are not exact.
  {
    const size_t count = 4099;
    float fs = 1.0f / 3;
    double ds = 0.1;
    ncclRedOp_t fop, dop;
    if (OK(ncclRedOpCreatePreMulSum(&fop, &fs, ncclFloat, ncclScalarHostImmediate, c.comm)) &&
        OK(ncclRedOpCreatePreMulSum(&dop, &ds, ncclDouble, ncclScalarDevice, c.comm))) {
      EXPECTL(fop != dop, "two live ops share the value %d", static_cast<int>(fop));
      std::vector<float> fin(count), fout(count * n, -1.f);
      std::vector<double> din(count * n), dout(count, -1.0);
      for (size_t i = 0; i < count; ++i) fin[i] = static_cast<float>(c.rank + i % 10);
      for (size_t i = 0; i < count * n; ++i) din[i] = static_cast<double>(c.rank * 3 + i % 17);
      OK(ncclGroupStart());
      OK(ncclReduce(fin.data(), fout.data(), count, ncclFloat, fop, n - 1, c.comm, kStream));
      OK(ncclReduceScatter(din.data(), dout.data(), count, ncclDouble, dop, c.comm, kStream));
      if (OK(ncclGroupEnd())) {
        if (c.rank == n - 1)
          for (size_t i = 0; i < count; ++i) {
            double want = 0;
            for (int r = 0; r < n; ++r) want += static_cast<double>(static_cast<float>(r + i % 10) * fs);
            if (std::fabs(fout[i] - want) > 1e-5 * std::max(1.0, std::fabs(want))) {
              c.fail("premulsum reduce float [%zu] = %.9g, want %.9g", i, fout[i], want);
              break;
            }
          }
        for (size_t i = 0; i < count; ++i) {
          double want = 0;
          size_t k = c.rank * count + i;
          for (int r = 0; r < n; ++r) want += static_cast<double>(r * 3 + k % 17) * ds;
          if (std::fabs(dout[i] - want) > 1e-12 * std::max(1.0, std::fabs(want))) {
            c.fail("premulsum reduce-scatter double [%zu] = %.17g, want %.17g", i, dout[i], want);
            break;
          }
        }
      }
      // An op made for float used with double: refused.
      Bytes sentinel(count * 8, kSentinel);
      BADARG(c.comm, "op|type", ncclAllReduce(din.data(), sentinel.data(), count, ncclDouble, fop, c.comm, kStream));
      EXPECTL(untouched(sentinel), "a refused allreduce wrote its output");
      OK(ncclRedOpDestroy(fop, c.comm));
      OK(ncclRedOpDestroy(dop, c.comm));
      // Destroyed ops: refused, and named.
      BADARG(c.comm, "op", ncclAllReduce(fin.data(), sentinel.data(), count, ncclFloat, fop, c.comm, kStream));
      EXPECTL(untouched(sentinel), "an allreduce with a destroyed op wrote its output");
      BADARG(c.comm, "op", ncclRedOpDestroy(fop, c.comm));
      BADARG(c.comm, "op", ncclRedOpDestroy(ncclSum, c.comm));
      BADARG(c.comm, "op", ncclRedOpDestroy(static_cast<ncclRedOp_t>(ncclNumOps + 100), c.comm));
    }
  }
  // An op of another communicator: refused on this one.
  ncclComm_t other = nullptr;
  if (OK(ncclCommSplit(c.comm, 0, c.rank, &other, nullptr)) && other) {
    float s = 2.f;
    ncclRedOp_t mineOp, theirs1, theirs2;
    if (OK(ncclRedOpCreatePreMulSum(&mineOp, &s, ncclFloat, ncclScalarHostImmediate, c.comm)) &&
        OKC(other, ncclRedOpCreatePreMulSum(&theirs1, &s, ncclFloat, ncclScalarHostImmediate, other)) &&
        OKC(other, ncclRedOpCreatePreMulSum(&theirs2, &s, ncclFloat, ncclScalarHostImmediate, other))) {
      ncclRedOp_t theirs = theirs1 != mineOp ? theirs1 : theirs2;
      std::vector<float> x(16, 1.f);
      Bytes sentinel(16 * 4, kSentinel);
      BADARG(c.comm, "op", ncclAllReduce(x.data(), sentinel.data(), 16, ncclFloat, theirs, c.comm, kStream));
      EXPECTL(untouched(sentinel), "an allreduce with another comm's op wrote its output");
      BADARG(c.comm, "op", ncclRedOpDestroy(theirs, c.comm));
      // Still usable where it belongs.
      if (OKC(other, ncclAllReduce(x.data(), x.data(), 16, ncclFloat, theirs, other, kStream)))
        EXPECTL(x[15] == 2.f * n, "the other comm's op: %g", x[15]);
      OK(ncclRedOpDestroy(mineOp, c.comm));
      OKC(other, ncclRedOpDestroy(theirs1, other));
      OKC(other, ncclRedOpDestroy(theirs2, other));
    }
    OKC(other, ncclCommDestroy(other));
  }
  // Bad arguments of the creation itself.
  ncclRedOp_t op;
  float s = 1.f;
  BADARG(c.comm, "scalar", ncclRedOpCreatePreMulSum(&op, nullptr, ncclFloat, ncclScalarHostImmediate, c.comm));
  BADARG(c.comm, "type",
         ncclRedOpCreatePreMulSum(&op, &s, static_cast<ncclDataType_t>(ncclNumTypes), ncclScalarHostImmediate, c.comm));
  BADARG(c.comm, "residence",
         ncclRedOpCreatePreMulSum(&op, &s, ncclFloat, static_cast<ncclScalarResidence_t>(5), c.comm));
  BADARG(c.comm, "op", ncclRedOpCreatePreMulSum(nullptr, &s, ncclFloat, ncclScalarHostImmediate, c.comm));
  BADARG(nullptr, "comm", ncclRedOpCreatePreMulSum(&op, &s, ncclFloat, ncclScalarHostImmediate, nullptr));
}

void caseRegister(Ctx& c) {
  const int n = c.nranks;
  const size_t count = 65537;
  std::vector<float> send(count), recv(count * n, -1.f);
  for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(c.rank * 10 + i % 9);
  void *hs = nullptr, *hr = nullptr, *hr2 = nullptr;
  if (!OK(ncclCommRegister(c.comm, send.data(), count * sizeof(float), &hs))) return;
  OK(pncclCommRegister(c.comm, recv.data(), recv.size() * sizeof(float), &hr));
  // Overlapping registration of part of the same buffer.
  OK(ncclCommRegister(c.comm, recv.data() + 3, 1000 * sizeof(float), &hr2));
  EXPECTL(hs && hr && hr2 && hs != hr && hr != hr2, "handles %p %p %p", hs, hr, hr2);
  for (int iter = 0; iter < 3; ++iter) {
    if (OK(ncclAllGather(send.data(), recv.data(), count, ncclFloat, c.comm, kStream)))
      for (int r = 0; r < n; ++r)
        if (recv[r * count + count - 1] != static_cast<float>(r * 10 + (count - 1) % 9) ||
            recv[r * count] != static_cast<float>(r * 10)) {
          c.fail("allgather on registered buffers: block %d wrong", r);
          break;
        }
    if (OK(ncclAllReduce(send.data(), recv.data(), count, ncclFloat, ncclSum, c.comm, kStream)))
      for (size_t i = 0; i < count; i += 997)
        if (recv[i] != static_cast<float>(10 * n * (n - 1) / 2 + n * static_cast<int>(i % 9))) {
          c.fail("allreduce on registered buffers: [%zu] = %g", i, recv[i]);
          break;
        }
  }
  OK(ncclCommDeregister(c.comm, hr2));
  OK(ncclCommDeregister(c.comm, hr));
  OK(pncclCommDeregister(c.comm, hs));
  BADARG(c.comm, "handle", ncclCommDeregister(c.comm, hs));
  int bogus = 0;
  BADARG(c.comm, "handle", ncclCommDeregister(c.comm, &bogus));
  BADARG(c.comm, "handle", ncclCommDeregister(c.comm, reinterpret_cast<void*>(0x10)));
  BADARG(c.comm, "handle", ncclCommRegister(c.comm, send.data(), 64, nullptr));
  BADARG(nullptr, "comm", ncclCommRegister(nullptr, send.data(), 64, &hs));
  // A handle of another communicator.
  ncclComm_t other = nullptr;
  if (OK(ncclCommSplit(c.comm, 0, c.rank, &other, nullptr)) && other) {
    void* h = nullptr;
    if (OKC(other, ncclCommRegister(other, send.data(), 4096, &h))) {
      BADARG(c.comm, "handle", ncclCommDeregister(c.comm, h));
      OKC(other, ncclCommDeregister(other, h));
    }
    OKC(other, ncclCommDestroy(other));
  }
  allreduceWorks(c, c.comm, "after registrations");
}

void caseWindow(Ctx& c) {
  const int n = c.nranks;
  const size_t bytes = 1 << 20, count = bytes / sizeof(float);
  void* buf = nullptr;
  if (!OK(ncclMemAlloc(&buf, bytes)) || !buf) return;
  EXPECTL(reinterpret_cast<uintptr_t>(buf) % NCCL_WIN_REQUIRED_ALIGNMENT == 0, "ncclMemAlloc %p not 4096-aligned", buf);
  float* f = static_cast<float*>(buf);
  ncclWindow_t win = nullptr;
  if (OK(ncclCommWindowRegister(c.comm, buf, bytes, &win, NCCL_WIN_DEFAULT)) && win) {
    for (size_t i = 0; i < count; ++i) f[i] = static_cast<float>(c.rank + i % 3);
    if (OK(ncclAllReduce(f, f, count, ncclFloat, ncclSum, c.comm, kStream)))
      EXPECTL(f[count - 1] == static_cast<float>(n * (n - 1) / 2 + n * ((count - 1) % 3)), "allreduce in a window: %g",
              f[count - 1]);
    OK(ncclCommWindowDeregister(c.comm, win));
    BADARG(c.comm, "win", ncclCommWindowDeregister(c.comm, win));
  }
  // Symmetric: collective, every rank the same size.
  ncclWindow_t sym = nullptr;
  if (OK(pncclCommWindowRegister(c.comm, buf, bytes, &sym, NCCL_WIN_COLL_SYMMETRIC)) && sym) {
    const size_t per = count / n;
    std::vector<float> mine(per);
    for (size_t i = 0; i < per; ++i) mine[i] = static_cast<float>(c.rank * 1000 + i % 100);
    if (OK(ncclAllGather(mine.data(), f, per, ncclFloat, c.comm, kStream)))
      for (int r = 0; r < n; ++r)
        EXPECTL(f[r * per + per - 1] == static_cast<float>(r * 1000 + (per - 1) % 100),
                "allgather into a window: block %d", r);
    OK(pncclCommWindowDeregister(c.comm, sym));
  }
  ncclWindow_t w2 = nullptr;
  BADARG(c.comm, "align|buff",
         ncclCommWindowRegister(c.comm, static_cast<char*>(buf) + 8, 4096, &w2, NCCL_WIN_DEFAULT));
  BADARG(c.comm, "flag", ncclCommWindowRegister(c.comm, buf, 4096, &w2, 0x80));
  BADARG(c.comm, "win", ncclCommWindowRegister(c.comm, buf, 4096, nullptr, NCCL_WIN_DEFAULT));
  int bogus = 0;
  BADARG(c.comm, "win", ncclCommWindowDeregister(c.comm, reinterpret_cast<ncclWindow_t>(&bogus)));
  OK(ncclMemFree(buf));
  allreduceWorks(c, c.comm, "after windows");
}

// Bad arguments on a live communicator: each refused with the argument named, no output
// written, and the communicator still works after.
void caseBadArgs(Ctx& c) {
  const int n = c.nranks;
  const size_t count = 256;
  std::vector<float> in(count * n, 1.f);
  Bytes out(count * n * sizeof(float), kSentinel);
  float* o = reinterpret_cast<float*>(out.data());
  auto clean = [&](const char* what) {
    if (!untouched(out)) {
      c.fail("%s: the refused call wrote its output buffer", what);
      std::fill(out.begin(), out.end(), kSentinel);
    }
  };
  // Kept as ints and made enums only as arguments, as a C caller passes them: a load of an
  // enum object holding a value outside the enum's range is undefined (UBSan's enum check).
  for (int v : {static_cast<int>(ncclNumTypes), -1, 1000}) {
    const auto t = static_cast<ncclDataType_t>(v);
    BADARG(c.comm, "type", ncclAllReduce(in.data(), o, count, t, ncclSum, c.comm, kStream));
    BADARG(c.comm, "type", ncclBroadcast(in.data(), o, count, t, 0, c.comm, kStream));
    BADARG(c.comm, "type", ncclAllGather(in.data(), o, count, t, c.comm, kStream));
    BADARG(c.comm, "type", ncclAlltoAll(in.data(), o, count, t, c.comm, kStream));
    BADARG(c.comm, "type", ncclSend(in.data(), count, t, (c.rank + 1) % n, c.comm, kStream));
    BADARG(c.comm, "type", ncclRecv(o, count, t, (c.rank + 1) % n, c.comm, kStream));
    clean("bad datatype");
  }
  for (int v : {static_cast<int>(ncclNumOps), ncclNumOps + 1, static_cast<int>(ncclMaxRedOp), -1}) {
    const auto op = static_cast<ncclRedOp_t>(v);
    BADARG(c.comm, "op", ncclAllReduce(in.data(), o, count, ncclFloat, op, c.comm, kStream));
    BADARG(c.comm, "op", ncclReduce(in.data(), o, count, ncclFloat, op, 0, c.comm, kStream));
    BADARG(c.comm, "op", ncclReduceScatter(in.data(), o, count, ncclFloat, op, c.comm, kStream));
    clean("bad op");
  }
  for (int root : {-1, n, n + 100, INT_MIN}) {
    BADARG(c.comm, "root", ncclReduce(in.data(), o, count, ncclFloat, ncclSum, root, c.comm, kStream));
    BADARG(c.comm, "root", ncclBroadcast(in.data(), o, count, ncclFloat, root, c.comm, kStream));
    BADARG(c.comm, "root", ncclBcast(o, count, ncclFloat, root, c.comm, kStream));
    BADARG(c.comm, "root", ncclGather(in.data(), o, count, ncclFloat, root, c.comm, kStream));
    BADARG(c.comm, "root", ncclScatter(in.data(), o, count, ncclFloat, root, c.comm, kStream));
    clean("bad root");
  }
  for (int peer : {-1, n, INT_MAX}) {
    BADARG(c.comm, "peer", ncclSend(in.data(), count, ncclFloat, peer, c.comm, kStream));
    BADARG(c.comm, "peer", ncclRecv(o, count, ncclFloat, peer, c.comm, kStream));
    clean("bad peer");
  }
  // Counts whose byte size overflows size_t, alone or times nranks.
  const size_t huge = SIZE_MAX, timesN = SIZE_MAX / sizeof(float) / static_cast<size_t>(n) + 1;
  BADARG(c.comm, "count", ncclAllReduce(in.data(), o, huge, ncclFloat, ncclSum, c.comm, kStream));
  BADARG(c.comm, "count", ncclAllReduce(in.data(), o, SIZE_MAX / 2, ncclFloat, ncclSum, c.comm, kStream));
  BADARG(c.comm, "count", ncclBroadcast(in.data(), o, huge, ncclDouble, 0, c.comm, kStream));
  BADARG(c.comm, "count", ncclReduce(in.data(), o, huge, ncclInt64, ncclMax, 0, c.comm, kStream));
  BADARG(c.comm, "count", ncclSend(in.data(), huge, ncclFloat, (c.rank + 1) % n, c.comm, kStream));
  BADARG(c.comm, "count", ncclRecv(o, huge, ncclFloat, (c.rank + 1) % n, c.comm, kStream));
  if (n > 1) {
    BADARG(c.comm, "count", ncclAllGather(in.data(), o, timesN, ncclFloat, c.comm, kStream));
    BADARG(c.comm, "count", ncclReduceScatter(in.data(), o, timesN, ncclFloat, ncclSum, c.comm, kStream));
    BADARG(c.comm, "count", ncclAlltoAll(in.data(), o, timesN, ncclFloat, c.comm, kStream));
    BADARG(c.comm, "count", ncclGather(in.data(), o, timesN, ncclFloat, 0, c.comm, kStream));
    BADARG(c.comm, "count", ncclScatter(in.data(), o, timesN, ncclFloat, 0, c.comm, kStream));
  }
  clean("count overflow");
  // NULL buffers with a count.
  BADARG(c.comm, "sendbuff|buff", ncclAllReduce(nullptr, o, count, ncclFloat, ncclSum, c.comm, kStream));
  BADARG(c.comm, "recvbuff|buff", ncclAllReduce(in.data(), nullptr, count, ncclFloat, ncclSum, c.comm, kStream));
  BADARG(c.comm, "recvbuff|buff", ncclAllGather(in.data(), nullptr, count, ncclFloat, c.comm, kStream));
  BADARG(c.comm, "buff", ncclSend(nullptr, count, ncclFloat, (c.rank + 1) % n, c.comm, kStream));
  BADARG(c.comm, "buff", ncclRecv(nullptr, count, ncclFloat, (c.rank + 1) % n, c.comm, kStream));
  clean("NULL buffers");
  // Outputs of queries.
  BADARG(c.comm, "count", ncclCommCount(c.comm, nullptr));
  BADARG(c.comm, "rank", ncclCommUserRank(c.comm, nullptr));
  BADARG(c.comm, "device", ncclCommCuDevice(c.comm, nullptr));
  BADARG(c.comm, "asyncerror|error", ncclCommGetAsyncError(c.comm, nullptr));
  // Management calls.
  ncclComm_t child = reinterpret_cast<ncclComm_t>(0x1);
  BADARG(c.comm, "newcomm", ncclCommSplit(c.comm, 0, 0, nullptr, nullptr));
  BADARG(c.comm, "color", ncclCommSplit(c.comm, -5, 0, &child, nullptr));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  BADARG(c.comm, "magic|config", ncclCommSplit(c.comm, 0, 0, &child, &cfg));
  cfg = NCCL_CONFIG_INITIALIZER;
  cfg.size = 4;
  BADARG(c.comm, "size|config", ncclCommSplit(c.comm, 0, 0, &child, &cfg));
  EXPECTL(child == reinterpret_cast<ncclComm_t>(0x1) || child == nullptr, "a refused split set *newcomm to %p",
          static_cast<void*>(child));
  // Inside a group, a refused call leaves the group usable.
  OK(ncclGroupStart());
  BADARG(c.comm, "root", ncclBroadcast(in.data(), o, count, ncclFloat, n, c.comm, kStream));
  // NCCL records the error for the group (ncclGroupErrCheck): ncclGroupEnd returns it
  // and drops the group.
  ncclResult_t r = ncclGroupEnd();
  EXPECTL(r != ncclSuccess, "ncclGroupEnd of a group whose only call was refused returned ncclSuccess "
                            "(NCCL returns the refused call's error)");
  c.note("ncclGroupEnd after a refused call in the group: %s: %s", resultName(r), ncclGetLastError(c.comm));
  clean("refused call in a group");
  // The communicator is unharmed.
  allreduceWorks(c, c.comm, "after refused calls");
}

// Bad arguments of ncclCommShrink (its own case: a shrink the library wrongly accepts
// may wait for ranks that never come).
void caseBadShrink(Ctx& c) {
  const int n = c.nranks;
  ncclComm_t child = reinterpret_cast<ncclComm_t>(0x1);
  int excl[2] = {n, 0};
  BADARG(c.comm, "exclude|rank", ncclCommShrink(c.comm, excl, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
  excl[0] = -1;
  BADARG(c.comm, "exclude|rank", ncclCommShrink(c.comm, excl, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
  BADARG(c.comm, "exclude|count", ncclCommShrink(c.comm, excl, -1, &child, nullptr, NCCL_SHRINK_DEFAULT));
  BADARG(c.comm, "exclude|list", ncclCommShrink(c.comm, nullptr, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
  excl[0] = (c.rank + 1) % n;
  BADARG(c.comm, "newcomm", ncclCommShrink(c.comm, excl, 1, nullptr, nullptr, NCCL_SHRINK_DEFAULT));
  BADARG(c.comm, "flag", ncclCommShrink(c.comm, excl, 0, &child, nullptr, 0x40));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  BADARG(c.comm, "magic|config", ncclCommShrink(c.comm, excl, 0, &child, &cfg, NCCL_SHRINK_DEFAULT));
  // Repeats, and the caller itself in the list.
  excl[0] = excl[1] = (c.rank + 1) % n;
  if (n > 2)
    BADARG(c.comm, "exclude|repeat|duplicate|twice",
           ncclCommShrink(c.comm, excl, 2, &child, nullptr, NCCL_SHRINK_DEFAULT));
  excl[0] = c.rank;
  BAD(c.comm, "exclude|rank|self|caller", ncclCommShrink(c.comm, excl, 1, &child, nullptr, NCCL_SHRINK_DEFAULT));
  EXPECTL(child == reinterpret_cast<ncclComm_t>(0x1) || child == nullptr, "a refused shrink set *newcomm to %p",
          static_cast<void*>(child));
  allreduceWorks(c, c.comm, "after refused shrinks");
}

// A destroyed communicator: refused, not crashed on.
void caseDestroyedComm(Ctx& c) {
  allreduceWorks(c, c.comm, "before destroy");
  ncclComm_t dead = c.comm;
  OK(ncclCommDestroy(dead));
  c.comm = nullptr;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  Bytes out(sizeof(x), kSentinel);
  BAD(nullptr, "comm", ncclAllReduce(x, out.data(), 8, ncclFloat, ncclSum, dead, kStream));
  EXPECTL(untouched(out), "an allreduce on a destroyed comm wrote its output");
  BAD(nullptr, "comm", ncclSend(x, 8, ncclFloat, 0, dead, kStream));
  int v = -1;
  BAD(nullptr, "comm", ncclCommCount(dead, &v));
  BAD(nullptr, "comm", ncclCommDestroy(dead));
  BAD(nullptr, "comm", ncclCommAbort(dead));
  ncclComm_t child = nullptr;
  BAD(nullptr, "comm", ncclCommSplit(dead, 0, 0, &child, nullptr));
  const char* s = ncclGetLastError(dead);
  EXPECTL(s != nullptr, "ncclGetLastError(destroyed comm) is NULL");
}

// ---------------------------------------------------------------------------------------
// The runner.

// kLocal: one process, no communicator; kComm: threads and processes, with c.comm;
// kProcsOnly: processes only (setenv, killing ranks), with c.comm; kProcsNoComm: the
// same without c.comm.
enum class Where { kLocal, kComm, kProcsOnly, kProcsNoComm };
struct Case {
  const char* name;
  void (*fn)(Ctx&);
  Where where;
  double timeoutS;
};
// ---------------------------------------------------------------------------------------
// NCCL 2.29-2.32 additions.

// Parameters by NCCL name: typed and text reads, a value read where it is set, misuse.
void caseParams(Ctx& c) {
  setenv("NCCL_BUFFSIZE", "12345", 1);
  unsetenv("COLL_BUFFSIZE");
  ncclParamHandle_t h = nullptr;
  if (OKC(nullptr, ncclParamBind(&h, "NCCL_BUFFSIZE")) && h) {
    int64_t v64 = 0;
    int32_t v32 = 0;
    uint16_t v16 = 0;
    OKC(nullptr, ncclParamGetI64(h, &v64));
    OKC(nullptr, pncclParamGetI32(h, &v32));
    OKC(nullptr, ncclParamGetU16(h, &v16));
    EXPECTL(v64 == 12345 && v32 == 12345 && v16 == 12345, "NCCL_BUFFSIZE=12345 read as %lld %d %u",
            static_cast<long long>(v64), v32, v16);
    int8_t v8 = 0;
    BADARG(nullptr, "fit|8", ncclParamGetI8(h, &v8));
    EXPECTL(v8 == 0, "a failed ncclParamGetI8 wrote %d", v8);
    const char* text = nullptr;
    if (OKC(nullptr, ncclParamGetStr(h, &text))) EXPECTL(text && std::strcmp(text, "12345") == 0, "text %s", text);
    char small[3];
    int len = 0;
    BADARG(nullptr, "maxlen", ncclParamGet(h, small, sizeof(small), &len));
    EXPECTL(len == 6, "ncclParamGet needs %d bytes, want 6", len);
    char big[16];
    if (OKC(nullptr, ncclParamGet(h, big, sizeof(big), &len))) EXPECTL(std::strcmp(big, "12345") == 0, "%s", big);
  }
  ncclParamHandle_t sh = nullptr;
  if (OKC(nullptr, ncclParamBind(&sh, "DEBUG")) && sh) {
    int32_t v = 0;
    BAD(nullptr, "string", ncclParamGetI32(sh, &v));
  }
  BADARG(nullptr, "key", ncclParamBind(&h, "NCCL_NO_SUCH_PARAMETER"));
  BADARG(nullptr, "key", ncclParamBind(&h, nullptr));
  BADARG(nullptr, "out", ncclParamBind(nullptr, "NCCL_DEBUG"));
  int bogus = 0;
  int64_t v = 0;
  BADARG(nullptr, "handle|h ", ncclParamGetI64(reinterpret_cast<ncclParamHandle_t>(&bogus), &v));
  const char* value = nullptr;
  int valueLen = -1;
  if (OKC(nullptr, ncclParamGetParameter("NCCL_BUFFSIZE", &value, &valueLen)))
    EXPECTL(value && std::strcmp(value, "12345") == 0 && valueLen == 5, "by key: %s (%d)", value, valueLen);
  const char** keys = nullptr;
  int nkeys = 0;
  if (OKC(nullptr, ncclParamGetAllParameterKeys(&keys, &nkeys))) {
    bool found = false;
    for (int i = 0; i < nkeys; ++i) found = found || std::strcmp(keys[i], "NCCL_BUFFSIZE") == 0;
    EXPECTL(nkeys > 30 && found, "%d keys, NCCL_BUFFSIZE %s", nkeys, found ? "among them" : "missing");
  }
  ncclParamDumpAll();
  unsetenv("NCCL_BUFFSIZE");
}

// Encryption: none is what this library does; a key is refused, saying why.
void caseEncryption(Ctx& c) {
  ncclEncryptionConfig_t none = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  OKC(nullptr, ncclSetEncryption(&none));
  ncclEncryptionConfig_t psk = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
  psk.mode = NCCL_ENCRYPTION_MODE_PSK;
  psk.psk = "secret";
  BAD(nullptr, "encrypt", ncclSetEncryption(&psk));
  BADARG(nullptr, "config", ncclSetEncryption(nullptr));
  ncclEncryptionConfig_t junk;
  std::memset(&junk, 0x5a, sizeof(junk));
  BADARG(nullptr, "initializer", ncclSetEncryption(&junk));
}

// A window's buffer, and NCCL 2.32's window hints.
void caseWindowUserPtr(Ctx& c) {
  const size_t bytes = 1 << 16;
  void* buf = nullptr;
  if (!OK(ncclMemAlloc(&buf, bytes)) || !buf) return;
  ncclWindow_t win = nullptr;
  if (OK(ncclCommWindowRegister(c.comm, buf, bytes, &win, NCCL_WIN_STRICT_ORDERING)) && win) {
    void* user = nullptr;
    if (OK(ncclWinGetUserPtr(c.comm, win, &user)))
      EXPECTL(user == buf, "ncclWinGetUserPtr gave %p, want %p", user, buf);
    BADARG(c.comm, "outUserPtr", ncclWinGetUserPtr(c.comm, win, nullptr));
    OK(ncclCommWindowDeregister(c.comm, win));
    BADARG(c.comm, "win", pncclWinGetUserPtr(c.comm, win, &user));
  }
  OK(ncclMemFree(buf));
}

// Suspend and resume (host ranks hold no GPU memory): operations refused in between.
void caseSuspend(Ctx& c) {
  uint64_t v = 99;
  if (OK(ncclCommMemStats(c.comm, ncclStatGpuMemTotal, &v)))
    EXPECTL(v == 0, "host rank holds %llu GPU bytes", static_cast<unsigned long long>(v));
  BADARG(c.comm, "stat", ncclCommMemStats(c.comm, static_cast<ncclCommMemStat_t>(9), &v));
  BADARG(c.comm, "flags", ncclCommSuspend(c.comm, 0x7));
  if (!OK(ncclCommSuspend(c.comm, NCCL_SUSPEND_MEM))) return;
  if (OK(ncclCommMemStats(c.comm, ncclStatGpuMemSuspended, &v)))
    EXPECTL(v == 1, "suspended stat %llu", static_cast<unsigned long long>(v));
  float x = 1;
  BAD(c.comm, "suspend", ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, c.comm, kStream));
  OK(ncclCommResume(c.comm));
  BAD(c.comm, "not suspended", ncclCommResume(c.comm));
  allreduceWorks(c, c.comm, "after resume");
}

// One-sided puts and signals: refused, saying so; the communicator unharmed.
// The misuses of one-sided calls, each named.
void oneSidedMisuse(Ctx& c, ncclWindow_t win, size_t bytes) {
  const int n = c.nranks, next = (c.rank + 1) % n;
  float x = 0;
  BADARG(c.comm, "sigIdx", ncclPutSignal(&x, 1, ncclFloat, next, win, 0, 1, 0, 0, c.comm, kStream));
  BADARG(c.comm, "ctx", ncclSignal(next, 0, 2, 0, c.comm, kStream));
  BADARG(c.comm, "flags", ncclSignal(next, 0, 0, 1, c.comm, kStream));
  BADARG(c.comm, "peer", ncclSignal(n, 0, 0, 0, c.comm, kStream));
  BADARG(c.comm, "peerWin", ncclPutSignal(&x, 1, ncclFloat, next, nullptr, 0, 0, 0, 0, c.comm, kStream));
  BADARG(c.comm, "peerWinOffset", ncclPutSignal(&x, 2, ncclFloat, next, win, bytes - 4, 0, 0, 0, c.comm, kStream));
  BADARG(c.comm, "datatype",
         ncclPutSignal(&x, 1, static_cast<ncclDataType_t>(99), next, win, 0, 0, 0, 0, c.comm, kStream));
  ncclWaitSignalDesc_t d = {0, next, 0, 0};
  BADARG(c.comm, "opCnt", ncclWaitSignal(1, &d, c.comm, kStream));
  BADARG(c.comm, "nDesc", ncclWaitSignal(0, &d, c.comm, kStream));
  BADARG(c.comm, "signalDescs", ncclWaitSignal(1, nullptr, c.comm, kStream));
  d = {1, c.rank, 0, 0};
  BAD(c.comm, "itself", ncclWaitSignal(1, &d, c.comm, kStream));
}

// Puts between every pair (itself included), a put of several frames, signals alone, and
// each misuse named. Ranks bound to a GPU are refused by name.
void caseOneSided(Ctx& c) {
  const int n = c.nranks, next = (c.rank + 1) % n, prev = (c.rank + n - 1) % n;
  const size_t per = 1000, big = (5u << 20) / 2 / sizeof(float);  // 2.5 MiB: three frames
  const size_t bytes = (per * n + big) * sizeof(float);
  void* buf = nullptr;
  if (!OK(ncclMemAlloc(&buf, bytes)) || !buf) return;
  auto* w = static_cast<float*>(buf);
  std::fill(w, w + bytes / sizeof(float), -1.f);
  ncclWindow_t win = nullptr;
  if (!OK(ncclCommWindowRegister(c.comm, buf, bytes, &win, NCCL_WIN_COLL_SYMMETRIC)) || !win) return;
  std::vector<float> mine(std::max(per, big));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(c.rank * 100000 + static_cast<int>(i % 4096));
  ncclResult_t first = ncclPutSignal(mine.data(), per, ncclFloat, next, win, c.rank * per * 4, 0, 0, 0, c.comm,
                                     kStream);
  if (first == ncclInvalidUsage && mentions(ncclGetLastError(c.comm), "host-memory ranks")) {
    c.note("skipped: %s", ncclGetLastError(c.comm));
  } else if (expectOk(c, first, "ncclPutSignal to the next rank", c.comm, __LINE__)) {
    for (int p = 0; p < n; ++p)  // the rest of every pair: all but next again
      if (p != next) OK(ncclPutSignal(mine.data(), per, ncclFloat, p, win, c.rank * per * 4, 0, 0, 0, c.comm, kStream));
    OK(ncclPutSignal(mine.data(), big, ncclFloat, next, win, per * n * 4, 0, 0, 0, c.comm, kStream));
    OK(ncclSignal(next, 0, 0, 0, c.comm, kStream));
    std::vector<ncclWaitSignalDesc_t> descs;
    for (int p = 0; p < n; ++p) descs.push_back({p == prev ? 3 : 1, p, 0, 0});  // prev: two puts and a signal
    if (OK(ncclWaitSignal(n, descs.data(), c.comm, kStream))) {
      auto firstWrong = [&](const float* got, size_t count, int from) {
        for (size_t i = 0; i < count; ++i)
          if (got[i] != static_cast<float>(from * 100000 + static_cast<int>(i % 4096))) return i;
        return count;
      };
      for (int p = 0; p < n; ++p) {
        const size_t i = firstWrong(w + p * per, per, p);
        EXPECTL(i == per, "window slot of rank %d, element %zu: %g", p, i, i < per ? w[p * per + i] : 0.f);
      }
      const size_t i = firstWrong(w + per * n, big, prev);
      EXPECTL(i == big, "large put from rank %d, element %zu: %g", prev, i, i < big ? w[per * n + i] : 0.f);
    }
    oneSidedMisuse(c, win, bytes);
  }
  allreduceWorks(c, c.comm, "after one-sided operations");  // no put is still on its way
  OK(ncclCommWindowDeregister(c.comm, win));
  OK(ncclMemFree(buf));
}

// The per-call config variants: every collective with a config gives the plain call's
// result; algorithm filters and channel bounds are honoured or refused by name.
void caseCollConfig(Ctx& c) {
  const int n = c.nranks;
  const size_t count = 4099;
  std::vector<float> in(count * n), out(count * n);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(c.rank + static_cast<int>(i % 5));
  const float sum0 = static_cast<float>(n * (n - 1) / 2);  // element 0's sum over ranks
  ncclCollConfig_t cfg = NCCL_COLLCONFIG_INITIALIZER;
  for (const char* sel : {static_cast<const char*>(nullptr), "ring", "tree", "^tree"}) {
    cfg.algSelection = sel;
    cfg.maxCTAs = 1;
    std::fill(out.begin(), out.end(), -1.f);
    if (OK(ncclAllReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream, &cfg)))
      EXPECTL(out[0] == sum0 && out[count - 1] == sum0 + n * static_cast<float>((count - 1) % 5),
              "allreduce with algSelection %s: %g", sel ? sel : "NULL", out[0]);
  }
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.algSelection = "^ring,tree";  // nothing left
  BADARG(c.comm, "algSelection",
         ncclAllReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream, &cfg));
  cfg.forceAlgSelection = 0;  // the tuner's choice instead
  if (OK(ncclAllReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream, &cfg)))
    EXPECTL(out[0] == sum0, "unforced selection: %g", out[0]);
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.userProfilerTag = 42;
  cfg.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  if (OK(ncclBroadcastConfig(in.data(), out.data(), count, ncclFloat, 0, c.comm, kStream, &cfg)))
    EXPECTL(out[1] == 1.f, "broadcast: %g", out[1]);
  if (OK(ncclReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, 0, c.comm, kStream, &cfg)) && c.rank == 0)
    EXPECTL(out[0] == sum0, "reduce: %g", out[0]);
  if (OK(ncclAllGatherConfig(in.data(), out.data(), count, ncclFloat, c.comm, kStream, &cfg)))
    EXPECTL(out[count * (n - 1)] == static_cast<float>(n - 1), "allgather: %g", out[count * (n - 1)]);
  if (OK(ncclReduceScatterConfig(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream, &cfg)))
    EXPECTL(out[0] == sum0 + n * static_cast<float>((count * c.rank) % 5), "reduce-scatter: %g", out[0]);
  if (OK(ncclAlltoAllConfig(in.data(), out.data(), count, ncclFloat, c.comm, kStream, &cfg)))
    EXPECTL(out[count * (n - 1)] == static_cast<float>(n - 1 + (count * c.rank) % 5), "alltoall: %g",
            out[count * (n - 1)]);
  if (OK(ncclGatherConfig(in.data(), out.data(), count, ncclFloat, 0, c.comm, kStream, &cfg)) && c.rank == 0)
    EXPECTL(out[count * (n - 1)] == static_cast<float>(n - 1), "gather: %g", out[count * (n - 1)]);
  if (OK(ncclScatterConfig(in.data(), out.data(), count, ncclFloat, 0, c.comm, kStream, &cfg)))
    EXPECTL(out[0] == static_cast<float>((count * c.rank) % 5), "scatter: %g", out[0]);
  if (OK(ncclAllReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream, nullptr)))
    EXPECTL(out[0] == sum0, "NULL config: %g", out[0]);
  // Refused by name, on every rank alike; the communicator still works after.
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.maxCTAs = 100000;
  BADARG(c.comm, "maxCTAs",
         ncclAllReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream, &cfg));
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.minCTAs = 2;
  cfg.maxCTAs = 1;
  BADARG(c.comm, "minCTAs", ncclAllGatherConfig(in.data(), out.data(), count, ncclFloat, c.comm, kStream, &cfg));
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.algSelection = "bogus";
  BADARG(c.comm, "algSelection",
         ncclReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, 0, c.comm, kStream, &cfg));
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.magic = 1;
  BADARG(c.comm, "config", ncclBroadcastConfig(in.data(), out.data(), count, ncclFloat, 0, c.comm, kStream, &cfg));
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.CTAPolicy = 64;
  BADARG(c.comm, "CTAPolicy", ncclScatterConfig(in.data(), out.data(), count, ncclFloat, 0, c.comm, kStream, &cfg));
  cfg = NCCL_COLLCONFIG_INITIALIZER;
  cfg.launchCompletionEvent = reinterpret_cast<cudaEvent_t>(&cfg);
  BAD(c.comm, "launchCompletionEvent",
      ncclAllReduceConfig(in.data(), out.data(), count, ncclFloat, ncclSum, c.comm, kStream, &cfg));
  allreduceWorks(c, c.comm, "after per-call configs");
}

// Growing: ranks 0..n-2 (a split of the runner's communicator) grow by rank n-1, which
// joins with the id rank 0 made; old ranks keep their numbers, the old communicator
// keeps working, and a second id waits for the first grow.
void caseGrow(Ctx& c) {
  const int n = c.nranks;
  if (n < 2) return;
  const int k = kMaxIds - 1;  // the id slot this case shares
  const bool old = c.rank < n - 1;
  ncclComm_t small = nullptr;
  if (!OK(ncclCommSplit(c.comm, old ? 0 : NCCL_SPLIT_NOCOLOR, c.rank, &small, nullptr))) return;
  ncclComm_t grown = nullptr;
  if (old) {
    ncclUniqueId id;
    if (c.rank == 0) {
      if (!OKC(small, ncclCommGetUniqueId(small, &id))) return;
      ncclUniqueId again;
      BAD(small, "one grow at a time", ncclCommGetUniqueId(small, &again));
      c.sh->ids[k] = id;
      c.sh->idState[k].store(1);
    }
    BADARG(small, "rank", ncclCommGrow(small, n, nullptr, 3, &grown, nullptr));
    BADARG(small, "nRanks", ncclCommGrow(small, n - 1, nullptr, -1, &grown, nullptr));
    OKC(small, ncclCommGrow(small, n, c.rank == 0 ? &id : nullptr, -1, &grown, nullptr));
  } else {
    double deadline = nowS() + 60;
    while (c.sh->idState[k].load() == 0 && nowS() < deadline) sleepMs(1);
    ncclUniqueId id = c.sh->ids[k];
    OKC(nullptr, pncclCommGrow(nullptr, n, &id, n - 1, &grown, nullptr));
  }
  if (grown) {
    int count = -1, rank = -1;
    OKC(grown, ncclCommCount(grown, &count));
    OKC(grown, ncclCommUserRank(grown, &rank));
    EXPECTL(count == n && rank == c.rank, "grown comm: count %d rank %d", count, rank);
    allreduceWorks(c, grown, c.rank, n, n * (n - 1) / 2, "grown comm");
    OKC(grown, ncclCommDestroy(grown));
  } else {
    c.fail("ncclCommGrow gave no communicator");
  }
  if (small) {
    allreduceWorks(c, small, c.rank, n - 1, (n - 1) * (n - 2) / 2, "communicator that grew");
    OKC(small, ncclCommDestroy(small));
  }
}

const Case kCases[] = {
    {"version", caseVersion, Where::kLocal, 30},
    {"error_strings", caseErrorStrings, Where::kLocal, 30},
    {"last_error", caseLastError, Where::kLocal, 30},
    {"reset_debug_init", caseResetDebugInit, Where::kLocal, 30},
    {"mem_alloc", caseMemAlloc, Where::kLocal, 30},
    {"local_bad_args", caseLocalBadArgs, Where::kLocal, 60},
    {"config_old_layout", caseConfigOldLayout, Where::kLocal, 30},
    {"init_all", caseInitAll, Where::kLocal, 60},
    {"init_rank_group", caseInitRankGroup, Where::kLocal, 60},
    {"init_all_split_group", caseInitAllSplitGroup, Where::kLocal, 60},
    {"single_rank", caseSingleRank, Where::kLocal, 30},
    {"comm_basics", caseCommBasics, Where::kComm, 60},
    {"init_config", caseInitConfig, Where::kComm, 60},
    {"init_nonblocking", caseInitNonblocking, Where::kComm, 60},
    {"init_scalable", caseInitScalable, Where::kComm, 60},
    {"finalize", caseFinalize, Where::kComm, 60},
    {"abort", caseAbort, Where::kComm, 60},
    {"abort_unblocks", caseAbortUnblocks, Where::kComm, 60},
    {"split", caseSplit, Where::kComm, 60},
    {"shrink", caseShrink, Where::kComm, 60},
    {"revoke", caseRevoke, Where::kComm, 60},
    {"revoke_inflight", caseRevokeInflight, Where::kComm, 60},
    {"reduce_ops", caseReduceOps, Where::kComm, 120},
    {"integer_edges", caseIntegerEdges, Where::kComm, 60},
    {"copy_ops", caseCopyOps, Where::kComm, 120},
    {"group", caseGroup, Where::kComm, 60},
    {"simulate", caseSimulate, Where::kComm, 60},
    {"premulsum", casePreMulSum, Where::kComm, 120},
    {"register", caseRegister, Where::kComm, 60},
    {"window", caseWindow, Where::kComm, 60},
    {"bad_args", caseBadArgs, Where::kComm, 60},
    {"two_comms_threads", caseTwoCommsThreads, Where::kComm, 60},
    {"window_mismatch", caseWindowMismatch, Where::kComm, 60},
    {"bad_shrink", caseBadShrink, Where::kComm, 60},
    {"destroyed_comm", caseDestroyedComm, Where::kComm, 60},
    {"params", caseParams, Where::kLocal, 30},
    {"encryption", caseEncryption, Where::kLocal, 30},
    {"window_user_ptr", caseWindowUserPtr, Where::kComm, 60},
    {"suspend", caseSuspend, Where::kComm, 60},
    {"one_sided", caseOneSided, Where::kComm, 60},
    {"coll_config", caseCollConfig, Where::kComm, 120},
    {"grow", caseGrow, Where::kComm, 120},
    {"peer_aborts", casePeerAborts, Where::kComm, 60},
    {"comm_id_env", caseCommIdEnv, Where::kProcsOnly, 60},
    {"kill_last", caseKillLast, Where::kProcsOnly, 120},
    {"kill_root", caseKillRoot, Where::kProcsOnly, 120},
    {"kill_midop", caseKillMidOp, Where::kProcsOnly, 120},
    {"init_missing_rank", caseInitMissingRank, Where::kProcsNoComm, 60},
    {"abort_during_init", caseAbortDuringInit, Where::kProcsNoComm, 60},
};

enum class Mode { kLocal, kThreads, kProcs };

bool caseInMode(const Case& cs, Mode m) {
  switch (cs.where) {
    case Where::kLocal: return m == Mode::kLocal;
    case Where::kComm: return m != Mode::kLocal;
    case Where::kProcsOnly:
    case Where::kProcsNoComm: return m == Mode::kProcs;
  }
  return false;
}

// One rank's life in a communicator case: init, the body, destroy.
int runRank(const Case& cs, Ctx& c) {
  if (cs.where != Where::kLocal && cs.where != Where::kProcsNoComm) {
    ncclUniqueId id = c.id(0);
    ncclResult_t r = ncclCommInitRank(&c.comm, c.nranks, id, c.rank);
    if (r != ncclSuccess) {
      c.fail("ncclCommInitRank returned %s: %s", resultName(r), ncclGetLastError(nullptr));
      return 1;
    }
  }
  cs.fn(c);
  if (c.comm) {
    ncclResult_t r = ncclCommDestroy(c.comm);
    if (r != ncclSuccess) c.fail("ncclCommDestroy returned %s: %s", resultName(r), ncclGetLastError(nullptr));
  }
  return c.failures ? 1 : 0;
}

struct Outcome {
  bool ok = true;
  std::string why;
};

// Waits for the pids until all end or the deadline passes (then kills the rest).
Outcome waitAll(const std::vector<pid_t>& pids, double timeoutS, const Shared* sh, bool ranksArePids) {
  Outcome o;
  double deadline = nowS() + timeoutS;
  std::vector<bool> done(pids.size(), false);
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      pid_t w = waitpid(pids[i], &status, WNOHANG);
      if (w != pids[i]) continue;
      done[i] = true;
      --left;
      bool expected = ranksArePids && sh->expectedDeath[i].load();
      std::string who = ranksArePids ? format("rank %zu", i) : std::string("the case process");
      if (WIFSIGNALED(status) && !(expected && WTERMSIG(status) == SIGKILL)) {
        o.ok = false;
        o.why += format(" %s died of signal %d (%s);", who.c_str(), WTERMSIG(status), strsignal(WTERMSIG(status)));
      } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        o.ok = false;
        o.why += format(" %s exited %d;", who.c_str(), WEXITSTATUS(status));
      }
    }
    if (left == 0) break;
    if (nowS() > deadline) {
      o.ok = false;
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i]) {
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          o.why += ranksArePids ? format(" rank %zu hung (killed after %.0f s);", i, timeoutS)
                                : format(" hung (killed after %.0f s);", timeoutS);
        }
      break;
    }
    sleepMs(2);
  }
  return o;
}

Outcome runCase(const Case& cs, Mode mode, int nranks, double timeoutScale) {
  Shared* sh = newShared();
  std::vector<pid_t> pids;
  const double timeoutS = cs.timeoutS * timeoutScale;
  const char* hostsEnv = std::getenv("NCCL_API_TEST_HOSTS");
  const int hosts = hostsEnv ? std::max(1, std::atoi(hostsEnv)) : 1;
  std::fflush(stdout);
  if (mode == Mode::kProcs) {
    for (int r = 0; r < nranks; ++r) {
      pid_t pid = fork();
      if (pid == 0) {
        if (hosts > 1) setenv("COLL_HOSTID", format("apitest-host%d", r * hosts / nranks).c_str(), 1);
        Ctx c;
        c.caseName = cs.name;
        c.rank = r;
        c.nranks = nranks;
        c.procs = true;
        c.sh = sh;
        int code = runRank(cs, c);
        std::fflush(stdout);
        std::exit(code);
      }
      pids.push_back(pid);
    }
    Outcome o = waitAll(pids, timeoutS, sh, true);
    if (sh->firstFailureSet.load()) o.why += std::string(" first: ") + sh->firstFailure;
    munmap(sh, sizeof(Shared));
    return o;
  }
  pid_t pid = fork();
  if (pid == 0) {
    int failed = 0;
    if (mode == Mode::kLocal) {
      Ctx c;
      c.caseName = cs.name;
      c.rank = 0;
      c.nranks = nranks;
      c.sh = sh;
      cs.fn(c);
      failed = c.failures;
    } else {
      std::vector<Ctx> ctx(nranks);
      std::vector<std::thread> threads;
      std::atomic<int> bad{0};
      for (int r = 0; r < nranks; ++r) {
        ctx[r].caseName = cs.name;
        ctx[r].rank = r;
        ctx[r].nranks = nranks;
        ctx[r].sh = sh;
        threads.emplace_back([&, r] { bad += runRank(cs, ctx[r]); });
      }
      for (auto& t : threads) t.join();
      failed = bad.load();
    }
    std::fflush(stdout);
    std::exit(failed ? 1 : 0);
  }
  pids.push_back(pid);
  Outcome o = waitAll(pids, timeoutS, sh, false);
  if (sh->firstFailureSet.load()) o.why += std::string(" first: ") + sh->firstFailure;
  munmap(sh, sizeof(Shared));
  return o;
}

// ---------------------------------------------------------------------------------------
// Catch2: one test per case, tagged with the modes it runs in. The environment picks the
// mode and the number of ranks (CTest sets them per test); a case runs only in its modes.

#ifdef __DRIVER_TYPES_H__
constexpr const char* kHeader = "NVIDIA's (with CUDA's)";
#else
constexpr const char* kHeader = "Collectives'";
#endif

struct Options {
  bool ok = true;
  std::string error;        // why not
  const char* mode = "";    // "": each case in its first mode (local, else procs)
  int nranks = 0;           // 0: 3 for local, 4 otherwise
  double timeoutScale = 1;  // multiplies every case's watchdog
};

Options readOptions() {
  Options o;
  if (const char* m = std::getenv("NCCL_API_TEST_MODE")) {
    for (const char* name : {"local", "threads", "procs"})
      if (std::strcmp(m, name) == 0) o.mode = name;
    if (!*o.mode) o = {false, format("NCCL_API_TEST_MODE=%s: not local, threads or procs", m)};
  }
  if (const char* n = std::getenv("NCCL_API_TEST_NRANKS")) {
    o.nranks = std::atoi(n);
    if (o.nranks < 1 || o.nranks > kMaxRanks) o = {false, format("NCCL_API_TEST_NRANKS=%s: not 1 to %d", n, kMaxRanks)};
  }
  if (const char* t = std::getenv("NCCL_API_TEST_TIMEOUT_SCALE")) {
    o.timeoutScale = std::atof(t);
    if (!(o.timeoutScale > 0)) o = {false, format("NCCL_API_TEST_TIMEOUT_SCALE=%s: not a positive number", t)};
  }
  gNotes = std::getenv("NCCL_API_TEST_NOTES") != nullptr;
  return o;
}

const char* tagsOf(Where w) {
  switch (w) {
    case Where::kLocal: return "[local]";
    case Where::kComm: return "[threads][procs]";
    case Where::kProcsOnly:
    case Where::kProcsNoComm: return "[procs]";
  }
  return "";
}

Mode modeNamed(const std::string& name) {
  return name == "local" ? Mode::kLocal : name == "threads" ? Mode::kThreads : Mode::kProcs;
}

std::vector<std::string> gFailed;  // repeated after Catch2's summary

template <size_t I>
void runCaseTest() {
  static const Options opt = readOptions();
  const Case& cs = kCases[I];
  if (!opt.ok) FAIL(opt.error);
  const std::string modeName = *opt.mode ? opt.mode : cs.where == Where::kLocal ? "local" : "procs";
  const Mode mode = modeNamed(modeName);
  if (!caseInMode(cs, mode)) {
    WARN("skipped: " << cs.name << " does not run in mode " << modeName << " (its tags: " << tagsOf(cs.where) << ")");
    return;
  }
  const int nranks = opt.nranks ? opt.nranks : mode == Mode::kLocal ? 3 : 4;
  double start = nowS();
  Outcome o = runCase(cs, mode, nranks, opt.timeoutScale);
  if (!o.ok) gFailed.push_back(format("%s (%s, %d ranks):%s", cs.name, modeName.c_str(), nranks, o.why.c_str()));
  INFO(cs.name << " in mode " << modeName << " on " << nranks << " ranks, header " << kHeader
               << format(", %.2f s:", nowS() - start) << o.why);
  CHECK(o.ok);
}

template <size_t... I>
bool registerCases(std::index_sequence<I...>) {
  (Catch::AutoReg(Catch::makeTestInvoker(&runCaseTest<I>), CATCH_INTERNAL_LINEINFO, Catch::StringRef(),
                  Catch::NameAndTags{kCases[I].name, tagsOf(kCases[I].where)}),
   ...);
  return true;
}
const bool kRegistered = registerCases(std::make_index_sequence<std::size(kCases)>());

// CI logs keep a run's head and tail: the failed cases again, at the very end.
struct FailedAgain : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunEnded(const Catch::TestRunStats&) override {
    for (const std::string& f : gFailed) std::printf("  FAILED %s\n", f.c_str());
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(FailedAgain)

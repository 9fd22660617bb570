// A profiler plugin for the tests: records every call into memory that the test reads
// through testProfilerEvents() (profiler_record.h), found with dlsym on the same library.
//
// Built once per table it exports (tests/CMakeLists.txt): PROFILER_V<N> exports
// ncclProfiler_v<N> alone; PROFILER_FAIL a v6 table whose init fails;
// PROFILER_NULL_MEMBER a v5 table without recordEventState; PROFILER_NONE no table at all. COLL_TEST_PROFILER_MASK (hex or decimal) is the activation mask init
// returns (default: every event type).
#include <cstdlib>
#include <deque>
#include <mutex>

#include "plugins/profiler_record.h"
#include "profiler/profiler_abi.h"

using namespace coll::profabi;

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::mutex mu;
testprof::Log logged;
std::deque<testprof::Event> events;
std::deque<testprof::Context> contexts;
long clock_ = 0;

int maskFromEnv() {
  const char* m = std::getenv("COLL_TEST_PROFILER_MASK");
  return m ? static_cast<int>(std::strtol(m, nullptr, 0)) : 0x7fff;
}

testprof::Event* eventOf(void* handle) {
  for (testprof::Event* e : logged.events)
    if (e == handle) return e;
  logged.misuse.push_back("unknown event handle");
  return nullptr;
}

void checkLive(testprof::Event* e) {
  auto* c = static_cast<testprof::Context*>(e->context);
  if (c->finalized) e->afterFinalize = true;
}

int initCommon(void** context, int* mask, const char* name, uint64_t hash, int nNodes, int nranks, int rank) {
  std::lock_guard<std::mutex> lock(mu);
  contexts.emplace_back();
  testprof::Context& c = contexts.back();
  c.rank = rank;
  c.nranks = nranks;
  c.nNodes = nNodes;
  c.commHash = hash;
  c.commName = name ? name : "";
  c.mask = mask;
  c.initAt = ++clock_;
  *mask = maskFromEnv();
  *context = &c;
  logged.contexts.push_back(&c);
  return kProfSuccess;
}

int finalize(void* context) {
  std::lock_guard<std::mutex> lock(mu);
  auto* c = static_cast<testprof::Context*>(context);
  if (c->finalized) logged.misuse.push_back("finalize twice");
  c->finalized = true;
  c->finalizedAt = ++clock_;
  return kProfSuccess;
}

int stopEvent(void* handle) {
  std::lock_guard<std::mutex> lock(mu);
  testprof::Event* e = eventOf(handle);
  if (!e) return kProfSuccess;
  checkLive(e);
  if (e->stopped >= 0) logged.misuse.push_back("event stopped twice");
  e->stopped = ++clock_;
  return kProfSuccess;
}

template <class Args>
int recordState(void* handle, int state, Args*) {
  std::lock_guard<std::mutex> lock(mu);
  testprof::Event* e = eventOf(handle);
  if (!e) return kProfSuccess;
  checkLive(e);
  if (e->stopped >= 0) logged.misuse.push_back("state recorded after stop");
  e->states.push_back(state);
  return kProfSuccess;
}

// Version 1's numbers as NCCL's names.
const char* funcName(uint8_t f) {
  static const char* const kNames[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                       "AllReduce", "SendRecv", "Send",      "Recv"};
  return f < 8 ? kNames[f] : "?";
}
const char* typeName(uint8_t t) {
  static const char* const kNames[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                       "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return t < 12 ? kNames[t] : "?";
}
const char* algoName(uint8_t a) { return a == 0 ? "TREE" : a == 1 ? "RING" : "?"; }
const char* protoName(uint8_t p) { return p == 0 ? "LL" : p == 1 ? "LL128" : p == 2 ? "SIMPLE" : "?"; }
const char* str(const char* s) { return s ? s : ""; }

// The fields every version lays out alike.
template <class D>
void common(const D& d, testprof::Event& e) {
  e.type = d.type;
  e.parent = d.parentObj;
  e.rank = d.rank;
  if (d.type == kEvProxyOp) {
    e.channelId = d.proxyOp.channelId;
    e.root = d.proxyOp.peer;
    e.nSteps = d.proxyOp.nSteps;
    e.isSend = d.proxyOp.isSend;
  }
  if (d.type == kEvProxyStep) e.step = d.proxyStep.step;
}

template <class D>
void tasks(const D& d, testprof::Event& e) {
  if (d.type == kEvColl) {
    if constexpr (std::is_same_v<D, DescrV1>) {
      e.func = funcName(d.coll.func);
      e.datatype = typeName(d.coll.datatype);
      e.algo = algoName(d.coll.algo);
      e.proto = protoName(d.coll.proto);
    } else {
      e.func = str(d.coll.func);
      e.datatype = str(d.coll.datatype);
      e.algo = str(d.coll.algo);
      e.proto = str(d.coll.proto);
    }
    e.seq = d.coll.seqNumber;
    e.count = d.coll.count;
    e.root = d.coll.root;
    if constexpr (requires { d.coll.nChannels; }) e.nChannels = d.coll.nChannels;
    else e.nChannels = d.coll.nMaxChannels;
    if constexpr (requires { d.coll.parentGroup; }) e.parentGroup = d.coll.parentGroup;
    if constexpr (requires { d.coll.commHash; }) {
      e.commHash = d.coll.commHash;
      e.commName = str(d.coll.name);
    }
  } else if (d.type == kEvP2p) {
    if constexpr (std::is_same_v<D, DescrV1>) {
      e.func = funcName(d.p2p.func);
      e.datatype = typeName(d.p2p.datatype);
    } else {
      e.func = str(d.p2p.func);
      e.datatype = str(d.p2p.datatype);
    }
    e.count = d.p2p.count;
    e.root = d.p2p.peer;
    if constexpr (requires { d.p2p.nChannels; }) e.nChannels = d.p2p.nChannels;
    if constexpr (requires { d.p2p.parentGroup; }) e.parentGroup = d.p2p.parentGroup;
  }
}

template <class D>
void newer(const D& d, testprof::Event& e) {
  if constexpr (requires { d.kernelCh; }) {
    if (d.type == kEvKernelCh) e.channelId = d.kernelCh.channelId;
  }
  if constexpr (requires { d.collApi; }) {
    if (d.type == kEvGroupApi) e.groupDepth = d.groupApi.groupDepth;
    if (d.type == kEvCollApi) {
      e.func = str(d.collApi.func);
      e.count = d.collApi.count;
      e.datatype = str(d.collApi.datatype);
      e.root = d.collApi.root;
    }
    if (d.type == kEvP2pApi) {
      e.func = str(d.p2pApi.func);
      e.count = d.p2pApi.count;
      e.datatype = str(d.p2pApi.datatype);
    }
  }
}

template <class D>
int startEvent(void* context, void** handle, D* d) {
  std::lock_guard<std::mutex> lock(mu);
  events.emplace_back();
  testprof::Event& e = events.back();
  e.context = context;
  common(*d, e);
  tasks(*d, e);
  newer(*d, e);
  checkLive(&e);
  e.started = ++clock_;
  logged.events.push_back(&e);
  *handle = &e;
  return kProfSuccess;
}

int initV1(void** context, int* mask) { return initCommon(context, mask, nullptr, 0, 0, 0, -1); }
int initV4(void** context, int* mask, const char* name, uint64_t hash, int nNodes, int nranks, int rank, Logger) {
  return initCommon(context, mask, name, hash, nNodes, nranks, rank);
}
int initV5(void** context, uint64_t hash, int* mask, const char* name, int nNodes, int nranks, int rank, Logger log) {
  log(3, 1, __FILE__, __LINE__, "test profiler: init of rank %d", rank);
  return initCommon(context, mask, name, hash, nNodes, nranks, rank);
}
int initFails(void**, uint64_t, int*, const char*, int, int, int, Logger) { return 3; }

}  // namespace

// One table, exported under NCCL's name for its version.
#define TEST_TABLE(N, Init, Args, name)                                                                           \
  EXPORT const TableV##N ncclProfiler_v##N = {name,    Init, startEvent<DescrV##N>, stopEvent, recordState<Args>, \
                                              finalize};

#if defined(PROFILER_V1)
TEST_TABLE(1, initV1, StateArgsV1, "testprof1")
#define TEST_VERSION 1
#elif defined(PROFILER_V2)
TEST_TABLE(2, initV1, StateArgsV1, "testprof2")
#define TEST_VERSION 2
#elif defined(PROFILER_V3)
TEST_TABLE(3, initV1, StateArgsV1, "testprof3")
#define TEST_VERSION 3
#elif defined(PROFILER_V4)
TEST_TABLE(4, initV4, StateArgsV4, "testprof4")
#define TEST_VERSION 4
#elif defined(PROFILER_V5)
TEST_TABLE(5, initV5, StateArgsV4, "testprof5")
#define TEST_VERSION 5
#elif defined(PROFILER_V6)
TEST_TABLE(6, initV5, StateArgsV4, "testprof6")
#define TEST_VERSION 6
#elif defined(PROFILER_FAIL)
TEST_TABLE(6, initFails, StateArgsV4, "testprofFail")
#define TEST_VERSION 6
#elif defined(PROFILER_NULL_MEMBER)
EXPORT const TableV5 ncclProfiler_v5 = {"testprofNull", initV5, startEvent<DescrV5>, stopEvent, nullptr, finalize};
#define TEST_VERSION 5
#else  // PROFILER_NONE
#define TEST_VERSION 0
#endif

// What was recorded so far (the caller holds no lock: read it once the ranks are done).
EXPORT const testprof::Log* testProfilerEvents() {
  logged.version = TEST_VERSION;
  return &logged;
}

// Sets the activation mask of rank `rank`'s latest context, as a plugin may at any time.
EXPORT void testProfilerSetMask(int rank, int mask) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = logged.contexts.rbegin(); it != logged.contexts.rend(); ++it)
    if ((*it)->rank == rank) {
      __atomic_store_n((*it)->mask, mask, __ATOMIC_RELAXED);
      return;
    }
}

// Forgets everything recorded (contexts stay valid for their communicators).
EXPORT void testProfilerReset() {
  std::lock_guard<std::mutex> lock(mu);
  logged.events.clear();
  logged.misuse.clear();
  for (testprof::Context* c : logged.contexts)
    if (!c->finalized) return;  // a live communicator keeps its context listed
  logged.contexts.clear();
}

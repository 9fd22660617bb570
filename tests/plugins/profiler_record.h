// What the test profiler plugin (profiler_plugin.cc) records of the events it is given,
// read by tests/test_profiler.cc through the plugin's exported testProfilerEvents().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace testprof {

// One event as the plugin saw it, its fields in the newest layout's words (version 1's
// numbers turned back into NCCL's names).
struct Event {
  void* context = nullptr;
  uint64_t type = 0;
  void* parent = nullptr;
  void* parentGroup = nullptr;  // v5/v6 collectives and p2p
  int rank = -1;
  std::string func, datatype, algo, proto, commName;
  uint64_t seq = 0, commHash = 0;
  size_t count = 0;
  int root = -1;  // root, or p2p peer, or proxyOp peer
  int nChannels = 0;
  int channelId = -1;
  int step = -1, nSteps = -1, isSend = -1;
  int groupDepth = -1;
  long started = 0, stopped = -1;  // positions in the plugin's call order
  std::vector<int> states;
  bool afterFinalize = false;  // a call on it came after its context's finalize
};

// One communicator's context.
struct Context {
  int rank = -1, nranks = 0, nNodes = 0;
  uint64_t commHash = 0;
  std::string commName;
  int* mask = nullptr;
  bool finalized = false;
  long initAt = 0, finalizedAt = -1;
};

struct Log {
  int version = 0;
  std::vector<Context*> contexts;
  std::vector<Event*> events;       // in start order
  std::vector<std::string> misuse;  // calls that broke the protocol (unknown handle, ...)
};

}  // namespace testprof

// One rank of the soak: its communicators, its buffers, the steps it runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "calls.h"
#include "soak.h"

namespace soak {

struct Options {
  uint64_t seed = 0;
  bool seedGiven = false;
  double seconds = 60;                // stop at the first checkpoint after this long
  uint64_t steps = 0;                 // or after exactly this many steps (reproducing a failure)
  uint64_t checkSteps = 100;          // steps between checkpoints (children destroyed, resources sampled)
  size_t maxBytes = size_t{4} << 20;  // per buffer
  int threads = 0;                    // ranks as threads of this process instead of collrun's processes
  double warmFraction = 0.25;
  size_t tableRows = 40;
  double opTimeout = 300;      // collCommSetTimeout on every communicator: a hang becomes an error
  bool mallocDefault = false;  // keep glibc's sliding mmap threshold (see main())
  std::string command;         // as started, for the line that reproduces a failure
  uint64_t corruptStep = 0;    // >0: world rank 0 flips an output bit from this step on, once
  std::string csv;             // a file prefix: every sample also as a row of <csv>.rank<r>.csv
};

// What the ranks of one process share.
struct Shared {
  Options opt;
  std::chrono::steady_clock::time_point start;
  std::mutex mu;
  std::vector<Sample> samples;
  double lastProgress = 0;   // when world rank 0 last printed a progress line
  std::FILE* csv = nullptr;  // Options::csv's file of this process, once opened
  std::atomic<uint64_t> ops{0}, bytes{0};
};

class Rank {
 public:
  Rank(Shared& shared, int worldRank, int worldSize);
  // Runs until the time or step limit; exits the process on a failure. At the end the
  // rank that samples for this process calls report(steps run), whose verdict it returns.
  bool run(const collUniqueId& worldId, const std::function<bool(uint64_t)>& report);

 private:
  static constexpr int kChildren = 3;  // communicator slots after the world's

  void initWorld(const collUniqueId& id);
  void agreeSeed();
  void prime(uint64_t k);
  void step(uint64_t k);
  void opsStep(Rng& rng, int nops, bool grouped, uint64_t k);
  void runCalls(std::vector<Call>& calls, bool grouped, uint64_t k, const char* what);
  void splitStep(Rng& rng, uint64_t k);
  void destroyStep(Rng& rng, uint64_t k);
  void recreateWorld(uint64_t k);
  bool checkpoint(uint64_t k);
  int64_t controlMax(int64_t v, uint64_t k);
  void destroy(int slot, bool finalize, uint64_t k);
  void setTimeout(collComm_t comm, uint64_t k);
  int pickLive(Rng& rng) const;
  [[noreturn]] void fail(uint64_t k, const std::string& what) const;
  void check(collResult_t rc, collComm_t comm, uint64_t k, const std::string& what) const;

  Shared& sh_;
  int world_, nworld_;
  uint64_t seed_ = 0;
  std::vector<View> views_;  // [0] the world, then the children of splits
  std::vector<bool> live_;   // the same on every rank; a live slot may hold no comm here
  std::vector<Buffers> bufs_;
  std::vector<unsigned char> scratch_;
  bool corrupted_ = false;
};

}  // namespace soak

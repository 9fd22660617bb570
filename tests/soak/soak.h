// The soak program's parts: the shared random choices, the operations it checks, the
// inputs every rank can recompute, and the resource samples (docs/SECURITY.md "Soak").
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "collectives/collectives.h"

namespace soak {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// splitmix64: every rank seeds it alike, so every rank draws the same choices.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix(state_++ * 0x2545f4914f6cdd1dull); }
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }

 private:
  uint64_t state_;
};

enum class Kind {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,   // every rank sends to rank+shift and receives from rank-shift
  kAlltoAllv,  // sends and receives to and from every rank, a different count per pair
  kCount
};
const char* kindName(Kind k);
bool isReduction(Kind k);
bool perRankBlocks(Kind k);  // a buffer of one block per rank on one side at least

// A PreMulSum op made for the one call (OpSpec::op), scalars differing by rank.
constexpr int kPreMulSum = collNumOps;

// One operation, as every rank draws it.
struct OpSpec {
  Kind kind = Kind::kAllReduce;
  collDataType_t type = collUint8;
  int op = collSum;  // a collRedOp_t or kPreMulSum
  size_t count = 0;
  uint64_t rootDraw = 0;  // root = rootDraw % ranks of the communicator
  uint64_t shift = 0;     // kSendRecv: peer offset, modulo the ranks
  bool inPlace = false;
  bool scalarImmediate = false;  // PreMulSum scalar residence
  uint64_t dataSeed = 0;
  std::string describe() const;
};

// This rank's view of one communicator: its handle and the world ranks in comm order.
struct View {
  collComm_t comm = nullptr;
  int rank = 0;
  std::vector<int> members;
  int size() const { return static_cast<int>(members.size()); }
};

// Buffers of one operation: both hold capacity bytes plus a guard that must stay intact.
struct Buffers {
  std::vector<unsigned char> send, recv;
};
constexpr size_t kGuard = 64;

// The inputs of one operation on a communicator of n ranks: element idx of the logical
// input of the rank with world rank src. Reductions get values whose results are exact in
// any order (small integers within every type's exact range, never -0); the other kinds
// any bits.
class Inputs {
 public:
  Inputs(const OpSpec& s, int n);
  void fill(void* dst, int src, size_t first, size_t count) const;
  // The reduction over members of element idx, written as element i of out.
  void expect(void* out, size_t i, const std::vector<int>& members, size_t idx) const;
  // The scalar of rank src's PreMulSum op, in the operation's type (8 bytes).
  void scalar(void* out, int src) const;
  size_t elemSize() const { return es_; }

 private:
  uint64_t hash(int src, size_t idx) const;
  double floatValue(int src, size_t idx) const;
  double floatScalar(int src) const;
  uint64_t intScalar(int src) const;
  void expectInt(void* out, size_t i, const std::vector<int>& members, size_t idx) const;
  OpSpec s_;
  int n_;
  size_t es_;
  bool int_;
  int magnitude_ = 1;  // sums: inputs in [-magnitude_, magnitude_] \ {0}
  int scalarMax_ = 1;  // PreMulSum scalars +-1 or +-2
};

// Text of element i of buf, for messages.
std::string elementText(const void* buf, size_t i, collDataType_t t);

// Resources of this process at one moment.
struct Sample {
  double seconds = 0;
  uint64_t steps = 0, ops = 0;
  long rssKiB = 0;   // after malloc_trim() (the allocator's free memory goes back first), less
                     // shared-memory files not the library's (the verbs emulation's fabric)
  long anonKiB = 0;  // the anonymous part of rssKiB (heap, mmap'd blocks, stacks): not shm
  long heapKiB = 0;  // bytes malloc has handed out and not had back (all arenas, mmap'd blocks), less the
                     // soak's own list of samples
  int fds = 0, threads = 0;
  int shmFiles = 0;  // /dev/shm/coll-* segments this process created and has not unlinked
  int shmMaps = 0;   // distinct /dev/shm/coll-* segments this process maps
};
// A sample where descriptors and threads have not grown since `previous`, if that happens
// within a second: teardown that finishes asynchronously (a thread on its way out) is
// not counted, a leak stays.
Sample sampleResources(const Sample* previous);

struct Verdict {
  bool flat = true;
  std::string text;  // one line per resource
};
// After warm-up (the first warmFraction of the samples, at least one), the last third may
// not exceed the warm-up maximum: RSS and heap by more than max(8 MiB, 10%), the rest not
// at all.
Verdict judge(const std::vector<Sample>& samples, double warmFraction);
// The CSV form of the samples, for plots: writeCsvHeader once, then one row each.
void writeCsvHeader(std::FILE* f);
void writeCsvRow(std::FILE* f, const Sample& s);
// At most maxRows evenly spaced samples, the first and last included.
void printSamples(const std::vector<Sample>& samples, size_t maxRows);

}  // namespace soak

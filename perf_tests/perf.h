// The shared harness of all_reduce_perf and friends: nccl-tests' options, sizes, table,
// verification and timing, for host buffers, with ranks as threads (-t) and/or processes
// (one per launcher rank).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/collectives.h"

namespace perf {

enum class Coll {
  kAllReduce,
  kAllGather,
  kBroadcast,
  kReduce,
  kReduceScatter,
  kSendRecv,
  kAllToAll,
  kGather,
  kScatter
};

// nccl-tests' stand-in for a PreMulSum op in Options::ops (`-o mulsum`; `-o all` ends
// with it): not an op of the library. Each rank makes the real one per data type with
// collRedOpCreatePreMulSum(), its scalar preMulScalar(rank) read once
// (collScalarHostImmediate), before it times anything, and destroys it at the end.
inline constexpr collRedOp_t kMulSum = collNumOps;

// Options::wire when --wire is not given: the plain (uncompressed) calls.
inline constexpr collDataType_t kNoWire = collNumTypes;

struct Options {
  size_t minBytes = 32 << 20;
  size_t maxBytes = 32 << 20;
  double stepFactor = 1;  // > 1: multiply; otherwise add stepBytes
  size_t stepBytes = 1 << 20;
  int iters = 20;
  int warmupIters = 1;
  int aggIters = 1;
  int check = 1;
  std::vector<collRedOp_t> ops{collSum};
  std::vector<collDataType_t> types{collFloat32};
  int root = 0;  // -1: all roots
  int blocking = 0;
  int average = 1;  // 0 rank 0, 1 avg, 2 min, 3 max
  int nthreads = 1;
  int ngpus = 1;
  std::string outputFile;    // -J
  std::string mem = "auto";  // host, device, or auto (device where a GPU is usable); resolved by parseOptions
  int offset = -1;           // host buffers start this many bytes past a page boundary; -1: as allocated
  // -R: host buffers from collMemAlloc, registered once for the whole sweep: 0 no, 1
  // collCommRegister, 2 symmetric windows (collCommWindowRegister), as nccl-tests' -R.
  int registerMode = 0;
  bool copyBound = false;  // --copy_bound: measure and print the memory-traffic bound first
  // --wire: the compressed calls (collAllReduceCompressed...) with this wire type,
  // collFloat16 or collBfloat16; kNoWire: the plain calls.
  collDataType_t wire = kNoWire;
};

// Parses argv. Returns 0 to go on, otherwise the exit code (help printed: 0 via *stop).
int parseOptions(Coll coll, int argc, char** argv, Options* opt, bool* stop);

// Whether the benchmark has a compressed form (--wire): allreduce, reduce-scatter,
// allgather, broadcast and reduce.
bool hasCompressed(Coll coll);

// collectives.h's error bound of a compressed result whose value went through `rounds`
// roundings to wire (ranks of a reduction, 1 for a copy) with S = s (fp16: the largest S
// of its 256-element block); for avg, divide by the number of ranks.
double wireBound(collDataType_t wire, int rounds, double s);

// nccl-tests' bus bandwidth factor for the collective on n ranks.
double busBwFactor(Coll coll, int nranks);

// Sizes from min to max by factor or step (nccl-tests' rule).
std::vector<size_t> sizeList(const Options& o);

// Elements per rank (the count passed to the call) and the count/size printed for a
// nominal size in bytes: allgather/reduce-scatter/alltoall/gather/scatter print totals.
struct Shape {
  size_t callCount;   // count argument of the call
  size_t printCount;  // "count" column
  size_t printBytes;  // "size" column
};
Shape shapeFor(Coll coll, size_t bytes, size_t typeSize, int nranks);
// Bytes of the send and receive buffers one rank needs for a call of shape s.
void bufferBytes(Coll coll, const Shape& s, size_t typeSize, int nranks, size_t* sendBytes, size_t* recvBytes);

const char* typeName(collDataType_t t);
const char* opName(collRedOp_t op);
bool parseType(const std::string& s, collDataType_t* t);
bool parseOp(const std::string& s, collRedOp_t* op);

// nccl-tests' PreMulSum scalar of a rank (ncclVerifiablePremulScalar): 1 on even ranks,
// 2 on odd ones, as one element of t written to out (8 bytes suffice).
void preMulScalar(collDataType_t t, int rank, void* out);

// Runs the whole benchmark; returns the process exit code.
int runPerf(Coll coll, int argc, char** argv);

}  // namespace perf

// Test harness: threads as ranks, reference data and reference reductions.
//
// Catch2 assertions are not thread-safe, so rank threads never assert: they return an
// error string (empty when fine) and the main thread REQUIREs on the collected results.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/collectives.h"

namespace testing {

// Sets an environment variable for the lifetime of the object, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_;
  std::string old_;
};

// The library's log lines go to a file of this process for the object's lifetime
// (COLL_DEBUG_FILE, read again through collResetDebugInit at both ends: the log reads
// it once otherwise, so a test run after others in one process would miss its lines).
class CapturedLog {
 public:
  explicit CapturedLog(const std::string& name);
  ~CapturedLog();
  CapturedLog(const CapturedLog&) = delete;
  CapturedLog& operator=(const CapturedLog&) = delete;
  std::string text() const;                  // all written so far
  int count(const std::string& what) const;  // lines that contain `what`

 private:
  std::string path_;
  std::optional<ScopedEnv> file_;
};

// Runs body(rank, comm) on nranks threads, each owning rank `rank` of a fresh
// communicator (made with collGetUniqueId + collCommInitRank). Returns one message per
// failed rank ("rank r: ..."), empty when all succeeded. Comms are destroyed afterwards.
std::vector<std::string> runRanks(int nranks, const std::function<std::string(int, collComm_t)>& body);

// The long sweeps' cases are many and each is quick; under a checker that slows every
// rank 10-20 times (ThreadSanitizer) they would take hours. COLL_TEST_SHARE=N (unset: 1)
// makes such a sweep run one case in N: sampled(i, salt) says whether case i runs. Callers
// pass a salt that differs between the runs of one sweep (the rank count, the setting),
// so different runs take different cases and together still cross every collective,
// count, type and form the whole sweep does.
int testShare();
bool sampled(size_t index, size_t salt);

// Seeds with this bit give floating-point sums and products inputs whose results round
// differently in different orders (k/37, factors like 1.1): for tests of the order.
constexpr uint64_t kOrderSensitiveSeed = 1ull << 40;

// The input element i of `rank` for one test case (seed), encoded in dtype, non-zero,
// small enough that sums and products stay meaningful in every type (exact in every order
// for floating-point sums, unless the seed has kOrderSensitiveSeed).
void fillInput(void* buf, size_t count, collDataType_t t, collRedOp_t op, int rank, uint64_t seed);

// Expected result of reducing element i over ranks, combining contributions in `order`
// (the chain the algorithm uses), rounding in the type after each step as the library
// does (narrow floats in fp32). Writes one element to out.
void referenceReduce(void* out, collDataType_t t, collRedOp_t op, const std::vector<int>& order, size_t i,
                     uint64_t seed, int nranks);

// Reads element i of an array of type t as bytes, for exact comparison.
bool sameElement(const void* a, const void* b, size_t i, collDataType_t t);
std::string elementString(const void* buf, size_t i, collDataType_t t);

}  // namespace testing

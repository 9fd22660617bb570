#include "rank.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace soak {

Rank::Rank(Shared& shared, int worldRank, int worldSize)
    : sh_(shared), world_(worldRank), nworld_(worldSize), views_(1 + kChildren), live_(1 + kChildren, false) {
  bufs_.resize(5);
  for (Buffers& b : bufs_) {
    // Touched now, so resident memory does not grow as larger operations come.
    b.send.assign(shared.opt.maxBytes + kGuard, 0);
    b.recv.assign(shared.opt.maxBytes + kGuard, 0);
  }
  scratch_.assign(shared.opt.maxBytes + kGuard, 0);
}

void Rank::fail(uint64_t k, const std::string& what) const {
  std::fprintf(stderr,
               "soak: FAILED: world rank %d of %d, seed %llu, step %llu: %s\n"
               "soak: reproduce under the same launcher and environment: %s --seed %llu --steps %llu\n",
               world_, nworld_, static_cast<unsigned long long>(seed_), static_cast<unsigned long long>(k),
               what.c_str(), sh_.opt.command.c_str(), static_cast<unsigned long long>(seed_),
               static_cast<unsigned long long>(k + 1));
  std::fflush(stderr);
  std::fflush(stdout);
  _exit(1);
}

void Rank::check(collResult_t rc, collComm_t comm, uint64_t k, const std::string& what) const {
  if (rc == collSuccess) return;
  fail(k, what + ": " + collGetErrorString(rc) + ": " + collGetLastError(comm));
}

void Rank::setTimeout(collComm_t comm, uint64_t k) {
  if (comm && sh_.opt.opTimeout > 0) check(collCommSetTimeout(comm, sh_.opt.opTimeout), comm, k, "collCommSetTimeout");
}

void Rank::initWorld(const collUniqueId& id) {
  collComm_t comm = nullptr;
  check(collCommInitRank(&comm, nworld_, id, world_), nullptr, 0, "collCommInitRank");
  views_[0].comm = comm;
  views_[0].rank = world_;
  views_[0].members.resize(static_cast<size_t>(nworld_));
  for (int r = 0; r < nworld_; ++r) views_[0].members[static_cast<size_t>(r)] = r;
  live_[0] = true;
  setTimeout(comm, 0);
  // COLL_COMM_ID made the first world's id; a new world's (recreateWorld) must be fresh.
  if (sh_.opt.threads == 0) {
    unsetenv("COLL_COMM_ID");
    unsetenv("NCCL_COMM_ID");
  }
}

// Rank 0's seed (given, or drawn now) for everyone: every choice derives from it.
void Rank::agreeSeed() {
  uint64_t seed = sh_.opt.seed;
  if (!sh_.opt.seedGiven && world_ == 0) seed = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  check(collBroadcast(&seed, &seed, 1, collUint64, 0, views_[0].comm, nullptr), views_[0].comm, 0, "seed broadcast");
  seed_ = seed;
  if (world_ == 0) std::printf("soak: seed %llu, %d ranks\n", static_cast<unsigned long long>(seed_), nworld_);
}

int64_t Rank::controlMax(int64_t v, uint64_t k) {
  collComm_t comm = views_[0].comm;
  check(collAllReduce(&v, &v, 1, collInt64, collMax, comm, nullptr), comm, k, "checkpoint allreduce");
  return v;
}

int Rank::pickLive(Rng& rng) const {
  std::vector<int> slots;
  for (int s = 0; s < static_cast<int>(live_.size()); ++s)
    if (live_[static_cast<size_t>(s)]) slots.push_back(s);
  return slots[rng.below(slots.size())];
}

void Rank::destroy(int slot, bool finalize, uint64_t k) {
  View& v = views_[static_cast<size_t>(slot)];
  if (v.comm && finalize) check(collCommFinalize(v.comm), v.comm, k, "collCommFinalize");
  if (v.comm) check(collCommDestroy(v.comm), nullptr, k, "collCommDestroy of slot " + std::to_string(slot));
  v = View{};
  live_[static_cast<size_t>(slot)] = false;
}

void Rank::runCalls(std::vector<Call>& calls, bool grouped, uint64_t k, const char* what) {
  auto where = [&](const Call& c) {
    return std::string(what) + " on a communicator of " + std::to_string(c.view().size()) + " ranks (rank " +
           std::to_string(c.view().rank) + "): " + c.spec().describe();
  };
  for (Call& c : calls) {
    std::string bad = c.prepare();
    if (!bad.empty()) fail(k, where(c) + ": " + bad);
  }
  if (grouped) check(collGroupStart(), nullptr, k, "collGroupStart");
  for (Call& c : calls) check(c.issue(), c.view().comm, k, where(c));
  if (grouped)
    check(collGroupEnd(), calls.empty() ? nullptr : calls[0].view().comm, k, std::string(what) + " group end");
  if (sh_.opt.corruptStep && k >= sh_.opt.corruptStep && world_ == 0 && !corrupted_)
    for (Call& c : calls)
      if (!corrupted_) corrupted_ = c.corrupt();
  for (Call& c : calls) {
    std::string bad = c.verify(scratch_);
    if (bad.empty()) bad = c.release();
    if (!bad.empty()) fail(k, where(c) + ": " + bad);
    sh_.ops.fetch_add(1, std::memory_order_relaxed);
    sh_.bytes.fetch_add(c.payloadBytes(), std::memory_order_relaxed);
  }
}

void Rank::opsStep(Rng& rng, int nops, bool grouped, uint64_t k) {
  std::vector<Call> calls;
  calls.reserve(static_cast<size_t>(nops));
  for (int j = 0; j < nops; ++j) {
    int slot = pickLive(rng);
    OpSpec spec = drawOp(rng, nworld_, sh_.opt.maxBytes);
    View* v = &views_[static_cast<size_t>(slot)];
    if (v->comm) calls.emplace_back(spec, v, &bufs_[static_cast<size_t>(j)]);
  }
  runCalls(calls, grouped, k, grouped ? "group" : "op");
}

// Every kind at three sizes on the world (the largest fills the buffers), and send/recv to
// every distance: the connections and buffers every later operation may use exist, and
// their pages are touched, before the first sample.
void Rank::prime(uint64_t k) {
  for (int kind = 0; kind < static_cast<int>(Kind::kCount); ++kind) {
    int shifts = static_cast<Kind>(kind) == Kind::kSendRecv ? std::max(1, nworld_ - 1) : 1;
    size_t full = sh_.opt.maxBytes / (perRankBlocks(static_cast<Kind>(kind)) ? static_cast<size_t>(nworld_) : 1);
    for (size_t bytes : {size_t{8}, size_t{40000}, full}) {
      for (int shift = 1; shift <= shifts; ++shift) {
        OpSpec s;
        s.kind = static_cast<Kind>(kind);
        s.type = isReduction(s.kind) ? collFloat32 : collUint8;
        s.count = bytes / (isReduction(s.kind) ? 4 : 1);
        s.rootDraw = static_cast<uint64_t>(kind);
        s.shift = static_cast<uint64_t>(shift);
        s.dataSeed = mix(seed_ ^ (static_cast<uint64_t>(kind) << 32) ^ bytes ^ static_cast<uint64_t>(shift));
        std::vector<Call> calls;
        calls.emplace_back(s, &views_[0], &bufs_[0]);
        runCalls(calls, false, k, "prime");
      }
    }
  }
  // The communicator keeps the two largest PreMulSum (and in-place alltoall) inputs
  // for reuse (ScratchPool, comm/comm.h): fill it to that bound now.
  std::vector<Call> calls;
  for (size_t j = 0; j < 2; ++j) {
    OpSpec s;
    s.type = collUint8;
    s.op = kPreMulSum;
    s.count = sh_.opt.maxBytes;
    s.dataSeed = mix(seed_ ^ j);
    calls.emplace_back(s, &views_[0], &bufs_[j]);
  }
  runCalls(calls, true, k, "prime");
}

}  // namespace soak

// The steps besides operations: splits, destroys, a new world, checkpoints; and the run.
#include <algorithm>
#include <cstdio>
#include <numeric>

#include "rank.h"

namespace soak {

void Rank::step(uint64_t k) {
  Rng rng(mix(seed_ ^ mix(k + 1)));
  uint64_t u = rng.below(1000);
  if (u < 25) return splitStep(rng, k);
  if (u < 50) return destroyStep(rng, k);
  if (u < 53) return recreateWorld(k);
  if (u < 300) return opsStep(rng, 2 + static_cast<int>(rng.below(4)), true, k);
  opsStep(rng, 1, rng.chance(0.1), k);
}

// Splits a live communicator into a child slot: random colors (COLL_SPLIT_NOCOLOR too)
// and keys, sometimes inside a group; checks the child's size and ranks.
void Rank::splitStep(Rng& rng, uint64_t k) {
  int parent = pickLive(rng), slot = 1 + static_cast<int>(rng.below(kChildren));
  std::vector<int> colors(static_cast<size_t>(nworld_)), keys(colors.size());
  for (size_t j = 0; j < colors.size(); ++j) {
    colors[j] = rng.chance(0.15) ? COLL_SPLIT_NOCOLOR : static_cast<int>(rng.below(3));
    keys[j] = static_cast<int>(rng.below(4));
  }
  bool grouped = rng.chance(0.3);
  const View& p = views_[static_cast<size_t>(parent)];
  View child;
  if (p.comm) {
    int color = colors[static_cast<size_t>(p.rank)];
    std::string what = "collCommSplit of slot " + std::to_string(parent) + " color " + std::to_string(color);
    if (grouped) check(collGroupStart(), nullptr, k, "collGroupStart");
    check(collCommSplit(p.comm, color, keys[static_cast<size_t>(p.rank)], &child.comm, nullptr), p.comm, k, what);
    if (grouped) check(collGroupEnd(), p.comm, k, what + " (group end)");
    if (color == COLL_SPLIT_NOCOLOR && child.comm) fail(k, what + ": a communicator for COLL_SPLIT_NOCOLOR");
    if (color != COLL_SPLIT_NOCOLOR) {
      std::vector<int> order;
      for (int j = 0; j < p.size(); ++j)
        if (colors[static_cast<size_t>(j)] == color) order.push_back(j);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return keys[a] < keys[b]; });
      for (int j : order) child.members.push_back(p.members[static_cast<size_t>(j)]);
      child.rank = static_cast<int>(std::find(order.begin(), order.end(), p.rank) - order.begin());
      int count = -1, rank = -1;
      check(collCommCount(child.comm, &count), child.comm, k, what + ": collCommCount");
      check(collCommUserRank(child.comm, &rank), child.comm, k, what + ": collCommUserRank");
      if (count != child.size() || rank != child.rank)
        fail(k, what + ": rank " + std::to_string(rank) + " of " + std::to_string(count) + ", expected " +
                    std::to_string(child.rank) + " of " + std::to_string(child.size()));
      setTimeout(child.comm, k);
    }
  }
  if (live_[static_cast<size_t>(slot)]) destroy(slot, false, k);  // after the split: it may be the parent
  views_[static_cast<size_t>(slot)] = std::move(child);
  live_[static_cast<size_t>(slot)] = true;
}

void Rank::destroyStep(Rng& rng, uint64_t k) {
  int slot = 1 + static_cast<int>(rng.below(kChildren));
  bool finalize = rng.chance(0.5);
  if (live_[static_cast<size_t>(slot)]) destroy(slot, finalize, k);
}

// A new world from a fresh unique id (rank 0 starts its root, the world carries the id),
// then the old one destroyed; the children stay.
void Rank::recreateWorld(uint64_t k) {
  collComm_t old = views_[0].comm;
  collUniqueId id{};
  if (world_ == 0) check(collGetUniqueId(&id), nullptr, k, "collGetUniqueId");
  check(collBroadcast(&id, &id, sizeof(id), collUint8, 0, old, nullptr), old, k, "unique id broadcast");
  collComm_t fresh = nullptr;
  check(collCommInitRank(&fresh, nworld_, id, world_), nullptr, k, "collCommInitRank of a new world");
  check(collCommDestroy(old), nullptr, k, "collCommDestroy of the old world");
  views_[0].comm = fresh;
  setTimeout(fresh, k);
  prime(k);
}

// Children destroyed, every rank here, then the sample: the same state at every
// checkpoint, so any growth between them is the library's. True: stop.
bool Rank::checkpoint(uint64_t k) {
  for (int s = 1; s <= kChildren; ++s)
    if (live_[static_cast<size_t>(s)]) destroy(s, false, k);
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - sh_.start).count();
  bool timeUp = sh_.opt.steps == 0 && elapsed >= sh_.opt.seconds;
  bool stop = controlMax(timeUp || (sh_.opt.steps && k >= sh_.opt.steps), k) != 0;
  if (sh_.opt.threads == 0 || world_ == 0) {
    std::lock_guard<std::mutex> lock(sh_.mu);
    if (!sh_.opt.csv.empty() && !sh_.csv) {  // before the first sample, which counts its descriptor
      const std::string path = sh_.opt.csv + ".rank" + std::to_string(world_) + ".csv";
      sh_.csv = std::fopen(path.c_str(), "w");
      if (!sh_.csv) fail(k, "cannot write " + path);
      writeCsvHeader(sh_.csv);
    }
    Sample s = sampleResources(sh_.samples.empty() ? nullptr : &sh_.samples.back());
    // Less this list of samples itself, whose doublings (16 KiB at the 256th sample) read
    // as steps of growth.
    s.heapKiB -= static_cast<long>(sh_.samples.capacity() * sizeof(Sample) / 1024);
    s.seconds = elapsed;
    s.steps = k;
    s.ops = sh_.ops.load();
    sh_.samples.push_back(s);
    if (sh_.csv) writeCsvRow(sh_.csv, s);
    if (world_ == 0 && elapsed >= sh_.lastProgress + 60) {
      sh_.lastProgress = elapsed;
      std::printf("soak: %.0f s, step %llu, %llu ops verified here; rss %ld KiB, heap %ld KiB, %d fds, %d threads\n",
                  elapsed, static_cast<unsigned long long>(k), static_cast<unsigned long long>(s.ops), s.rssKiB,
                  s.heapKiB, s.fds, s.threads);
      std::fflush(stdout);
    }
  }
  controlMax(0, k);  // no rank goes on while the sample is taken
  return stop;
}

bool Rank::run(const collUniqueId& worldId, const std::function<bool(uint64_t)>& report) {
  initWorld(worldId);
  agreeSeed();
  prime(0);
  checkpoint(0);
  uint64_t k = 0;
  for (;; ++k) {
    bool due = (k > 0 && k % sh_.opt.checkSteps == 0) || (sh_.opt.steps && k >= sh_.opt.steps);
    if (due && checkpoint(k)) break;
    step(k);
  }
  for (int s = 1; s <= kChildren; ++s)
    if (live_[static_cast<size_t>(s)]) destroy(s, false, k);
  bool flat = sh_.opt.threads == 0 || world_ == 0 ? report(k) : true;
  controlMax(0, k);  // every rank has reported before any exits (collrun stops the rest then)
  destroy(0, false, k);
  return flat;
}

}  // namespace soak

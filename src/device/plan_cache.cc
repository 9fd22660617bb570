#include "device/plan_cache.h"

#include <algorithm>

namespace coll {

uint64_t DevicePlanCache::hashOf(const std::vector<uint64_t>& key) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the words
  for (uint64_t w : key) h = (h ^ w) * 0x100000001b3ull;
  return h;
}

std::shared_ptr<const DevicePlan> DevicePlanCache::find(const std::vector<uint64_t>& key) {
  const uint64_t h = hashOf(key);
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_)
    if (e.hash == h && e.key == key) {
      e.used = ++tick_;
      ++hits_;
      return e.plan;
    }
  return nullptr;
}

void DevicePlanCache::keep(const std::vector<uint64_t>& key, std::shared_ptr<const DevicePlan> plan) {
  if (capacity_ == 0 || !plan || plan->steps.size() > kMaxSteps) return;
  const uint64_t h = hashOf(key);
  std::lock_guard<std::mutex> lock(mu_);
  auto same = std::find_if(entries_.begin(), entries_.end(),
                           [&](const Entry& e) { return e.hash == h && e.key == key; });
  if (same == entries_.end() && entries_.size() >= capacity_)
    same = std::min_element(entries_.begin(), entries_.end(),
                            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  if (same == entries_.end()) same = entries_.insert(entries_.end(), Entry{});
  *same = Entry{key, h, ++tick_, std::move(plan)};
}

size_t DevicePlanCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

uint64_t DevicePlanCache::hits() {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

}  // namespace coll

// What the process holds: resident memory, descriptors, threads, shared-memory segments.
#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "soak.h"

namespace soak {
namespace {

// Entries of a directory, "." and ".." excluded, whose name passes keep.
template <typename Keep>
int countEntries(const char* dir, Keep keep) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0 && keep(e->d_name)) ++n;
  closedir(d);
  return n;
}

// Resident KiB, less shared-memory files that are not the library's: the verbs emulation's
// fabric (test-only) is touched a page at a time as its rings first fill, up to its size.
long rssKiB() {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  long total = 0;
  bool counted = true;
  while (std::getline(smaps, line)) {
    if (line.empty()) continue;
    if (std::islower(static_cast<unsigned char>(line[0])) || std::isdigit(static_cast<unsigned char>(line[0]))) {
      size_t path = line.find('/');  // a mapping's first line: range, mode, ..., path
      bool foreign = path != std::string::npos && line.compare(path, 9, "/dev/shm/") == 0 &&
                     line.compare(path, 14, "/dev/shm/coll-") != 0;
      counted = !foreign;
    } else if (counted && line.compare(0, 4, "Rss:") == 0) {
      total += std::atol(line.c_str() + 4);
    }
  }
  return total;
}

long statusKiB(const char* key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  size_t n = std::strlen(key);
  while (std::getline(status, line))
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') return std::atol(line.c_str() + n + 1);
  return -1;
}

// The library names its segments /coll-<what>-<pid>-<random> (src/transport/shm).
int ownShmFiles() {
  std::string mine = "-" + std::to_string(getpid()) + "-";
  return countEntries("/dev/shm", [&](const char* name) {
    return std::strncmp(name, "coll-", 5) == 0 && std::strstr(name, mine.c_str()) != nullptr;
  });
}

int mappedShmSegments() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> segments;
  std::string line;
  while (std::getline(maps, line)) {
    size_t at = line.find("/dev/shm/coll-");
    if (at != std::string::npos) segments.insert(line.substr(at));
  }
  return static_cast<int>(segments.size());
}

}  // namespace

Sample sampleResources(const Sample* previous) {
  Sample s;
  for (int attempt = 0; attempt < 10; ++attempt) {
    if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.fds = countEntries("/proc/self/fd", [](const char*) { return true; }) - 1;  // less opendir's own
    s.threads = countEntries("/proc/self/task", [](const char*) { return true; });
    if (!previous || (s.fds <= previous->fds && s.threads <= previous->threads)) break;
  }
  malloc_trim(0);
  s.rssKiB = rssKiB();
  s.anonKiB = statusKiB("RssAnon");
  struct mallinfo2 m = mallinfo2();
  s.heapKiB = static_cast<long>((m.uordblks + m.hblkhd) / 1024);
  s.shmFiles = ownShmFiles();
  s.shmMaps = mappedShmSegments();
  return s;
}

Verdict judge(const std::vector<Sample>& samples, double warmFraction) {
  Verdict v;
  if (samples.size() < 3) {
    v.flat = false;
    v.text = "only " + std::to_string(samples.size()) + " samples: too few to judge (a longer run, or --check-steps)\n";
    return v;
  }
  size_t warm = std::clamp<size_t>(static_cast<size_t>(warmFraction * static_cast<double>(samples.size())), 1,
                                   samples.size() - 2);
  size_t tail = std::max(samples.size() - warm, size_t{3}) / 3;
  auto maxOf = [&](auto field, size_t from, size_t to) {
    long m = 0;
    for (size_t i = from; i < to; ++i) m = std::max(m, static_cast<long>(samples[i].*field));
    return m;
  };
  auto check = [&](const char* name, auto field, long allowance, const char* unit) {
    long w = maxOf(field, 0, warm), t = maxOf(field, samples.size() - tail, samples.size());
    bool ok = t <= w + allowance;
    v.flat = v.flat && ok;
    char line[200];
    std::snprintf(line, sizeof(line), "  %-8s warm-up max %8ld%s, last %zu samples max %8ld%s, allowed +%ld: %s\n",
                  name, w, unit, tail, t, unit, allowance, ok ? "flat" : "GROWING");
    v.text += line;
  };
  // Memory: the allocator and the library keep some caches, so a margin; counts: none.
  long rssWarm = maxOf(&Sample::rssKiB, 0, warm), heapWarm = maxOf(&Sample::heapKiB, 0, warm);
  check("rss", &Sample::rssKiB, std::max(8L * 1024, rssWarm / 10), " KiB");
  check("heap", &Sample::heapKiB, std::max(8L * 1024, heapWarm / 10), " KiB");
  check("fds", &Sample::fds, 0, "");
  check("threads", &Sample::threads, 0, "");
  check("shm", &Sample::shmFiles, 0, "");
  check("shm-maps", &Sample::shmMaps, 0, "");
  v.text = "verdict over " + std::to_string(samples.size()) + " samples (warm-up: first " + std::to_string(warm) +
           "): " + (v.flat ? "flat" : "NOT FLAT") + "\n" + v.text;
  return v;
}

void writeCsvHeader(std::FILE* f) {
  std::fprintf(f, "seconds,steps,ops,rss_kib,anon_kib,heap_kib,fds,threads,shm_files,shm_maps\n");
}

void writeCsvRow(std::FILE* f, const Sample& s) {
  std::fprintf(f, "%.1f,%llu,%llu,%ld,%ld,%ld,%d,%d,%d,%d\n", s.seconds, static_cast<unsigned long long>(s.steps),
               static_cast<unsigned long long>(s.ops), s.rssKiB, s.anonKiB, s.heapKiB, s.fds, s.threads, s.shmFiles,
               s.shmMaps);
  std::fflush(f);  // a run that fails or is stopped keeps its rows
}

void printSamples(const std::vector<Sample>& samples, size_t maxRows) {
  std::printf("%9s %9s %10s %10s %10s %10s %5s %7s %4s %8s\n", "time_s", "steps", "ops", "rss_KiB", "anon_KiB",
              "heap_KiB", "fds", "threads", "shm", "shm_maps");
  size_t n = samples.size(), rows = std::min(n, std::max<size_t>(maxRows, 2));
  size_t last = n;  // the row printed last, so none repeats
  for (size_t r = 0; r < rows; ++r) {
    size_t i = rows == 1 ? 0 : r * (n - 1) / (rows - 1);
    if (i == last) continue;
    last = i;
    const Sample& s = samples[i];
    std::printf("%9.1f %9llu %10llu %10ld %10ld %10ld %5d %7d %4d %8d\n", s.seconds,
                static_cast<unsigned long long>(s.steps), static_cast<unsigned long long>(s.ops), s.rssKiB, s.anonKiB,
                s.heapKiB, s.fds, s.threads, s.shmFiles, s.shmMaps);
  }
}

}  // namespace soak

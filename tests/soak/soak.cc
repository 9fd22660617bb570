// soak: random collectives, sizes, types, ops, groups, splits and destroys for a given
// time, every result verified on every rank, and the process's resources required flat.
//
//   collrun -np 4 [--nodes 2] -- soak --seconds 600      # ranks as processes (collrun's)
//   soak --threads 4 --seconds 600                       # ranks as threads of one process
//
// Every rank draws the same choices from the shared seed, so all agree on what to call,
// and computes every rank's inputs, so each checks its own results exactly. A failure
// prints the seed and step, and how to run exactly up to that step again. scripts/soak.sh
// runs it over shm, TCP and two simulated hosts (docs/SECURITY.md "Soak").
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "rank.h"

namespace {

int envInt(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// The summary line scripts/soak.sh reads, and the table and verdict before it.
bool report(soak::Shared& sh, int worldRank, uint64_t steps) {
  const auto& s = sh.samples;
  soak::Verdict v = soak::judge(s, sh.opt.warmFraction);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sh.start).count();
  if (worldRank == 0 || !v.flat) {
    std::printf("soak: resources of world rank %d's process, sampled at each checkpoint:\n", worldRank);
    soak::printSamples(s, sh.opt.tableRows);
  }
  std::printf("soak: rank %d: %s", worldRank, v.text.c_str());
  const soak::Sample& a = s.front();
  const soak::Sample& z = s.back();
  std::printf("SOAK-RESULT rank=%d seconds=%.0f steps=%llu ops=%llu bytes=%llu samples=%zu rss_kib_first=%ld "
              "rss_kib_last=%ld heap_kib_first=%ld heap_kib_last=%ld fds_first=%d fds_last=%d threads_first=%d "
              "threads_last=%d shm_first=%d shm_last=%d "
              "shm_maps_first=%d shm_maps_last=%d flat=%d\n",
              worldRank, seconds, static_cast<unsigned long long>(steps),
              static_cast<unsigned long long>(sh.ops.load()), static_cast<unsigned long long>(sh.bytes.load()),
              s.size(), a.rssKiB, z.rssKiB, a.heapKiB, z.heapKiB, a.fds, z.fds, a.threads, z.threads, a.shmFiles,
              z.shmFiles, a.shmMaps, z.shmMaps, v.flat ? 1 : 0);
  std::fflush(stdout);
  return v.flat;
}

int parse(int argc, char** argv, soak::Options& o) {
  CLI::App app{"soak: random verified collectives, resources required flat"};
  app.add_option("--seed", o.seed, "seed of every choice (default: rank 0 draws one and prints it)");
  app.add_option("--seconds", o.seconds, "run time; stops at the first checkpoint after it")->capture_default_str();
  app.add_option("--steps", o.steps, "run exactly this many steps instead (to reproduce a failure)");
  app.add_option("--check-steps", o.checkSteps, "steps between checkpoints (samples)")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  app.add_option("--max-bytes", o.maxBytes, "bytes of each operation buffer")
      ->check(CLI::Range(4096, 1 << 30))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "ranks as this many threads of one process (0: collrun's processes)")
      ->check(CLI::Range(0, 8));
  app.add_option("--warm", o.warmFraction, "fraction of the samples that is warm-up")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  app.add_option("--table-rows", o.tableRows, "rows of the sample table")->capture_default_str();
  app.add_option("--op-timeout", o.opTimeout, "seconds an operation may take (collCommSetTimeout)")
      ->capture_default_str();
  app.add_flag("--malloc-default", o.mallocDefault,
               "keep glibc's sliding mmap threshold (RSS then grows by what the allocator keeps)");
  app.add_option("--csv", o.csv,
                 "file prefix: each process writes its samples to <prefix>.rank<world rank>.csv as they are taken");
  app.add_option("--corrupt-step", o.corruptStep,
                 "test of the checker: from this step on, rank 0 flips a bit of one result (must fail)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  o.seedGiven = app.count("--seed") > 0;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seed" || a == "--steps" || a == "--seconds") ++i;
    else o.command += (o.command.empty() ? "" : " ") + a;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  auto sh = std::make_unique<soak::Shared>();
  if (int rc = parse(argc, argv, sh->opt); rc >= 0) return rc;
  // glibc raises its mmap threshold to the size of each large block freed, so later
  // blocks of that size come from an arena, whose top a library thread's arena keeps
  // resident (malloc_trim does not shrink it): RSS crept up in 2 MiB steps, the heap in use
  // flat. A fixed threshold stops that, so RSS growth means memory in use.
  if (!sh->opt.mallocDefault) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  int nranks = sh->opt.threads > 0 ? sh->opt.threads : envInt("COLL_NRANKS", 1);
  if (nranks > 8) {
    std::fprintf(stderr, "soak: %d ranks: at most 8 (fp8 sums are exact only up to there)\n", nranks);
    return 2;
  }
  collUniqueId id{};
  if (sh->opt.threads > 0) {
    unsetenv("COLL_COMM_ID");  // the ranks of this process need no rendezvous address
    unsetenv("NCCL_COMM_ID");
  }
  if (collGetUniqueId(&id) != collSuccess) {
    std::fprintf(stderr, "soak: collGetUniqueId: %s\n", collGetLastError(nullptr));
    return 1;
  }
  sh->start = std::chrono::steady_clock::now();
  if (sh->opt.threads == 0) {
    int rank = envInt("COLL_RANK", 0);
    soak::Rank r(*sh, rank, nranks);
    return r.run(id, [&](uint64_t steps) { return report(*sh, rank, steps); }) ? 0 : 3;
  }
  std::vector<std::unique_ptr<soak::Rank>> ranks;
  for (int r = 0; r < nranks; ++r) ranks.push_back(std::make_unique<soak::Rank>(*sh, r, nranks));
  std::atomic<bool> flat{true};
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      if (!ranks[r]->run(id, [&](uint64_t steps) { return report(*sh, 0, steps); })) flat = false;
    });
  for (auto& t : threads) t.join();
  return flat ? 0 : 3;
}

/* libnccl.so.2 and libcollectives.so in one process. The drop-in holds the library's
 * objects itself, so this process has two copies of the library: each must run its own
 * calls with its own state. Two ranks (threads) of an NCCL communicator and two of a coll
 * communicator run allreduces on host buffers at the same time; then each library must
 * refuse the other's communicator as not live (invalid argument: each keeps its own
 * registry of live handles; were the drop-in's internal names bound to libcollectives'
 * code, or the reverse, the handle would be found), and each API's entry points must lie
 * in its own file.
 * Prints "PASS" and exits 0, or names each failure and exits 1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "collectives/collectives.h"
#include "nccl.h"

enum { kRanks = 2, kCount = 4096, kRounds = 20 };

static ncclUniqueId ncclId;
static collUniqueId collId;
static int failures;
static pthread_mutex_t failMu = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char* api, int rank, const char* what, int code) {
  pthread_mutex_lock(&failMu);
  fprintf(stderr, "FAIL: %s rank %d: %s (result %d)\n", api, rank, what, code);
  ++failures;
  pthread_mutex_unlock(&failMu);
}

/* in[i] = rank + 1 + i % 7 summed over the ranks, the same every round. */
static int checkSum(const float* out, const char* api, int rank) {
  for (int i = 0; i < kCount; ++i) {
    float want = (float)(kRanks * (1 + i % 7) + kRanks * (kRanks - 1) / 2);
    if (out[i] != want) {
      char b[96];
      snprintf(b, sizeof(b), "element %d is %g, want %g", i, (double)out[i], (double)want);
      fail(api, rank, b, 0);
      return 0;
    }
  }
  return 1;
}

static void fillIn(float* in, int rank) {
  for (int i = 0; i < kCount; ++i) in[i] = (float)(rank + 1 + i % 7);
}

static void* ncclRank(void* arg) {
  int rank = (int)(size_t)arg, n = 0;
  static float in[kRanks][kCount], out[kRanks][kCount];
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRank(&comm, kRanks, ncclId, rank);
  if (r != ncclSuccess) {
    fail("nccl", rank, "ncclCommInitRank", r);
    return NULL;
  }
  fillIn(in[rank], rank);
  for (int round = 0; round < kRounds; ++round) {
    r = ncclAllReduce(in[rank], out[rank], kCount, ncclFloat, ncclSum, comm, NULL);
    if (r != ncclSuccess) fail("nccl", rank, "ncclAllReduce", r);
    if (r != ncclSuccess || !checkSum(out[rank], "nccl", rank)) break;
  }
  /* libcollectives' registry has never seen this communicator. */
  collResult_t cr = collCommCount((collComm_t)comm, &n);
  if (cr != collInvalidArgument) fail("nccl", rank, "collCommCount of libcollectives: the drop-in's communicator", cr);
  r = ncclCommDestroy(comm);
  if (r != ncclSuccess) fail("nccl", rank, "ncclCommDestroy", r);
  return NULL;
}

static void* collRank(void* arg) {
  int rank = (int)(size_t)arg, n = 0;
  static float in[kRanks][kCount], out[kRanks][kCount];
  collComm_t comm = NULL;
  collResult_t r = collCommInitRank(&comm, kRanks, collId, rank);
  if (r != collSuccess) {
    fail("coll", rank, "collCommInitRank", r);
    return NULL;
  }
  fillIn(in[rank], rank);
  for (int round = 0; round < kRounds; ++round) {
    r = collAllReduce(in[rank], out[rank], kCount, collFloat, collSum, comm, NULL);
    if (r != collSuccess) fail("coll", rank, "collAllReduce", r);
    if (r != collSuccess || !checkSum(out[rank], "coll", rank)) break;
  }
  ncclResult_t nr = ncclCommCount((ncclComm_t)comm, &n);
  if (nr != ncclInvalidArgument) fail("coll", rank, "ncclCommCount of the drop-in: libcollectives' communicator", nr);
  r = collCommDestroy(comm);
  if (r != collSuccess) fail("coll", rank, "collCommDestroy", r);
  return NULL;
}

/* The file an entry point of this process lies in must be `lib`'s. */
static void checkHome(void* fn, const char* name, const char* lib) {
  Dl_info info;
  if (!dladdr(fn, &info) || !info.dli_fname || !strstr(info.dli_fname, lib)) {
    fprintf(stderr, "FAIL: %s lies in %s, not %s\n", name, info.dli_fname ? info.dli_fname : "?", lib);
    ++failures;
  }
}

int main(void) {
  pthread_t t[2 * kRanks];
  if (ncclGetUniqueId(&ncclId) != ncclSuccess || collGetUniqueId(&collId) != collSuccess) {
    fprintf(stderr, "FAIL: unique ids\n");
    return 1;
  }
  checkHome((void*)ncclAllReduce, "ncclAllReduce", "libnccl.so");
  checkHome((void*)collAllReduce, "collAllReduce", "libcollectives.so");
  for (int r = 0; r < kRanks; ++r) {
    pthread_create(&t[r], NULL, ncclRank, (void*)(size_t)r);
    pthread_create(&t[kRanks + r], NULL, collRank, (void*)(size_t)r);
  }
  for (int i = 0; i < 2 * kRanks; ++i) pthread_join(t[i], NULL);
  if (failures) return 1;
  printf("PASS: %d allreduces through each of libnccl.so.2 and libcollectives.so at once\n", kRounds);
  return 0;
}

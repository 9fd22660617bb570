/* MPI_Allgather driver in the table format of ../shared/peers (which has allreduce,
 * bcast and reduce_scatter drivers but no allgather), so scripts/compare/peers.sh can put
 * Open MPI's allgather beside ours.
 *
 *   mpirun -np 2 mpi_allgather_perf [-b 8] [-e 128M] [-w 5] [-n 20] [-T 100]
 *
 * size = total bytes each rank ends with (nccl-tests' allgather size), float32 counts;
 * time = mean per call (us), averaged over ranks; busbw = algbw * (n-1)/n. Every rank's
 * block is checked after the timed loop. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t parse_size(const char* s) {
  char* end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t minb = 8, maxb = 128u << 20;
  int warm = 5, iters = 20;
  double min_ms = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) minb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-e")) maxb = parse_size(argv[i + 1]);
    else if (!strcmp(argv[i], "-w")) warm = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-T")) min_ms = atof(argv[i + 1]);
  }
  float* in = malloc(maxb / n + 64);
  float* out = malloc(maxb + 64);
  if (rank == 0)
    printf("# MPI_Allgather, %d ranks, float32\n#%11s %12s %8s %6s %10s %8s %8s %6s\n", n,
           "size", "count", "type", "redop", "time(us)", "algbw", "busbw", "#wrong");
  long wrong_total = 0;
  for (size_t size = minb; size <= maxb; size *= 2) {
    size_t per = size / sizeof(float) / n;
    if (per == 0) continue;
    for (size_t i = 0; i < per; ++i) in[i] = (float)(rank * 1000003 + i % 4099);
    for (int i = 0; i < warm; ++i)
      MPI_Allgather(in, (int)per, MPI_FLOAT, out, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
    /* Calls enough for min_ms (decided on rank 0's estimate, shared). */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allgather(in, (int)per, MPI_FLOAT, out, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
    double one = MPI_Wtime() - t0;
    int want = one > 0 ? (int)(min_ms / 1e3 / one) : iters;
    if (want < iters) want = iters;
    if (want > 1000000) want = 1000000;
    MPI_Bcast(&want, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < want; ++i)
      MPI_Allgather(in, (int)per, MPI_FLOAT, out, (int)per, MPI_FLOAT, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / want, tsum = 0;
    MPI_Allreduce(&t, &tsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t = tsum / n;
    long wrong = 0;
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < per; ++i)
        if (out[r * per + i] != (float)(r * 1000003 + i % 4099)) ++wrong;
    long wsum = 0;
    MPI_Allreduce(&wrong, &wsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    wrong_total += wsum;
    size_t bytes = per * n * sizeof(float);
    double algbw = bytes / t / 1e9;
    if (rank == 0)
      printf("%12zu %12zu %8s %6s %10.2f %8.2f %8.2f %6ld\n", bytes, per * n, "float", "none",
             t * 1e6, algbw, algbw * (n - 1) / n, wsum);
  }
  if (rank == 0) printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
  free(in);
  free(out);
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}

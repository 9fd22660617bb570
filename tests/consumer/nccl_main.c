/* A program written for NCCL, built against the installed drop-in header and linked with
 * -lnccl only: the version, two host ranks in one process, an allreduce, in C99. */
#include <nccl.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  ncclComm_t comms[2];
  float in[2][4], out[2][4];
  int r, i;
  /* A library at least as new as the header the program was built against. */
  if (ncclGetVersion(&version) != ncclSuccess || version < NCCL_VERSION_CODE) {
    fprintf(stderr, "ncclGetVersion gave %d, expected %d or later\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (r = 0; r < 2; ++r)
    for (i = 0; i < 4; ++i) in[r][i] = (float)(r * 10 + i);
  ncclGroupStart();
  for (r = 0; r < 2; ++r) ncclAllReduce(in[r], out[r], 4, ncclFloat, ncclSum, comms[r], NULL);
  if (ncclGroupEnd() != ncclSuccess) {
    fprintf(stderr, "ncclGroupEnd: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (r = 0; r < 2; ++r)
    for (i = 0; i < 4; ++i)
      if (out[r][i] != (float)(10 + 2 * i)) {
        fprintf(stderr, "rank %d element %d: %g\n", r, i, out[r][i]);
        return 1;
      }
  for (r = 0; r < 2; ++r) ncclCommDestroy(comms[r]);
  printf("nccl drop-in consumer: OK\n");
  return 0;
}

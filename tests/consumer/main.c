/* Uses the installed C ABI from C99: two host ranks in one process, one allreduce. */
#include <collectives/collectives.h>
#include <collectives/config.h>
#include <stdio.h>

int main(void) {
  collComm_t comms[2];
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, ra[3], rb[3];
  int version = 0, i;
  if (collGetVersion(&version) != collSuccess || version != COLL_VERSION_CODE) return 1;
  if (collCommInitAll(comms, 2, NULL) != collSuccess) {
    fprintf(stderr, "init: %s\n", collGetLastError(NULL));
    return 1;
  }
  collGroupStart();
  collAllReduce(a, ra, 3, collFloat, collSum, comms[0], NULL);
  collAllReduce(b, rb, 3, collFloat, collSum, comms[1], NULL);
  if (collGroupEnd() != collSuccess) {
    fprintf(stderr, "allreduce: %s\n", collGetLastError(NULL));
    return 1;
  }
  for (i = 0; i < 3; ++i)
    if (ra[i] != a[i] + b[i] || rb[i] != ra[i]) return 1;
  collCommDestroy(comms[0]);
  collCommDestroy(comms[1]);
  printf("consumer ok: version %d, cuda %d, [%g %g %g]\n", version, COLL_HAVE_CUDA, ra[0], ra[1], ra[2]);
  return 0;
}

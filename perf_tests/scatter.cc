// scatter_perf: nccl-tests compatible benchmark (see perf.h).
#include "perf.h"
int main(int argc, char** argv) { return perf::runPerf(perf::Coll::kScatter, argc, argv); }

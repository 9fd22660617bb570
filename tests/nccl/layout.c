/* The ABI of nccl.h as numbers: sizes and field offsets of its structs, the values its
 * initializers set, every enum value and every NCCL_* macro. Compiled as C twice, against
 * NVIDIA's header (nccl_layout_nvidia) and against Collectives' (nccl_layout_ours); the
 * CTest test nccl_layout diffs the two outputs, so any difference a program compiled
 * against one header would see when running with the other library shows as a line. */
#include <nccl.h>

#include <stddef.h>
#include <stdio.h>

#define SIZE(T) printf("sizeof(%s) = %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("offsetof(%s, %s) = %zu size %zu\n", #T, #f, offsetof(T, f), sizeof(((T*)0)->f))
#define INT(v) printf("%s = %lld\n", #v, (long long)(v))
#define UINT(v) printf("%s = %llu\n", #v, (unsigned long long)(v))
#define FLOAT(v) printf("%s = %.9g\n", #v, (double)(v))
#define PTR(v) printf("%s = %p\n", #v, (void*)(v))

int main(void) {
  /* Types. */
  SIZE(ncclComm_t);
  SIZE(ncclWindow_t);
  SIZE(cudaStream_t);
  SIZE(ncclUniqueId);
  SIZE(ncclResult_t);
  SIZE(ncclDataType_t);
  SIZE(ncclRedOp_t);
  SIZE(ncclRedOp_dummy_t);
  SIZE(ncclScalarResidence_t);
  SIZE(ncclConfig_t);
  SIZE(struct ncclConfig_v22800);
  SIZE(ncclSimInfo_t);
  SIZE(struct ncclSimInfo_v22200);
  FIELD(ncclUniqueId, internal);

  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);

  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);

  /* What the initializers set. */
  {
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    UINT(c.size);
    UINT(c.magic);
    UINT(c.version);
    INT(c.blocking);
    INT(c.cgaClusterSize);
    INT(c.minCTAs);
    INT(c.maxCTAs);
    PTR(c.netName);
    INT(c.splitShare);
    INT(c.trafficClass);
    PTR(c.commName);
    INT(c.collnetEnable);
    INT(c.CTAPolicy);
    INT(c.shrinkShare);
    INT(c.nvlsCTAs);
    INT(c.nChannelsPerNetPeer);
    INT(c.nvlinkCentricSched);
  }
  {
    ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
    UINT(s.size);
    UINT(s.magic);
    UINT(s.version);
    FLOAT(s.estimatedTime);
  }

  /* Enums. */
  INT(ncclSuccess);
  INT(ncclUnhandledCudaError);
  INT(ncclSystemError);
  INT(ncclInternalError);
  INT(ncclInvalidArgument);
  INT(ncclInvalidUsage);
  INT(ncclRemoteError);
  INT(ncclInProgress);
  INT(ncclNumResults);

  INT(ncclInt8);
  INT(ncclChar);
  INT(ncclUint8);
  INT(ncclInt32);
  INT(ncclInt);
  INT(ncclUint32);
  INT(ncclInt64);
  INT(ncclUint64);
  INT(ncclFloat16);
  INT(ncclHalf);
  INT(ncclFloat32);
  INT(ncclFloat);
  INT(ncclFloat64);
  INT(ncclDouble);
  INT(ncclBfloat16);
  INT(ncclFloat8e4m3);
  INT(ncclFloat8e5m2);
  INT(ncclNumTypes);

  INT(ncclNumOps_dummy);
  INT(ncclSum);
  INT(ncclProd);
  INT(ncclMax);
  INT(ncclMin);
  INT(ncclAvg);
  INT(ncclNumOps);
  INT(ncclMaxRedOp);

  INT(ncclScalarDevice);
  INT(ncclScalarHostImmediate);

  /* Macros. */
  INT(NCCL_MAJOR);
  INT(NCCL_MINOR);
  INT(NCCL_PATCH);
  printf("NCCL_SUFFIX = \"%s\"\n", NCCL_SUFFIX);
  INT(NCCL_VERSION_CODE);
  INT(NCCL_VERSION(2, 28, 9));
  INT(NCCL_VERSION(2, 8, 4));
  INT(NCCL_VERSION(3, 0, 0));
  PTR(NCCL_COMM_NULL);
  INT(NCCL_UNIQUE_ID_BYTES);
  INT(NCCL_CONFIG_UNDEF_INT);
  PTR(NCCL_CONFIG_UNDEF_PTR);
  INT(NCCL_SPLIT_NOCOLOR);
  FLOAT(NCCL_UNDEF_FLOAT);
  INT(NCCL_WIN_DEFAULT);
  INT(NCCL_WIN_COLL_SYMMETRIC);
  INT(NCCL_WIN_REQUIRED_ALIGNMENT);
  INT(NCCL_CTA_POLICY_DEFAULT);
  INT(NCCL_CTA_POLICY_EFFICIENCY);
  INT(NCCL_CTA_POLICY_ZERO);
  INT(NCCL_SHRINK_DEFAULT);
  INT(NCCL_SHRINK_ABORT);
  INT(NCCL_REVOKE_DEFAULT);
  return 0;
}

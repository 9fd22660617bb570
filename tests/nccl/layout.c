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
  SIZE(struct ncclConfig_v23100);
  SIZE(ncclConfigExt_t);
  SIZE(ncclCollConfig_t);
  SIZE(struct ncclCollConfig_v23200);
  SIZE(ncclCommMemStat_t);
  SIZE(ncclWaitSignalDesc_t);
  SIZE(ncclEncryptionMode_t);
  SIZE(ncclEncryptionConfig_t);
  SIZE(struct ncclEncryptionConfig_v23200);
  SIZE(ncclParamHandle_t);
  SIZE(ncclHostCftMode_t);
  SIZE(ncclNvlsHostMode_t);
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
  FIELD(ncclConfig_t, graphUsageMode);
  FIELD(ncclConfig_t, numRmaCtx);
  FIELD(ncclConfig_t, maxP2pPeers);
  FIELD(ncclConfig_t, graphStreamOrdering);
  FIELD(ncclConfig_t, launchOrderImplicit);
  FIELD(ncclConfig_t, numRmaSig);
  FIELD(ncclConfig_t, rmaEagerInit);
  FIELD(ncclConfig_t, hostCftMode);
  FIELD(ncclConfig_t, nvlsHostMode);

  FIELD(ncclConfigExt_t, next);
  FIELD(ncclConfigExt_t, key.vendorId);
  FIELD(ncclConfigExt_t, key.optionId);
  FIELD(ncclConfigExt_t, val.i);
  FIELD(ncclConfigExt_t, val.s);
  FIELD(ncclConfigExt_t, val.raw);

  FIELD(ncclCollConfig_t, size);
  FIELD(ncclCollConfig_t, magic);
  FIELD(ncclCollConfig_t, version);
  FIELD(ncclCollConfig_t, ext);
  FIELD(ncclCollConfig_t, minCTAs);
  FIELD(ncclCollConfig_t, maxCTAs);
  FIELD(ncclCollConfig_t, nvlsCTAs);
  FIELD(ncclCollConfig_t, cgaClusterSize);
  FIELD(ncclCollConfig_t, algSelection);
  FIELD(ncclCollConfig_t, forceAlgSelection);
  FIELD(ncclCollConfig_t, CTAPolicy);
  FIELD(ncclCollConfig_t, userProfilerTag);
  FIELD(ncclCollConfig_t, launchCompletionEvent);

  FIELD(ncclWaitSignalDesc_t, opCnt);
  FIELD(ncclWaitSignalDesc_t, peer);
  FIELD(ncclWaitSignalDesc_t, sigIdx);
  FIELD(ncclWaitSignalDesc_t, ctx);

  FIELD(ncclEncryptionConfig_t, size);
  FIELD(ncclEncryptionConfig_t, magic);
  FIELD(ncclEncryptionConfig_t, version);
  FIELD(ncclEncryptionConfig_t, mode);
  FIELD(ncclEncryptionConfig_t, psk);

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
    INT(c.graphUsageMode);
    INT(c.numRmaCtx);
    INT(c.maxP2pPeers);
    INT(c.graphStreamOrdering);
    INT(c.launchOrderImplicit);
    INT(c.numRmaSig);
    INT(c.rmaEagerInit);
    INT(c.hostCftMode);
    INT(c.nvlsHostMode);
  }
  {
    ncclCollConfig_t c = NCCL_COLLCONFIG_INITIALIZER;
    UINT(c.size);
    UINT(c.magic);
    UINT(c.version);
    PTR(c.ext);
    INT(c.minCTAs);
    INT(c.maxCTAs);
    INT(c.nvlsCTAs);
    INT(c.cgaClusterSize);
    PTR(c.algSelection);
    INT(c.forceAlgSelection);
    INT(c.CTAPolicy);
    UINT(c.userProfilerTag);
    PTR(c.launchCompletionEvent);
  }
  {
    ncclEncryptionConfig_t e = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
    UINT(e.size);
    UINT(e.magic);
    UINT(e.version);
    INT(e.mode);
    PTR(e.psk);
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
  INT(ncclTimeout);
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

  INT(ncclStatGpuMemSuspend);
  INT(ncclStatGpuMemSuspended);
  INT(ncclStatGpuMemPersist);
  INT(ncclStatGpuMemTotal);
  INT(NCCL_ENCRYPTION_MODE_NONE);
  INT(NCCL_ENCRYPTION_MODE_PSK);
  INT(ncclHostCftDefault);
  INT(ncclHostCftEnable);
  INT(ncclHostCftDisable);
  INT(ncclHostCftFallback);
  INT(ncclNvlsHostModeDefault);
  INT(ncclNvlsHostModeEnable);
  INT(ncclNvlsHostModeDisableTransport);
  INT(ncclNvlsHostModeDisableSymmetricMultimem);
  INT(ncclNvlsHostModeDisable);

  /* Macros. */
  INT(NCCL_MAJOR);
  INT(NCCL_MINOR);
  INT(NCCL_PATCH);
  printf("NCCL_SUFFIX = \"%s\"\n", NCCL_SUFFIX);
  INT(NCCL_VERSION_CODE);
  INT(NCCL_VERSION(2, 32, 3));
  INT(NCCL_VERSION(2, 8, 4));
  INT(NCCL_VERSION(3, 0, 0));
  PTR(NCCL_COMM_NULL);
  INT(NCCL_UNIQUE_ID_BYTES);
  INT(NCCL_CONFIG_UNDEF_INT);
  PTR(NCCL_CONFIG_UNDEF_PTR);
  INT(NCCL_SPLIT_NOCOLOR);
  FLOAT(NCCL_UNDEF_FLOAT);
  UINT(NCCL_API_MAGIC);
  INT(NCCL_WIN_DEFAULT);
  INT(NCCL_WIN_COLL_SYMMETRIC);
  INT(NCCL_WIN_STRICT_ORDERING);
  INT(NCCL_WIN_GIN_ONLY);
  INT(NCCL_WIN_CFT_COUNTED);
  INT(NCCL_WIN_REQUIRED_ALIGNMENT);
  INT(NCCL_CTA_POLICY_DEFAULT);
  INT(NCCL_CTA_POLICY_EFFICIENCY);
  INT(NCCL_CTA_POLICY_ZERO);
  INT(NCCL_SHRINK_DEFAULT);
  INT(NCCL_SHRINK_ABORT);
  INT(NCCL_REVOKE_DEFAULT);
  INT(NCCL_SUSPEND_MEM);
  return 0;
}

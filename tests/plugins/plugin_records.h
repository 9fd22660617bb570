// What the test plugins (tests/plugins/*_plugin.cc) record, read by tests/test_plugins.cc
// through the plugin's exported accessor.
#pragma once

#include <cstddef>
#include <cstdint>

struct TunerRecord {
  int inits, finalizes, calls, chunkCalls;
  size_t nRanks, nNodes;
  uint64_t commId;
  int lastFunc;
  size_t lastBytes;
  int lastPipeOps;
  float ringSimple, treeSimple, ringLL, nvlsSimple;  // the cost table as given
  double hopUs;                                      // a model constant as given (versions 5 on)
};

struct EnvRecord {
  int inits, finalizes, lookups;
  int major, minor, patch;
  bool gotLogger;
};

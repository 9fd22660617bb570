// NCCL tuner plugins (tuner_plugin_abi.h): loaded as NCCL loads them (NCCL_TUNER_PLUGIN,
// base/plugin_lib.h; with none named and no libnccl-tuner.so, the net plugin's library
// is searched too) and consulted for every collective a communicator routes.
//
// At each launch the plugin sees our cost table for the collective: the predicted time of
// every algorithm and protocol that can serve it (tuner.h's model; COLL_ALGO/COLL_PROTO
// and a call's own algorithm filter leave the others at kIgnore, so they override the
// plugin). It may change costs and set the channel count and (versions 6 and 7) the chunk
// size; the cheapest entry that we can run wins. A table it leaves as it was keeps our
// own rule (the one-shot protocol wherever it applies). A plugin whose call fails is
// ignored for that operation with a warning, as NCCL does.
//
// Its model constants (versions 5 to 7) carry ours where they have a meaning: the hop
// latencies inside a host (NVLink and PCI rows) and across hosts (network row) of Ring and
// Tree Simple, and the one-shot's latency as Ring LL's base latency; what the plugin
// writes there becomes the communicator's. The bandwidth tables stay zero (our model has
// no per-architecture table).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "algorithms/tuner.h"
#include "base/status.h"

namespace coll {

struct TunerLib;  // a loaded library's table (tuner_plugin.cc)

class TunerPluginComm {
 public:
  // The plugin the parameters name, initialised for a communicator described by `in`
  // (whose constants it may change); null when none is named or found (INFO), or when it
  // cannot be used (WARN naming the library and why): the communicator then tunes alone.
  static std::unique_ptr<TunerPluginComm> open(uint64_t commId, TunerInput* in);
  ~TunerPluginComm();  // the plugin's finalize
  TunerPluginComm(const TunerPluginComm&) = delete;
  TunerPluginComm& operator=(const TunerPluginComm&) = delete;

  struct Decision {
    Choice choice;
    int channels = 0;       // the plugin's channel count (0: ours)
    size_t chunkBytes = 0;  // its chunk size (0: ours)
  };
  // The choice for an operation of `kind` moving `bytes` (tuner.h's meaning), grouped
  // with numPipeOps-1 others; sliceBytes is our chunk, given to the plugin to change.
  Result<Decision> decide(const TunerInput& in, CollKind kind, size_t bytes, int oneShotApplies, int numPipeOps,
                          int maxChannels, size_t sliceBytes);
  const char* name() const;
  int version() const;

 private:
  TunerPluginComm(const TunerLib* lib, void* context) : lib_(lib), context_(context) {}
  int collInfo(float (*table)[3], CollKind kind, size_t bytes, int numPipeOps, int* channels);
  const TunerLib* lib_;
  void* context_;
  bool warned_ = false;
};

}  // namespace coll

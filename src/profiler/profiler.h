// NCCL profiler plugins (profiler_abi.h): loading them and feeding them our events.
//
// NCCL_PROFILER_PLUGIN (COLL_PROFILER_PLUGIN) names the library as NCCL does
// (base/plugin_lib.h; unset: libnccl-profiler.so, "none": no profiler). A library is
// opened once per distinct value and never closed; its newest ncclProfiler_vN table is
// used (6 down to 1), each older version fed through an adapter that converts our
// events the way NCCL does. A missing library is logged at INFO, a library without any
// table, a table with a null member or an init that fails at WARN, and the communicator
// then runs without a profiler.
//
// Each communicator owns a Profiler: attach() at init calls the plugin's init (which
// returns the context and the activation mask), detach() at destroy calls finalize, after
// which the communicator emits nothing. Emitters ask wants(types) first: with no plugin,
// or types outside the mask, that is the whole cost. The plugin may change the mask it
// returned at any time (it keeps the pointer, as NCCL lets it); every check reads it anew.
//
// Concurrency: attach and detach run on the thread that creates or frees the communicator,
// with no operation in flight. start/stop/record may be called from any thread (lanes run
// on the caller's thread, device launches report from the proxy thread): the plugin owns
// the synchronisation of its events, as with NCCL.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "profiler/profiler_abi.h"

namespace coll {

struct ProfilerPlugin;  // a loaded table and its version (profiler.cc)

// What init tells the plugin about a communicator.
struct ProfilerIdentity {
  uint64_t commHash = 0;  // the same on every rank
  std::string name;       // commName ("" when none)
  int nNodes = 1;
  int nranks = 1;
  int rank = 0;
};

// NCCL's function numbers (ncclFunc_t), which index the per-function sequence numbers.
enum class ProfFunc : uint8_t {
  kBroadcast = 0,
  kReduce = 1,
  kAllGather = 2,
  kReduceScatter = 3,
  kAllReduce = 4,
  kPeerSend = 6,
  kPeerRecv = 7,
};
constexpr int kProfFuncs = 8;
const char* profFuncName(ProfFunc f);  // "AllReduce", ...
const char* profTypeName(int dtype);   // "ncclFloat32", ... (collDataType_t values are NCCL's)

class Profiler {
 public:
  Profiler() = default;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  ~Profiler() { detach(); }

  // Loads the plugin the parameter names (once per name in the process) and calls its
  // init for this communicator; without one, or when init fails, the profiler stays off.
  void attach(const ProfilerIdentity& id);
  // Calls finalize; nothing is emitted afterwards.
  void detach();

  // Whether any of `types` (profabi::EventType bits) is wanted now.
  bool wants(uint64_t types) const {
    return plugin_ != nullptr && (std::atomic_ref<int>(mask_).load(std::memory_order_relaxed) & types) != 0;
  }
  bool loaded() const { return plugin_ != nullptr; }
  int rank() const { return id_.rank; }

  // Starts an event described in the newest layout (d.rank is filled in); the plugin's
  // handle, or null when it took none (its version lacks the type, or it declined).
  void* start(profabi::DescrV6& d);
  // Stops an event start returned; null: nothing.
  void stop(void* event);
  // A state change of an event (profabi::EventState), with its arguments; dropped for
  // versions that lack the state.
  void record(void* event, profabi::EventState state, const profabi::StateArgsV4& args = {});
  // NCCL's per-communicator sequence number of the next operation of function f: counted
  // for every collective launched while a plugin is attached.
  uint64_t takeSeq(ProfFunc f) { return seq_[static_cast<size_t>(f)].fetch_add(1, std::memory_order_relaxed); }

 private:
  const ProfilerPlugin* plugin_ = nullptr;
  void* context_ = nullptr;
  alignas(std::atomic_ref<int>::required_alignment) mutable int mask_ = 0;
  ProfilerIdentity id_;
  std::array<std::atomic<uint64_t>, kProfFuncs> seq_{};
};

// The clock kernel-channel events carry as their timestamps (pTimer): nanoseconds of
// the real-time clock, the domain of the GPU's global timer NCCL passes.
uint64_t profTimerNs();

// What one lane of the host engine has open: the events of the operation it is running
// on its channel. Reset by profLane* in comm/profile.h.
struct ProfLaneEvents {
  bool on = false;           // the lane emits (its communicator wanted lane events when it began)
  int op = -1;               // the operation the open events belong to
  void* kernelCh = nullptr;  // KernelCh
  void* proxyOp[2] = {};     // ProxyOp per direction: [0] send, [1] receive
  void* step[2] = {};        // the ProxyStep of the slot in progress, per direction
  int steps[2] = {};         // slots counted so far, per direction
};

// The events an operation's lanes hang under: its API call (v5 on) and its task event.
struct ProfOpEvents {
  void* api = nullptr;   // CollApi / P2pApi
  void* task = nullptr;  // Coll / P2p
};

}  // namespace coll

#include "base/param.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "base/log.h"

namespace coll {

const std::vector<ParamInfo>& allParams() {
  static const std::vector<ParamInfo> kParams = {
      {"DEBUG", ParamType::kString, "WARN", "", "log level: VERSION, WARN, INFO, TRACE"},
      {"DEBUG_SUBSYS", ParamType::kString, "INIT,BOOTSTRAP,NET,SHM,ENV",
       "", "subsystems logged, comma list; ^ excludes; ALL"},
      {"DEBUG_FILE", ParamType::kString, "", "",
       "log to this file instead of stderr; %h host, %p pid"},
      {"COMM_ID", ParamType::kString, "", "",
       "host:port of the rendezvous root; every process then derives the same unique id"},
      {"SOCKET_IFNAME", ParamType::kString, "", "",
       "interfaces to use: prefix list (eth,ib), =exact, ^exclude; default first non-lo up"},
      {"SOCKET_FAMILY", ParamType::kString, "", "", "AF_INET or AF_INET6 to force a family"},
      {"HOSTID", ParamType::kString, "", "",
       "overrides the host identity (hostname + boot id); ranks with different ids use net"},
      {"BOOTSTRAP_TIMEOUT_S", ParamType::kInt, "60", "s",
       "how long init waits for every rank to join before naming the missing ones"},
      {"TOPO_FILE", ParamType::kString, "", "",
       "NCCL topology XML to use instead of probing (completed by the probe where it knows "
       "more); skeleton files of cloud vendors load too"},
      {"TOPO_DUMP_FILE", ParamType::kString, "", "",
       "write the topology (probed or loaded) as NCCL topology XML to this file at init"},
      {"SHM_DISABLE", ParamType::kInt, "0", "", "1: never use shared memory between ranks"},
      {"P2P_DISABLE", ParamType::kInt, "0", "",
       "1: device buffers never use p2p FIFOs in GPU memory (shm or net through pinned host memory)"},
      {"P2P_LEVEL", ParamType::kString, "", "",
       "LOC: p2p only between ranks on the same GPU; otherwise also between peer-accessible GPUs"},
      {"NET", ParamType::kString, "Socket", "", "net backend for inter-host connections"},
      {"NSOCKS_PERTHREAD", ParamType::kInt, "1", "",
       "sockets per helper thread of a TCP connection (1..16)"},
      {"NET_DUPLEX", ParamType::kInt, "1", "",
       "1: small (LL) messages of two ranks over net, and tree edges, use one connection "
       "both ways, so acknowledgements ride on data; 0: one connection per direction"},
      {"SOCKET_NTHREADS", ParamType::kInt, "0", "",
       "helper threads per TCP connection (0..16); 0: the calling thread moves the bytes; "
       "messages over 64 KiB are striped over all max(1,N)*NSOCKS_PERTHREAD sockets"},
      {"MIN_NCHANNELS", ParamType::kInt, "1", "", "minimum number of channels"},
      {"MAX_NCHANNELS", ParamType::kInt, "1", "",
       "maximum number of channels (rings); one thread drives all of a host rank's channels, "
       "so on host buffers more than one only adds interleaving (measured: 1 beats 2 by "
       "1.1-1.6x over shm and TCP)"},
      {"BUFFSIZE", ParamType::kInt, "1048576", "bytes",
       "bytes of one connector FIFO (8 slots); the pipelining slice is BUFFSIZE/8. When set, "
       "it applies everywhere; unset, communicators whose ring crosses the network use "
       "NET_BUFFSIZE"},
      {"NET_BUFFSIZE", ParamType::kInt, "2097152", "bytes",
       "FIFO bytes per connector when ranks span hosts (or SHM_DISABLE is set) and BUFFSIZE "
       "is unset: over TCP, slices of 256 KiB beat 128 KiB (fewer syscalls and headers per "
       "byte), over shared memory the reverse"},
      {"CHUNK_MIN_BYTES", ParamType::kInt, "65536", "bytes",
       "an op uses one more channel per this many bytes, up to MAX_NCHANNELS"},
      {"ONESHOT_BYTES", ParamType::kInt, "32768", "bytes",
       "one-shot algorithms (every rank reads every peer's data from a shared-memory mailbox) "
       "up to this many bytes per rank when all ranks share a host; 0 = off"},
      {"DIRECT", ParamType::kInt, "1", "",
       "operations above ONESHOT_BYTES read the peers' buffers directly instead of going "
       "through FIFOs: 1 between threads of one process, 2 also between processes "
       "(process_vm_readv; slower than the FIFOs on 2-core VMs), 0 off"},
      {"NET_ONESHOT_BYTES", ParamType::kInt, "16384", "bytes",
       "allreduce as one pass of every input around the ring, reduced locally, up to this "
       "many bytes when ranks span hosts; 0 = off"},
      {"STREAM_MIN_BYTES", ParamType::kInt, "4194304", "bytes",
       "operations of at least this many bytes write their results with non-temporal "
       "stores (no read-for-ownership of destination lines); 0 = never"},
      {"ALGO", ParamType::kString, "", "",
       "algorithms the tuner may use (NCCL syntax): Ring,Tree; ^Tree; allreduce:tree;broadcast:ring"},
      {"PROTO", ParamType::kString, "", "",
       "protocols the tuner may use (NCCL syntax): LL (one-shot), Simple (FIFO slices); ^LL"},
      {"TUNER_HOP_US", ParamType::kString, "1.0", "us", "tuner model: one FIFO hop inside a host"},
      {"TUNER_NET_HOP_US", ParamType::kString, "7.0", "us", "tuner model: one hop over the net"},
      {"TUNER_LL_US", ParamType::kString, "0.25", "us", "tuner model: an LL (one-shot) operation inside a host"},
      {"TUNER_BW_GBS", ParamType::kString, "10.0", "GB/s", "tuner model: bandwidth inside a host"},
      {"TUNER_NET_BW_GBS", ParamType::kString, "3.0", "GB/s", "tuner model: bandwidth between hosts"},
      {"DEVICE_NCHANNELS", ParamType::kInt, "8", "",
       "channels of operations on device buffers (1..32): each is one thread block of the "
       "device executor with its own ring connectors"},
      {"DEVICE_EMULATE", ParamType::kInt, "0", "",
       "1: run operations through the device executor on host threads, host buffers "
       "standing in for device buffers (tests the device path without a GPU)"},
      {"DEVICE_EMULATE_BLOCKS", ParamType::kInt, "0", "",
       "with DEVICE_EMULATE: the emulated GPU runs at most this many lanes at once (a GPU's "
       "resident blocks), shared by the ranks of the process; 0 = no limit"},
      {"SPIN_US", ParamType::kInt, "50", "us", "busy-wait at most this long before yielding"},
      {"STALL_WARN_S", ParamType::kInt, "0", "s",
       "0 off; otherwise warn what a blocked op waits for after this long"},
      {"OP_TIMEOUT_S", ParamType::kInt, "0", "s",
       "0 off; otherwise an operation not complete this long after it started fails with "
       "collTimeout and aborts its communicator (collCommSetTimeout overrides it per comm)"},
  };
  return kParams;
}

static const ParamInfo* findParam(const char* name) {
  for (const auto& p : allParams())
    if (std::strcmp(p.name, name) == 0) return &p;
  return nullptr;
}

const char* paramRaw(const char* name) {
  std::string coll = std::string("COLL_") + name;
  if (const char* v = std::getenv(coll.c_str())) return v;
  std::string nccl = std::string("NCCL_") + name;
  return std::getenv(nccl.c_str());
}

bool parseSize(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str()) return false;
  int64_t mult = 1;
  if (*end) {
    switch (*end) {
      case 'k': case 'K': mult = 1LL << 10; break;
      case 'm': case 'M': mult = 1LL << 20; break;
      case 'g': case 'G': mult = 1LL << 30; break;
      default: return false;
    }
    if (end[1] != '\0') return false;
  }
  *out = v * mult;
  return true;
}

int64_t paramInt(const char* name) {
  const ParamInfo* info = findParam(name);
  int64_t def = info ? std::strtoll(info->defaultValue, nullptr, 0) : 0;
  const char* raw = paramRaw(name);
  if (!raw || !*raw) return def;
  int64_t v;
  if (!parseSize(raw, &v)) {
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(name).second)
      COLL_WARN(ENV, "COLL_%s=\"%s\" is not an integer; using the default %lld", name, raw,
                static_cast<long long>(def));
    return def;
  }
  return v;
}

std::string paramString(const char* name) {
  const char* raw = paramRaw(name);
  if (raw) return raw;
  const ParamInfo* info = findParam(name);
  return info ? info->defaultValue : "";
}

}  // namespace coll

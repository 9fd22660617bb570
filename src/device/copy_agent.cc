#include "device/copy_agent.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "collectives/config.h"
#include "base/log.h"
#include "base/param.h"
#include "base/wait.h"
#include "device/device_comm.h"
#include "transport/shm/shm.h"
#if COLL_HAVE_CUDA
#include "cuda/gpu.h"
#endif

namespace coll {

namespace {

constexpr uint64_t kTagCopyAgent = 10ull << 56;
constexpr size_t kMaxCopies = 32;                    // copies in one request (more: the client copies itself)
constexpr size_t kMaxBuffers = CopyAgent::kBuffers;  // a client's allocations the agent keeps open
constexpr size_t kMaxUnexportable = 16;              // allocations without an IPC handle, remembered
constexpr size_t kPage = 4096;
// A client's staged area: two operations' worth of COLL_DEVICE_STAGE_BYTES (an
// allreduce's input and output), at most this much.
constexpr size_t kMaxAreaBytes = size_t{64} << 20;

size_t roundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

// A done request's status.
enum : int32_t { kCopied = 0, kRefused = 1, kRefusedForGood = 2 };
// Cached allocations the client checks per request for having been freed (then the agent
// closes its mapping at the next request): every entry within kMaxBuffers / 2 requests.
constexpr size_t kChecksPerRequest = 2;

// A request's state word: its number (per client) and phase.
enum Phase : uint32_t { kPosted = 1, kTaken = 2, kDone = 3, kWithdrawn = 4 };
uint32_t stateOf(uint32_t seq, Phase p) { return seq << 3 | p; }
Phase phaseOf(uint32_t state) { return static_cast<Phase>(state & 7); }

}  // namespace

// A client's request, in the agent's segment.
struct CopyAgent::ClientRequest {
  struct Copy {
    uint32_t buffer;  // index into the client's buffers
    uint32_t toDevice;
    uint64_t offset;      // from the allocation's base
    uint64_t hostOffset;  // into the client's area
    uint64_t bytes;
  };

  // One of a client's allocations. Emulated: base is the client's address, no handle.
  struct Buffer {
    uint64_t base;
    uint64_t bytes;
    uint32_t generation;  // changed whenever the entry names another allocation
    uint32_t pad;
    unsigned char handle[64];
  };

  alignas(64) std::atomic<uint32_t> state;
  std::atomic<uint32_t> waiters;  // the client, asleep on state
  int32_t status;                 // of a done request: kCopied, kRefused... (why says why)
  uint32_t ncopies;
  char why[240];
  Copy copies[kMaxCopies];
  Buffer buffers[kMaxBuffers];
};

// The agent's entry of the setup round: its segment (name "" where it has none).
struct CopyAgent::SetupEntry {
  char name[48];
  uint64_t areaBytes;
  uint32_t nclients;
};

namespace {

// The ranks of c on this rank's GPU (emulated: on its host), in rank order.
std::vector<int> gpuGroup(const DeviceComm& d) {
  const auto& peers = d.core->bootstrap->peers();
  const PeerInfo& me = peers[static_cast<size_t>(d.core->rank)];
  std::vector<int> group;
  for (int r = 0; r < d.core->nranks; ++r) {
    const PeerInfo& p = peers[static_cast<size_t>(r)];
    if (d.emulate ? sameHost(me, p) : sameGpu(me, p)) group.push_back(r);
  }
  return group;
}

}  // namespace

struct CopyAgent::Shared {
  alignas(64) std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> doorbellWaiters;
  std::atomic<uint32_t> closed;
  uint32_t nclients;
  uint64_t areaBytes;

  static size_t requestsAt() { return roundUp(sizeof(Shared), 64); }
  static size_t areasAt(uint32_t n) { return roundUp(requestsAt() + n * sizeof(ClientRequest), kPage); }
  static size_t bytesFor(uint32_t n, size_t area) { return areasAt(n) + n * area; }
  ClientRequest& requestOf(int i) {
    return reinterpret_cast<ClientRequest*>(reinterpret_cast<char*>(this) + requestsAt())[i];
  }
  char* area(int i) { return reinterpret_cast<char*>(this) + areasAt(nclients) + static_cast<size_t>(i) * areaBytes; }
};

struct CopyAgent::Exported {
  uintptr_t base = 0;
  size_t bytes = 0;
  uint64_t id = 0;
};

// The agent's side: a thread serving its clients' requests.
struct CopyAgent::Server {
  CopyAgent* self = nullptr;
  std::thread thread;
  std::atomic<bool> stop{false};
  int dev = -1;
  bool emulated = false;
  Status broken;            // why it cannot copy at all (its segment not registered with CUDA)
  bool registered = false;  // the segment, with CUDA (gpu::mapHost)
  std::vector<int32_t> pids;
#if COLL_HAVE_CUDA
  struct Opened {
    uint32_t generation = 0;
    gpu::IpcMapping map;
  };
  std::vector<std::array<Opened, kMaxBuffers>> opened;  // per client
  void* stream = nullptr;
#endif

  // A request taken in this pass of run(): its copies queued, or why not.
  struct Taken {
    int client = 0;
    uint32_t seq = 0;
    Status st;
    bool forGood = false;
  };

  void run();
  void take(int i, std::vector<Taken>& taken);
  void finish(const Taken& t, const Status& synced);
  Status queue(int i, const ClientRequest& b, bool* forGood);
  void closeStale(int i, const ClientRequest& b);
  Result<char*> devicePointer(int i, const ClientRequest::Buffer& buf, uint32_t index);
  Status emulatedCopy(int i, const ClientRequest::Copy& cp, const ClientRequest::Buffer& buf, char* host,
                      bool* forGood);
};

Result<std::unique_ptr<CopyAgent>> CopyAgent::create(DeviceComm& d) {
  const std::vector<int> group = gpuGroup(d);
  const auto& peers = d.core->bootstrap->peers();
  const int agent = group.empty() ? d.core->rank : group.front();
  const int32_t agentPid = peers[static_cast<size_t>(agent)].pid;
  std::vector<int> clients;
  for (int r : group)
    if (peers[static_cast<size_t>(r)].pid != agentPid) clients.push_back(r);
  const bool on = param(IntParam::DEVICE_COPY_AGENT) != 0;

  std::unique_ptr<CopyAgent> a(new CopyAgent());
  a->d_ = &d;
  a->agentRank_ = agent;
  std::vector<SetupEntry> all(static_cast<size_t>(d.core->nranks));
  SetupEntry& mine = all[static_cast<size_t>(d.core->rank)];
  if (d.core->rank == agent && !clients.empty() && on) a->createSegment(clients.size(), &mine);
  ShmUnlinkGuard unlinkOwn{mine.name};
  COLL_CHECK(d.core->bootstrap->allGather(all.data(), sizeof(SetupEntry), kTagCopyAgent));
  const auto asClient = std::find(clients.begin(), clients.end(), d.core->rank);
  if (asClient != clients.end() && all[static_cast<size_t>(agent)].name[0] && on)
    a->mapSegment(all[static_cast<size_t>(agent)], static_cast<int>(asClient - clients.begin()), agentPid);
  // The agent's segment stays named until every client has mapped it.
  std::vector<int32_t> maps(static_cast<size_t>(d.core->nranks));
  maps[static_cast<size_t>(d.core->rank)] = a->seg_ ? 1 : 0;
  COLL_CHECK(d.core->bootstrap->allGather(maps.data(), sizeof(int32_t), kTagCopyAgent | 1));
  if (!a->seg_) return std::unique_ptr<CopyAgent>();
  if (d.core->rank == agent) {
    std::vector<int32_t> pids;
    for (int r : clients) pids.push_back(peers[static_cast<size_t>(r)].pid);
    a->startServer(std::move(pids));
  }
  return a;
}

// On the agent: its segment, a request record and an area per client; the name in `entry` ("" where
// it could not).
void CopyAgent::createSegment(size_t nclients, SetupEntry* entry) {
  const size_t area = std::min(roundUp(2 * d_->stageBytes + (64 << 10), kPage), kMaxAreaBytes);
  const auto n = static_cast<uint32_t>(nclients);
  const size_t bytes = Shared::bytesFor(n, area);
  Result<void*> seg = shmCreateSegment(entry->name, sizeof(entry->name), "copy", bytes);
  if (!seg.ok()) {
    COLL_WARN(COLL, "rank %d: no copy agent for the ranks of other processes on its GPU (%s): each copies itself",
              d_->core->rank, seg.status().message().c_str());
    entry->name[0] = 0;
    return;
  }
  seg_ = static_cast<Shared*>(seg.take());
  segBytes_ = bytes;
  seg_->nclients = n;
  seg_->areaBytes = area;
  entry->areaBytes = area;
  entry->nclients = n;
}

// On a client: the agent's segment mapped, this rank's area in it (or, failing, nothing:
// it copies itself).
void CopyAgent::mapSegment(const SetupEntry& theirs, int clientIndex, int32_t agentPid) {
  const std::string what = "rank " + std::to_string(agentRank_) + "'s copy agent";
  const Status named = checkShmName(theirs.name, sizeof(theirs.name), what);
  const size_t bytes = Shared::bytesFor(theirs.nclients, theirs.areaBytes);
  Result<void*> seg = named.ok() ? shmMapSegment(theirs.name, bytes, what) : Result<void*>(named);
  if (!seg.ok()) {
    COLL_WARN(COLL, "rank %d: %s: it copies its staged operations itself", d_->core->rank,
              seg.status().message().c_str());
    return;
  }
  seg_ = static_cast<Shared*>(seg.take());
  segBytes_ = bytes;
  clientIndex_ = clientIndex;
  area_ = seg_->area(clientIndex_);
  areaBytes_ = seg_->areaBytes;
  exported_.resize(kMaxBuffers);
  // Yama's ptrace rules: let the agent's process_vm_* reach this process (emulation).
  if (d_->emulate) (void)prctl(PR_SET_PTRACER, static_cast<unsigned long>(agentPid), 0, 0, 0);
#if COLL_HAVE_CUDA
  // Pinned here too: the copies this rank makes itself (whatever the agent refuses).
  if (!d_->emulate) areaRegistered_ = gpu::mapHost(area_, areaBytes_, area_).ok();
#endif
  COLL_INFO(INIT, "rank %d: rank %d copies its staged operations in and out (%zu-byte area)", d_->core->rank,
            agentRank_, areaBytes_);
}

// On the agent: the segment registered with CUDA and the thread serving the clients
// (whose pids are given, for process_vm_* under emulation).
void CopyAgent::startServer(std::vector<int32_t> pids) {
  server_ = std::make_unique<Server>();
  Server& s = *server_;
  s.self = this;
  s.dev = d_->cudaDev;
  s.emulated = d_->emulate;
  s.pids = std::move(pids);
#if COLL_HAVE_CUDA
  s.opened.resize(s.pids.size());
  if (!s.emulated) {  // on failure, the server refuses every request
    Result<char*> mapped = gpu::mapHost(seg_, segBytes_, seg_);
    if (!mapped.ok()) s.broken = mapped.status();
    s.registered = mapped.ok();
    Result<void*> stream = s.broken.ok() ? gpu::sideStream(s.dev) : Result<void*>(s.broken);
    if (stream.ok()) s.stream = stream.value();
    else s.broken = stream.status();
  }
#endif
  s.thread = std::thread([&s] { s.run(); });
  COLL_INFO(INIT, "rank %d: copies the staged operations of %zu rank(s) of other processes on its GPU", d_->core->rank,
            s.pids.size());
}

CopyAgent::~CopyAgent() {
  if (server_) {
    seg_->closed.store(1);
    server_->stop.store(true);
    seg_->doorbell.fetch_add(1);
    futexWake(&seg_->doorbell, true);
    if (server_->thread.joinable()) server_->thread.join();
#if COLL_HAVE_CUDA
    server_->opened.clear();
    if (server_->registered) gpu::unmapHost(seg_);
#endif
  }
#if COLL_HAVE_CUDA
  if (areaRegistered_) gpu::unmapHost(area_);
#endif
  if (seg_) munmap(seg_, segBytes_);
}

void CopyAgent::Server::run() {
#if COLL_HAVE_CUDA
  if (!emulated) (void)gpu::setDevice(dev);
#endif
  Shared* seg = self->seg_;
  Waiter waiter(self->d_->core->spinNs);
  std::vector<Taken> taken;
  for (;;) {
    const uint32_t rung = seg->doorbell.load(std::memory_order_seq_cst);
    const bool stopping = stop.load();
    // Every posted request taken and its copies queued, then one wait for all of them.
    taken.clear();
    for (uint32_t i = 0; i < seg->nclients; ++i) take(static_cast<int>(i), taken);
    Status synced;
#if COLL_HAVE_CUDA
    if (!taken.empty() && !emulated && broken.ok()) synced = gpu::syncStream(stream);
#endif
    for (Taken& t : taken) finish(t, synced);
    if (stopping) return;  // the pass after `closed` was set: clients see it from here on
    if (!taken.empty()) {
      waiter.reset();
      continue;
    }
    // Clients ring with a fence before their wake (futexWakeIfWaiting): no ring is lost.
    waiter.idle(WaitTarget{&seg->doorbell, &seg->doorbellWaiters, rung, -1, 0, true});
  }
}

void CopyAgent::Server::take(int i, std::vector<Taken>& taken) {
  ClientRequest& b = self->seg_->requestOf(i);
  uint32_t s = b.state.load(std::memory_order_seq_cst);
  if (phaseOf(s) != kPosted) return;
  const uint32_t seq = s >> 3;
  if (!b.state.compare_exchange_strong(s, stateOf(seq, kTaken))) return;  // withdrawn
  closeStale(i, b);
  Taken& t = taken.emplace_back();
  t.client = i;
  t.seq = seq;
  t.st = queue(i, b, &t.forGood);
}

// Done, once its copies (and every other request's of this pass) have landed, whatever
// failed: nothing of the request lands after it is marked done.
void CopyAgent::Server::finish(const Taken& t, const Status& synced) {
  ClientRequest& b = self->seg_->requestOf(t.client);
  const Status& st = t.st.ok() ? synced : t.st;
  b.status = st.ok() ? kCopied : t.forGood ? kRefusedForGood : kRefused;
  if (!st.ok()) std::snprintf(b.why, sizeof(b.why), "%s", st.message().c_str());
  COLL_TRACE(COLL, "copy agent: client %d request %u done: %s", t.client, t.seq,
             st.ok() ? "copied" : st.message().c_str());
  uint32_t was = stateOf(t.seq, kTaken);
  b.state.compare_exchange_strong(was, stateOf(t.seq, kDone));
  futexWakeIfWaiting(&b.state, &b.waiters, true);
}

// Queues every copy of a request (the descriptors read once, into locals: the record is
// the client's memory); emulated, makes them.
Status CopyAgent::Server::queue(int i, const ClientRequest& b, bool* forGood) {
  *forGood = !broken.ok();
  COLL_CHECK(broken);
  const uint32_t n = std::min<uint32_t>(b.ncopies, kMaxCopies);
  const size_t area = self->seg_->areaBytes;
  for (uint32_t k = 0; k < n; ++k) {
    const ClientRequest::Copy cp = b.copies[k];
    if (cp.buffer >= kMaxBuffers || cp.hostOffset > area || cp.bytes > area - cp.hostOffset)
      return invalidUsage("a copy request outside the client's area");
    const ClientRequest::Buffer buf = b.buffers[cp.buffer];
    if (cp.offset > buf.bytes || cp.bytes > buf.bytes - cp.offset)
      return invalidUsage("a copy request outside its buffer");
    char* host = self->seg_->area(i) + cp.hostOffset;
    if (emulated) {
      COLL_CHECK(emulatedCopy(i, cp, buf, host, forGood));
      continue;
    }
#if COLL_HAVE_CUDA
    COLL_ASSIGN(char* d, devicePointer(i, buf, cp.buffer));
    d += cp.offset;
    COLL_TRACE(COLL, "copy agent: client %d copy %u: %s %p (entry %u, generation %u, +%llu) %s area+%llu, %llu bytes",
               i, k, cp.toDevice ? "to" : "from", static_cast<void*>(d), cp.buffer, buf.generation,
               static_cast<unsigned long long>(cp.offset), cp.toDevice ? "from" : "to",
               static_cast<unsigned long long>(cp.hostOffset), static_cast<unsigned long long>(cp.bytes));
    COLL_CHECK(cp.toDevice ? gpu::copyOnStream(d, host, cp.bytes, stream)
                           : gpu::copyOnStream(host, d, cp.bytes, stream));
#endif
  }
  return okStatus();
}

// Closes the mappings of entries the client has since pointed elsewhere or found freed.
void CopyAgent::Server::closeStale(int i, const ClientRequest& b) {
#if COLL_HAVE_CUDA
  for (size_t j = 0; j < kMaxBuffers; ++j) {
    Opened& o = opened[static_cast<size_t>(i)][j];
    if (o.map.get() && o.generation != b.buffers[j].generation) o.map = gpu::IpcMapping();
  }
#else
  (void)i;
  (void)b;
#endif
}

#if COLL_HAVE_CUDA
Result<char*> CopyAgent::Server::devicePointer(int i, const ClientRequest::Buffer& buf, uint32_t index) {
  Opened& o = opened[static_cast<size_t>(i)][index];
  if (o.generation != buf.generation || !o.map.get()) {
    o.map = gpu::IpcMapping();  // the allocation this entry named before
    gpu::IpcHandle h;
    std::memcpy(h.bytes, buf.handle, sizeof(h.bytes));
    COLL_ASSIGN(o.map, gpu::IpcMapping::open(h, dev, "a client's buffer"));
    o.generation = buf.generation;
  }
  return static_cast<char*>(o.map.get());
}
#endif

Status CopyAgent::Server::emulatedCopy(int i, const ClientRequest::Copy& cp, const ClientRequest::Buffer& buf,
                                       char* host, bool* forGood) {
  const pid_t pid = pids[static_cast<size_t>(i)];
  for (size_t moved = 0; moved < cp.bytes;) {
    iovec local{host + moved, cp.bytes - moved};
    iovec far{reinterpret_cast<void*>(buf.base + cp.offset + moved), cp.bytes - moved};
    const ssize_t m = cp.toDevice ? process_vm_writev(pid, &local, 1, &far, 1, 0)
                                  : process_vm_readv(pid, &local, 1, &far, 1, 0);
    if (m < 0 && errno == EINTR) continue;
    if (m <= 0) {
      const int err = m < 0 ? errno : EFAULT;
      *forGood = err == EPERM;  // the kernel forbids it (ptrace rules): every request would fail
      return systemError(std::string(cp.toDevice ? "process_vm_writev" : "process_vm_readv") + " of pid " +
                             std::to_string(pid),
                         err);
    }
    moved += static_cast<size_t>(m);
  }
  return okStatus();
}

Result<bool> CopyAgent::copy(std::span<const StageCopy> copies) {
  if (copies.empty()) return true;
  if (!usable_ || copies.size() > kMaxCopies) return false;
  return request(copies);
}

// Entries naming allocations freed since (checked a few per request): emptied, so that
// the agent closes its mappings of them at the next request.
void CopyAgent::sweep(ClientRequest& b) {
#if COLL_HAVE_CUDA
  if (d_->emulate) return;
  for (size_t n = 0; n < kChecksPerRequest; ++n) {
    const size_t j = sweepAt_;
    sweepAt_ = (sweepAt_ + 1) % kMaxBuffers;
    Exported& e = exported_[j];
    if (e.base == 0) continue;
    Result<gpu::Allocation> al = gpu::allocationOf(reinterpret_cast<void*>(e.base));
    if (al.ok() && al.value().base == e.base && al.value().id == e.id) continue;
    e = Exported{};
    b.buffers[j].base = b.buffers[j].bytes = 0;
    ++b.buffers[j].generation;
  }
#else
  (void)b;
#endif
}

// The entry of this rank's buffer table naming cp's allocation, made now if need be (not
// one `used` by this request already); kMaxBuffers where the allocation has no IPC handle.
size_t CopyAgent::entryFor(ClientRequest& b, const StageCopy& cp, const std::array<bool, kMaxBuffers>& used) {
  Exported want{reinterpret_cast<uintptr_t>(cp.device), cp.bytes, 0};
#if COLL_HAVE_CUDA
  if (!d_->emulate) {
    Result<gpu::Allocation> al = gpu::allocationOf(cp.device);
    if (!al.ok() || std::find(unexportable_.begin(), unexportable_.end(), al.value().id) != unexportable_.end())
      return kMaxBuffers;
    want = {al.value().base, al.value().bytes, al.value().id};
  }
#endif
  // The entry already naming this allocation; else the one naming a freed allocation at
  // its address (the agent's mapping of that one then closes), else the next one this
  // request leaves.
  auto named = [&](const Exported& e) { return e.base == want.base && e.id == want.id && e.bytes == want.bytes; };
  auto sameBase = [&](const Exported& e) { return e.base == want.base; };
  size_t at = static_cast<size_t>(std::find_if(exported_.begin(), exported_.end(), named) - exported_.begin());
  if (at < kMaxBuffers) return at;
  at = static_cast<size_t>(std::find_if(exported_.begin(), exported_.end(), sameBase) - exported_.begin());
  if (at == kMaxBuffers || used[at]) {
    at = nextExport_;
    while (used[at]) at = (at + 1) % kMaxBuffers;
    nextExport_ = (at + 1) % kMaxBuffers;
  }
  ClientRequest::Buffer& buf = b.buffers[at];
#if COLL_HAVE_CUDA
  if (!d_->emulate) {
    Result<gpu::IpcHandle> h = gpu::ipcHandleOf(want.base);
    if (!h.ok()) {  // cudaMallocAsync pools, VMM, managed memory: remembered, copied here
      if (unexportable_.size() == kMaxUnexportable) unexportable_.erase(unexportable_.begin());
      unexportable_.push_back(want.id);
      return kMaxBuffers;
    }
    std::memcpy(buf.handle, h.value().bytes, sizeof(buf.handle));
  }
#endif
  buf.base = want.base;
  buf.bytes = want.bytes;
  ++buf.generation;
  exported_[at] = want;
  return at;
}

Result<bool> CopyAgent::request(std::span<const StageCopy> copies) {
  ClientRequest& b = seg_->requestOf(clientIndex_);
  sweep(b);
  std::array<bool, kMaxBuffers> used{};
  for (size_t k = 0; k < copies.size(); ++k) {
    const StageCopy& cp = copies[k];
    const size_t at = entryFor(b, cp, used);
    if (at == kMaxBuffers) return false;
    used[at] = true;
    b.copies[k] = {static_cast<uint32_t>(at), cp.toDevice ? 1u : 0u,
                   reinterpret_cast<uintptr_t>(cp.device) - exported_[at].base, static_cast<uint64_t>(cp.host - area_),
                   cp.bytes};
  }
  b.ncopies = static_cast<uint32_t>(copies.size());
  for (size_t k = 0; k < copies.size(); ++k)
    COLL_TRACE(COLL,
               "rank %d asks rank %d: copy %zu %s device %p (entry %u: allocation %#llx, %llu bytes) %s area+%llu",
               d_->core->rank, agentRank_, k, copies[k].toDevice ? "to" : "from", copies[k].device, b.copies[k].buffer,
               static_cast<unsigned long long>(b.buffers[b.copies[k].buffer].base),
               static_cast<unsigned long long>(b.copies[k].bytes), copies[k].toDevice ? "from" : "to",
               static_cast<unsigned long long>(b.copies[k].hostOffset));
  seq_ = (seq_ + 1) & 0x1fffffff;
  b.state.store(stateOf(seq_, kPosted), std::memory_order_seq_cst);
  seg_->doorbell.fetch_add(1, std::memory_order_seq_cst);
  futexWakeIfWaiting(&seg_->doorbell, &seg_->doorbellWaiters, true);
  return await(b);
}

Result<bool> CopyAgent::await(ClientRequest& b) {
  Waiter waiter(d_->core->spinNs);
  const auto started = std::chrono::steady_clock::now();
  const uint32_t done = stateOf(seq_, kDone);
  for (;;) {
    const uint32_t s = b.state.load(std::memory_order_acquire);
    if (s == done) return outcome(b);
    uint32_t posted = stateOf(seq_, kPosted);
    if (seg_->closed.load(std::memory_order_seq_cst) &&
        b.state.compare_exchange_strong(posted, stateOf(seq_, kWithdrawn))) {
      usable_ = false;  // the agent's communicator is gone
      return false;
    }
    if (Status st = fatalWhileStalled(*d_->core, waiter, started); !st.ok()) return abandon(b, std::move(st));
    waiter.idle(WaitTarget{&b.state, &b.waiters, s, -1, 0, true});
  }
}

bool CopyAgent::outcome(const ClientRequest& b) {
  if (b.status == kCopied) return true;
  if (b.status == kRefusedForGood) usable_ = false;
  if (!refusedLogged_ || !usable_)
    COLL_INFO(COLL, "rank %d: rank %d could not make a staged copy (%.*s): this rank makes %s itself", d_->core->rank,
              agentRank_, static_cast<int>(sizeof(b.why)), b.why, usable_ ? "such copies" : "every copy from now on");
  refusedLogged_ = true;
  return false;
}

// The call fails (aborted, timed out) while its request is out: withdrawn if the agent
// has not taken it, else waited for a second (the agent's copies take microseconds). An
// agent that does not finish then (its process stopped) may still write this call's
// outputs later; this rank never asks it again.
Status CopyAgent::abandon(ClientRequest& b, Status st) {
  uint32_t posted = stateOf(seq_, kPosted);
  if (!b.state.compare_exchange_strong(posted, stateOf(seq_, kWithdrawn))) {
    for (int i = 0; i < 1000 && b.state.load() != stateOf(seq_, kDone); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (b.state.load() != stateOf(seq_, kDone)) {
      usable_ = false;
      COLL_WARN(COLL,
                "rank %d: rank %d did not finish a staged copy within a second of this call failing: it may "
                "still write this call's buffers; this rank copies itself from now on",
                d_->core->rank, agentRank_);
    }
  }
  return st.prefix("rank " + std::to_string(d_->core->rank) + ", waiting for rank " + std::to_string(agentRank_) +
                   " to copy a staged operation: ");
}

}  // namespace coll

#include "comm/one_sided.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "comm/comm.h"

namespace coll {

namespace {

constexpr uint64_t kTagOneSided = 12ull << 56;  // context 0, the only one

// One frame of a put: where its bytes go, and whether it ends the put (the signal).
struct PutFrame {
  uint64_t window;  // ordinal
  uint64_t offset;
  uint64_t bytes;  // following this header
  uint32_t sigIdx;
  uint32_t signal;  // 1: the put's last frame
};
constexpr size_t kPutFrameDataBytes = kMaxFrameBytes - sizeof(PutFrame);

const Registration* windowByOrdinal(const collComm* c, uint64_t ordinal) {
  for (const auto& [handle, r] : c->registrations)
    if (r.window && r.ordinal == ordinal) return &r;
  return nullptr;
}

std::string windowName(uint64_t ordinal) { return "window #" + std::to_string(ordinal); }

// A frame's bytes into this rank's window.
Status land(collComm* c, int from, const PutFrame& p, const char* data) {
  if (p.bytes == 0) return okStatus();
  const Registration* w = windowByOrdinal(c, p.window);
  const std::string who = "a put from rank " + std::to_string(from) + " to rank " + std::to_string(c->rank);
  if (!w)
    return invalidUsage(who + " names " + windowName(p.window) +
                        " (the windows each rank registered, counted from 0), which rank " + std::to_string(c->rank) +
                        " does not have: windows must be registered in the same order on every rank");
  if (p.offset > w->bytes || p.bytes > w->bytes - p.offset)
    return invalidArgument(who + " writes bytes " + std::to_string(p.offset) + ".." +
                           std::to_string(p.offset + p.bytes) + " of " + windowName(p.window) + ", which has " +
                           std::to_string(w->bytes) + " bytes there");
  std::memcpy(const_cast<char*>(w->base) + p.offset, data, p.bytes);
  return okStatus();
}

// The next frame from peer, landed; counts its signal.
Status receiveFrame(collComm* c, int peer) {
  std::vector<char> frame;
  COLL_CHECK(c->bootstrap->recvWithin(peer, kTagOneSided, &frame, c->opTimeoutS.load()));
  PutFrame p{};
  if (frame.size() < sizeof(p))
    return internalError("a one-sided message from rank " + std::to_string(peer) + " is short");
  std::memcpy(&p, frame.data(), sizeof(p));
  if (p.bytes != frame.size() - sizeof(p))
    return internalError("a one-sided message from rank " + std::to_string(peer) + " has the wrong length");
  COLL_CHECK(land(c, peer, p, frame.data() + sizeof(p)));
  if (p.signal) ++c->signalsArrived[{peer, static_cast<int>(p.sigIdx)}];
  return okStatus();
}

}  // namespace

Status putSignal(collComm* c, const void* local, size_t bytes, int peer, uint64_t window, size_t offset, int sigIdx) {
  const auto* src = static_cast<const char*>(local);
  const auto sig = static_cast<uint32_t>(sigIdx);
  if (peer == c->rank) {
    COLL_CHECK(land(c, peer, PutFrame{window, offset, bytes, sig, 1}, src));
    ++c->signalsArrived[{peer, sigIdx}];
    return okStatus();
  }
  std::vector<char> frame;
  size_t done = 0;
  do {
    const size_t n = std::min(bytes - done, kPutFrameDataBytes);
    const PutFrame p{window, offset + done, n, sig, done + n == bytes ? 1u : 0u};
    frame.resize(sizeof(p) + n);
    std::memcpy(frame.data(), &p, sizeof(p));
    if (n) std::memcpy(frame.data() + sizeof(p), src + done, n);
    COLL_CHECK(c->bootstrap->send(peer, kTagOneSided, frame.data(), frame.size()));
    done += n;
  } while (done < bytes);
  return okStatus();
}

Status waitSignals(collComm* c, std::span<const SignalWait> waits) {
  for (const SignalWait& w : waits) {
    const std::pair<int, int> key{w.peer, w.sigIdx};
    while (c->signalsArrived[key] - c->signalsTaken[key] < w.opCnt) {
      if (w.peer == c->rank)
        return invalidUsage("waits for " + std::to_string(w.opCnt) + " signal(s) from itself (rank " +
                            std::to_string(c->rank) + "), which has sent " +
                            std::to_string(c->signalsArrived[key] - c->signalsTaken[key]) +
                            " not yet waited for: they would never come");
      COLL_CHECK(receiveFrame(c, w.peer));
    }
    c->signalsTaken[key] += w.opCnt;
  }
  return okStatus();
}

}  // namespace coll

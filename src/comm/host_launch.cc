#include "comm/launch.h"

#include "comm/executor.h"

namespace coll {

namespace {

// A one-shot operation runs on channel 0 in call order with the ring operations (the
// ring one-shot shares channel 0's connectors; two ranks over net: the LL connection,
// OneShotState::pair): the steps so far become a segment of their own, then the one-shot, and channel
// 0 starts a new program. Numbered now (its mailbox rounds), in call order.
void cutChannel0(CommLaunch& l, std::shared_ptr<OneShot> os) {
  Program& ch0 = l.channels[0];
  if (!ch0.steps.empty()) {
    l.channel0Before.push_back({std::make_unique<Program>(std::move(ch0)), nullptr});
    ch0 = Program();
    initProgram(ch0, l, "channel 0");
  }
  l.channel0Before.push_back({nullptr, std::move(os)});
}

}  // namespace

Status buildHostPrograms(CommLaunch& l) {
  const BuildInput shared = startPrograms(l);
  for (size_t i = 0; i < l.ops.size(); ++i) {
    const OpDesc& od = l.ops[i];
    if (l.routes[i] == Route::kOneShot) {
      cutChannel0(l, std::make_shared<OneShot>(oneShotContext(l.comm), od));
    } else if (isPeerOp(od.kind)) {
      const char* what = od.kind == CollKind::kPeerSend ? "send to rank " : "receive from rank ";
      buildPeerStep(l, i, od.root, what + std::to_string(od.root));
    } else {
      buildCollective(l, shared, i);
    }
  }
  return buildSelfCopies(l);
}

void hostLanes(CommLaunch& l, const std::vector<Program*>& programs, std::vector<std::unique_ptr<Lane>>* lanes) {
  std::vector<std::unique_ptr<Lane>> channel0;
  for (CommLaunch::Segment& s : l.channel0Before)
    channel0.push_back(s.program ? programLane(*s.program) : oneShotLane(l.comm, s.oneShot));
  const size_t first = lanes->size();  // channel 0 leads, as in `programs`
  for (Program* p : programs) {
    if (p == &l.channels[0] && !channel0.empty()) channel0.push_back(programLane(*p));
    else lanes->push_back(programLane(*p));
  }
  if (!channel0.empty())
    lanes->insert(lanes->begin() + static_cast<std::ptrdiff_t>(first), sequenceLane(std::move(channel0)));
}

}  // namespace coll

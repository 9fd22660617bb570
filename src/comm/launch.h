// A launch: what one communicator runs of a group (or of one call), and how each path
// builds it. group.cc runs the pipeline (collect, admit, stage, route, connect, build,
// run); the paths build their programs:
//   - host programs (host_launch.cc): a program per channel, per send/recv peer and for
//     copies to oneself, with one-shot operations in channel 0's call order; run as lanes
//     of the host executor (executor.h);
//   - device programs (device_launch.cc): the same builders over the device connector
//     set, channels an operation leaves empty carrying tokens, send/recv spread over lanes
//     by distance; lowered to kernel lanes (device/device_exec.h), or taken from a plan
//     an earlier launch of the same operations left (device/plan_cache.h);
//   - staged device launches (device/stage.h): small operations of a time-sliced GPU,
//     copied to host memory and run as host launches;
//   - copies only (device/device_exec.h copiesOnly): one rank's device copies, no lanes.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/oneshot.h"
#include "algorithms/plan.h"
#include "comm/comm.h"
#include "comm/lane.h"
#include "comm/profile.h"
#include "device/device_exec.h"
#include "device/stage.h"

namespace coll {

enum class Route : uint8_t { kOneShot, kRing, kTree, kDirectAllReduce };

// Everything one communicator runs in one launch.
struct CommLaunch {
  collComm* comm;
  bool device = false;  // its operations are on device buffers (all of them: checked)
  std::vector<OpDesc> ops;
  std::vector<Route> routes;  // per op
  bool connectsTrees = false;
  std::vector<Program> channels;
  // Host launches with one-shot operations: what channel 0 runs before its current
  // program, in call order (a one-shot shares channel 0's connectors and the mailboxes
  // with the ring operations around it).
  struct Segment {
    std::unique_ptr<Program> program;  // ring steps before a one-shot
    std::shared_ptr<OneShot> oneShot;
  };
  std::vector<Segment> channel0Before;
  // Host: one program per peer. Device: per lane, peers spread by distance (peerLane).
  std::map<int, Program> sends, recvs;
  Program self;                      // send/recv to oneself
  std::unique_ptr<Staging> staging;  // a device launch run from host memory (device/stage.h)
  bool splitOff = false;             // its staged operations, split from the comm's device launch
  ProfLaunch prof;                   // its profiler events (comm/profile.h)
};

using Launches = std::vector<std::unique_ptr<CommLaunch>>;

// A failed phase of a launch: names the communicator it failed on.
inline Status failOn(collComm* c, Status st, collComm** failedComm) {
  if (!st.ok()) *failedComm = c;
  return st;
}

// What both paths share (launch.cc).
// p as a program of l named `lane`.
void initProgram(Program& p, CommLaunch& l, std::string lane);
// The channel programs and the copies to oneself, named, over the launch's connector
// set; returns what the algorithm builders read of the communicator.
BuildInput startPrograms(CommLaunch& l);
// Operation i of the launch (a collective, not a one-shot) added to the channel programs.
void buildCollective(CommLaunch& l, const BuildInput& shared, size_t i);
// Send or receive i of the launch as a step of program `key` of l.sends or l.recvs,
// named `lane` when it is the first.
void buildPeerStep(CommLaunch& l, size_t i, int key, const std::string& lane);
// Sends to oneself paired with receives from oneself, in call order.
Status buildSelfCopies(CommLaunch& l);
// Distance from the sender to the receiver along the ring of ranks: the same number on
// both ends of a send/recv pair.
int peerDistance(const collComm* c, const OpDesc& od);
// The non-empty programs of a built launch; device launches must fit their lane budget.
Status lanesOf(CommLaunch& l, std::vector<Program*>* mine);
// The launch's profiler events begin (with the device plan reused, where one is).
void profStart(CommLaunch& l, const DevicePlan* plan = nullptr);

// The host path (host_launch.cc).
Status buildHostPrograms(CommLaunch& l);
// The host lanes of a built launch: its programs, channel 0 after the segments before it.
void hostLanes(CommLaunch& l, const std::vector<Program*>& programs, std::vector<std::unique_ptr<Lane>>* lanes);

// The device path (device_launch.cc).
Status buildDevicePrograms(CommLaunch& l);
// A device launch's part: the plan an earlier launch of the same operations left, or its
// programs built now.
Status devicePart(CommLaunch& l, uint64_t calledNs, std::vector<DevicePart>* parts);
// Small device launches of a time-sliced GPU run from host memory (device/stage.h), as
// host launches from here on; unstage copies their outputs back.
Status stage(Launches& launches, collComm** failedComm);
Status unstage(Launches& launches, collComm** failedComm);

}  // namespace coll

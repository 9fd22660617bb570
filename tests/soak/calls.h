// One operation on this rank: drawn, laid out in its buffers, called, verified.
#pragma once

#include <string>
#include <vector>

#include "soak.h"

namespace soak {

// Draws an operation; counts fit buffers of capacity bytes on communicators of up to
// worldSize ranks (0 .. capacity, most of them small).
OpSpec drawOp(Rng& rng, int worldSize, size_t capacity);

class Call {
 public:
  Call(const OpSpec& spec, View* view, Buffers* buffers);
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  Call(Call&&) = default;
  // Fills the buffers (inputs, canaries) and makes the PreMulSum op; "" or what failed.
  std::string prepare();
  // Calls the library (a group of its own for send/recv kinds).
  collResult_t issue();
  // Checks the output, the guard bytes and that inputs are unchanged; "" or the first
  // difference. scratch is a buffer of at least the capacity.
  std::string verify(std::vector<unsigned char>& scratch) const;
  // Frees the PreMulSum op; "" or what failed.
  std::string release();
  // Flips a bit of this rank's output (the checker's own test); false: there is none.
  bool corrupt();
  size_t payloadBytes() const;
  const OpSpec& spec() const { return spec_; }
  const View& view() const { return *view_; }

 private:
  void layOut();
  void layOutFlat();
  void layOutBlocks();
  void expected(unsigned char* out) const;
  size_t pairCount(int srcRank, int dstRank) const;
  size_t sendOffset(int srcRank, int dstRank) const;  // elements, in srcRank's send buffer
  size_t recvOffset(int srcRank) const;               // elements, in this rank's receive buffer
  collResult_t issueP2p();
  std::string compare(const unsigned char* got, const unsigned char* want, size_t elems, const char* what) const;

  OpSpec spec_;
  View* view_;
  Buffers* buf_;
  Inputs in_;
  int n_, me_, root_;
  size_t es_;
  collRedOp_t redOp_ = collSum;
  bool madeOp_ = false;
  unsigned char scalar_[8] = {};
  // Set by layOut():
  unsigned char* sendArg_ = nullptr;
  unsigned char* recvArg_ = nullptr;
  unsigned char* out_ = nullptr;  // where this rank's result lands
  size_t outElems_ = 0;
  bool outUntouched_ = false;       // a non-root: out_ must keep its canary
  size_t keptElems_ = 0;            // input at the send buffer's start the call must leave unchanged
  unsigned char* guard_ = nullptr;  // kGuard canary bytes after the last byte the call may write
};

}  // namespace soak

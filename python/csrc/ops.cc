// The collective operations of ProcessGroupCollectives (process_group.h): reductions, copies,
// all-to-all and barriers. Each checks its arguments on the caller's thread and posts a
// body that issues its library calls on the operation's communicator.
#include <Python.h>

#include "process_group.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace torch_collectives {

namespace {

// Small contiguous CPU tensors of one dtype, reduced together: one reduction of their
// concatenation costs less than a library group of one per tensor (2 processes: 32 of 1
// KiB in a group ~20 us, one of 32 KiB ~6 us; 32 of 8 KiB 67 us, one of 256 KiB 26 us).
constexpr size_t kFuseMaxBytes = size_t{256} << 10;

// Not where two tensors share bytes: one reduction of both copies would not be the two
// reductions in turn that the group gives (a tensor passed twice is summed twice).
bool fusible(const std::vector<at::Tensor>& ts) {
  if (ts.size() < 2 || !ts[0].device().is_cpu()) return false;
  size_t bytes = 0;
  for (const at::Tensor& t : ts) {
    if (t.scalar_type() != ts[0].scalar_type() || !t.is_contiguous()) return false;
    bytes += t.nbytes();
  }
  return bytes <= kFuseMaxBytes && !partsOverlap(spansOfEach(ts));
}

// Copies between a list of contiguous CPU tensors and their concatenation, flat.
void packInto(const std::vector<at::Tensor>& ts, at::Tensor& flat) {
  auto* p = static_cast<char*>(flat.data_ptr());
  for (const at::Tensor& t : ts) {
    if (t.nbytes()) std::memcpy(p, t.const_data_ptr(), t.nbytes());
    p += t.nbytes();
  }
}
void unpackFrom(const at::Tensor& flat, const std::vector<at::Tensor>& ts) {
  const auto* p = static_cast<const char*>(flat.const_data_ptr());
  for (const at::Tensor& t : ts) {
    if (t.nbytes()) std::memcpy(t.data_ptr(), p, t.nbytes());
    p += t.nbytes();
  }
}

}  // namespace

// ---- reductions ----

// Issues call with r's library op: a PreMulSum op made for this call (freed by the
// returned Finish, once the call is complete), or the built-in one; throws its error.
ProcessGroupCollectives::Finish ProcessGroupCollectives::runReduction(
    const Reduction& r, const OpInfo& op, collComm_t comm, const std::function<collResult_t(collRedOp_t)>& call) {
  collRedOp_t redOp = r.op;
  if (r.preMulSum) {
    char scalar[8];
    preMulSumScalar(r, scalar);
    check(collRedOpCreatePreMulSum(&redOp, scalar, r.type, collScalarHostImmediate, comm), op, comm);
  }
  const collResult_t res = call(redOp);
  Finish destroy;
  if (r.preMulSum) destroy = [redOp, comm] { collRedOpDestroy(redOp, comm); };
  if (res != collSuccess && destroy) destroy();
  check(res, op, comm);
  return destroy;
}

ProcessGroupCollectives::Finish ProcessGroupCollectives::reduceTensor(at::Tensor t, const Reduction& r, int root,
                                                                      const OpInfo& op) {
  at::Tensor buf = dense(t);
  if (r.path == Path::kBitwise) {
    at::Tensor all = buf.new_empty({size_, buf.numel()});
    allgatherBytes(buf.data_ptr(), all.data_ptr(), buf.nbytes(), buf.device(), op);
    return [this, t, buf, all, r, root]() mutable {
      if (root < 0 || root == rank_) buf.copy_(combineBitwise(all, r.bitwise).view_as(buf));
      writeBack(buf, t);
    };
  }
  at::Tensor low = lowered(buf, r);
  const size_t count = static_cast<size_t>(low.numel());
  collComm_t comm = commOf(buf.device());
  Finish destroy = runReduction(r, op, comm, [&](collRedOp_t redOp) {
    return root < 0 ? collAllReduce(low.data_ptr(), low.data_ptr(), count, r.type, redOp, comm, nullptr)
                    : collReduce(low.data_ptr(), low.data_ptr(), count, r.type, redOp, root, comm, nullptr);
  });
  return [t, buf, low, r, destroy]() mutable {
    if (destroy) destroy();
    raise(low, buf, r);
    writeBack(buf, t);
  };
}

ProcessGroupCollectives::Finish ProcessGroupCollectives::reduceScatterFlat(const at::Tensor& in, at::Tensor out,
                                                                           const Reduction& r, const OpInfo& op) {
  at::Tensor src = dense(in), dst = dense(out);
  if (r.path == Path::kBitwise) {
    at::Tensor all = src.new_empty({size_, src.numel()});
    allgatherBytes(src.data_ptr(), all.data_ptr(), src.nbytes(), src.device(), op);
    return [this, out, dst, all, r]() mutable {
      at::Tensor mine = all.narrow(1, rank_ * dst.numel(), dst.numel());
      dst.copy_(combineBitwise(mine, r.bitwise).view_as(dst));
      writeBack(dst, out);
    };
  }
  at::Tensor lowIn = lowered(src, r), lowOut = lowered(dst, r);
  collComm_t comm = commOf(src.device());
  Finish destroy = runReduction(r, op, comm, [&](collRedOp_t redOp) {
    return collReduceScatter(lowIn.data_ptr(), lowOut.data_ptr(), static_cast<size_t>(lowOut.numel()), r.type, redOp,
                             comm, nullptr);
  });
  return [out, dst, src, lowIn, lowOut, r, destroy]() mutable {
    if (destroy) destroy();
    raise(lowOut, dst, r);
    writeBack(dst, out);
  };
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allreduce(std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceOptions& opts) {
  at::Tensor t = single("allreduce", tensors);
  Reduction r = planReduction("allreduce", t.scalar_type(), opts.reduceOp);
  OpInfo op = info("allreduce", t);
  return post(c10d::OpType::ALLREDUCE, op, {t}, t.device(), [this, t, r, op] { return reduceTensor(t, r, -1, op); });
}

// One library group of one reduction per tensor: a single launch for the whole list;
// small CPU tensors of one dtype, outside a coalesced block, as one reduction of their
// concatenation (fusible).
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<Reduction> plans;
  for (const at::Tensor& t : tensors) {
    checkTensor("allreduce_coalesced", t);
    TORCH_CHECK(t.device() == tensors[0].device(), "torch_collectives: allreduce_coalesced: tensors on ",
                tensors[0].device().str(), " and ", t.device().str(), "; one device per call");
    plans.push_back(planReduction("allreduce_coalesced", t.scalar_type(), opts.reduceOp));
  }
  OpInfo op = info("allreduce_coalesced", std::to_string(tensors.size()) + " tensors");
  // Not inside an open coalesced block: the copy in would read the tensors before the
  // block's earlier operations ran, and the copy out overwrite what its later ones wrote.
  if (!coalesced_.open && fusible(tensors))
    return post(c10d::OpType::ALLREDUCE_COALESCED, op, tensors, deviceOf(tensors), [this, tensors, r = plans[0], op] {
      int64_t count = 0;
      for (const at::Tensor& t : tensors) count += t.numel();
      at::Tensor flat = at::empty({count}, tensors[0].options());
      packInto(tensors, flat);
      Finish reduced = reduceTensor(flat, r, -1, op);
      return [tensors, flat, reduced] {
        if (reduced) reduced();
        unpackFrom(flat, tensors);
      };
    });
  const bool inOrder = listInOrder(spansOfEach(tensors));
  return post(c10d::OpType::ALLREDUCE_COALESCED, op, tensors, deviceOf(tensors), [this, tensors, plans, op, inOrder] {
    std::vector<Body> bodies;
    for (size_t i = 0; i < tensors.size(); ++i)
      bodies.push_back([this, t = tensors[i], r = plans[i], op] { return reduceTensor(t, r, -1, op); });
    return runGroup(bodies, op, deviceOf(tensors), inOrder);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::reduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::ReduceOptions& opts) {
  at::Tensor t = single("reduce", tensors);
  checkRoot("reduce", opts.rootRank, size_);
  Reduction r = planReduction("reduce", t.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce", t);
  const int root = static_cast<int>(opts.rootRank);
  return post(c10d::OpType::REDUCE, op, {t}, t.device(),
              [this, t, r, root, op] { return reduceTensor(t, r, root, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                       std::vector<std::vector<at::Tensor>>& inputs,
                                                                       const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = single("reduce_scatter", outputs);
  std::vector<at::Tensor> ins = rankList("reduce_scatter", "input", inputs, out, size_);
  Reduction r = planReduction("reduce_scatter", out.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce_scatter", out);
  op.inputs = ins;
  return post(c10d::OpType::REDUCE_SCATTER, op, {out}, out.device(), [this, out, ins, r, op] {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : ins) flat.push_back(t.reshape({-1}));
    return reduceScatterFlat(at::cat(flat), out, r, op);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                             const c10d::ReduceScatterOptions& opts) {
  checkWhole("reduce_scatter_tensor", "input", input, output, size_);
  Reduction r = planReduction("reduce_scatter_tensor", output.scalar_type(), opts.reduceOp);
  OpInfo op = info("reduce_scatter_tensor", output);
  op.inputs = {input};
  at::Tensor out = output, in = input;
  return post(c10d::OpType::_REDUCE_SCATTER_BASE, op, {out}, out.device(),
              [this, out, in, r, op] { return reduceScatterFlat(in, out, r, op); });
}

// One library group of one reduce-scatter per (output, input) pair (FSDP's gradients).
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "torch_collectives: reduce_scatter_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  std::vector<Reduction> plans;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkWhole("reduce_scatter_tensor_coalesced", "input", inputs[i], outputs[i], size_);
    TORCH_CHECK(inputs[i].device() == inputs[0].device(),
                "torch_collectives: reduce_scatter_tensor_coalesced: ", "tensors on ", inputs[0].device().str(),
                " and ", inputs[i].device().str(), "; one device per call");
    plans.push_back(planReduction("reduce_scatter_tensor_coalesced", outputs[i].scalar_type(), opts.reduceOp));
  }
  OpInfo op = info("reduce_scatter_tensor_coalesced", std::to_string(inputs.size()) + " tensors");
  op.inputs = inputs;
  const bool inOrder = listInOrder(spansOfEach(inputs, outputs));
  return post(c10d::OpType::COALESCED, op, outputs, deviceOf(inputs), [this, outputs, inputs, plans, op, inOrder] {
    std::vector<Body> bodies;
    for (size_t i = 0; i < inputs.size(); ++i)
      bodies.push_back([this, out = outputs[i], in = inputs[i], r = plans[i], op] {
        return reduceScatterFlat(in, out, r, op);
      });
    return runGroup(bodies, op, deviceOf(inputs), inOrder);
  });
}

// ---- copies (every dtype, as bytes) ----

void ProcessGroupCollectives::allgatherBytes(const void* in, void* out, size_t bytes, c10::Device device,
                                             const OpInfo& op) {
  collComm_t comm = commOf(device);
  check(collAllGather(in, out, bytes, collUint8, comm, nullptr), op, comm);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::broadcast(std::vector<at::Tensor>& tensors,
                                                                  const c10d::BroadcastOptions& opts) {
  at::Tensor t = single("broadcast", tensors);
  checkRoot("broadcast", opts.rootRank, size_);
  OpInfo op = info("broadcast", t);
  const int root = static_cast<int>(opts.rootRank);
  return post(c10d::OpType::BROADCAST, op, {t}, t.device(), [this, t, root, op]() -> Finish {
    at::Tensor buf = dense(t);
    collComm_t comm = commOf(buf.device());
    check(collBroadcast(buf.data_ptr(), buf.data_ptr(), buf.nbytes(), collUint8, root, comm, nullptr), op, comm);
    return [t, buf]() mutable { writeBack(buf, t); };
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                                  std::vector<at::Tensor>& inputs,
                                                                  const c10d::AllgatherOptions&) {
  at::Tensor in = single("allgather", inputs);
  std::vector<at::Tensor> outs = rankList("allgather", "output", outputs, in, size_);
  OpInfo op = info("allgather", in);
  op.inputs = {in};
  return post(c10d::OpType::ALLGATHER, op, outs, in.device(), [this, in, outs, op]() -> Finish {
    at::Tensor src = dense(in);
    at::Tensor all = src.new_empty({size_, src.numel()});
    allgatherBytes(src.data_ptr(), all.data_ptr(), src.nbytes(), src.device(), op);
    return [this, src, all, outs]() mutable {
      for (int r = 0; r < size_; ++r) outs[r].copy_(all[r].view(outs[r].sizes()));
    };
  });
}

std::function<void()> allgatherInto(at::Tensor out, at::Tensor in,
                                    const std::function<void(const at::Tensor&, const at::Tensor&)>& gather) {
  at::Tensor src = dense(in), dst = dense(out);
  gather(src, dst);
  return [out, src, dst]() mutable { writeBack(dst, out); };
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::AllgatherOptions&) {
  checkWhole("all_gather_into_tensor", "output", output, input, size_);
  OpInfo op = info("all_gather_into_tensor", input);
  op.inputs = {input};
  at::Tensor out = output, in = input;
  return post(c10d::OpType::_ALLGATHER_BASE, op, {out}, in.device(), [this, out, in, op] {
    return allgatherInto(out, in, [&](const at::Tensor& src, const at::Tensor& dst) {
      allgatherBytes(src.data_ptr(), dst.data_ptr(), src.nbytes(), src.device(), op);
    });
  });
}

// One library group of one allgather per (output, input) pair (FSDP's parameters).
c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(), "torch_collectives: allgather_into_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkWhole("allgather_into_tensor_coalesced", "output", outputs[i], inputs[i], size_);
    TORCH_CHECK(inputs[i].device() == inputs[0].device(),
                "torch_collectives: allgather_into_tensor_coalesced: ", "tensors on ", inputs[0].device().str(),
                " and ", inputs[i].device().str(), "; one device per call");
  }
  OpInfo op = info("allgather_into_tensor_coalesced", std::to_string(inputs.size()) + " tensors");
  op.inputs = inputs;
  const bool inOrder = listInOrder(spansOfEach(inputs, outputs));
  return post(c10d::OpType::COALESCED, op, outputs, deviceOf(inputs), [this, outputs, inputs, op, inOrder] {
    std::vector<Body> bodies;
    for (size_t i = 0; i < inputs.size(); ++i)
      bodies.push_back([this, out = outputs[i], in = inputs[i], op] {
        return allgatherInto(out, in, [&](const at::Tensor& src, const at::Tensor& dst) {
          allgatherBytes(src.data_ptr(), dst.data_ptr(), src.nbytes(), src.device(), op);
        });
      });
    return runGroup(bodies, op, deviceOf(inputs), inOrder);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_), "torch_collectives: allgather_coalesced takes ", size_,
              " output lists (one per rank), got ", outputLists.size());
  for (const at::Tensor& t : inputs)
    TORCH_CHECK(t.device().is_cpu(), "torch_collectives: allgather_coalesced: CPU tensors only, got one on ",
                t.device().str(), " (use all_gather_into_tensor)");
  for (const auto& list : outputLists) {
    TORCH_CHECK(list.size() == inputs.size(), "torch_collectives: allgather_coalesced: an output list has ",
                list.size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) checkSameAs("allgather_coalesced", "output", list[i], inputs[i]);
  }
  OpInfo op = info("allgather_coalesced", std::to_string(inputs.size()) + " tensors");
  op.inputs = inputs;
  std::vector<at::Tensor> flatOuts;
  for (const auto& list : outputLists) flatOuts.insert(flatOuts.end(), list.begin(), list.end());
  return post(c10d::OpType::ALLGATHER_COALESCED, op, flatOuts, deviceOf(inputs),
              [this, outputLists, inputs, op]() -> Finish {
                size_t total = 0;
                for (const at::Tensor& t : inputs) total += t.nbytes();
                auto mine = std::make_shared<std::vector<uint8_t>>(total);
                auto all = std::make_shared<std::vector<uint8_t>>(total * static_cast<size_t>(size_));
                size_t off = 0;
                for (const at::Tensor& t : inputs) {
                  at::Tensor c = dense(t);
                  std::memcpy(mine->data() + off, c.data_ptr(), c.nbytes());
                  off += c.nbytes();
                }
                allgatherBytes(mine->data(), all->data(), total, c10::Device(c10::kCPU), op);
                return [this, outputLists, mine, all, total]() mutable {
                  for (int r = 0; r < size_; ++r) {
                    size_t at = total * static_cast<size_t>(r);
                    for (at::Tensor& t : outputLists[static_cast<size_t>(r)]) {
                      at::Tensor c = dense(t);
                      std::memcpy(c.data_ptr(), all->data() + at, c.nbytes());
                      at += c.nbytes();
                      writeBack(c, t);
                    }
                  }
                };
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::GatherOptions& opts) {
  at::Tensor in = single("gather", inputs);
  checkRoot("gather", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs = rootList("gather", "output", outputs, in, size_, rank_, root);
  OpInfo op = info("gather", in);
  op.inputs = {in};
  return post(c10d::OpType::GATHER, op, outs, in.device(), [this, in, outs, root, op]() -> Finish {
    at::Tensor src = dense(in);
    at::Tensor all = rank_ == root ? src.new_empty({size_, src.numel()}) : at::Tensor();
    collComm_t comm = commOf(src.device());
    check(collGather(src.data_ptr(), all.defined() ? all.data_ptr() : nullptr, src.nbytes(), collUint8, root, comm,
                     nullptr),
          op, comm);
    return [src, all, outs]() mutable {
      for (size_t r = 0; r < outs.size(); ++r) outs[r].copy_(all[static_cast<int64_t>(r)].view(outs[r].sizes()));
    };
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ScatterOptions& opts) {
  at::Tensor out = single("scatter", outputs);
  checkRoot("scatter", opts.rootRank, size_);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ins = rootList("scatter", "input", inputs, out, size_, rank_, root);
  OpInfo op = info("scatter", out);
  op.inputs = ins;
  return post(c10d::OpType::SCATTER, op, {out}, out.device(), [this, out, ins, root, op]() -> Finish {
    at::Tensor dst = dense(out);
    at::Tensor all;
    if (!ins.empty()) {
      std::vector<at::Tensor> flat;
      for (const at::Tensor& t : ins) flat.push_back(t.reshape({-1}));
      all = at::cat(flat);
    }
    collComm_t comm = commOf(dst.device());
    check(collScatter(all.defined() ? all.data_ptr() : nullptr, dst.data_ptr(), dst.nbytes(), collUint8, root, comm,
                      nullptr),
          op, comm);
    return [out, dst, all]() mutable { writeBack(dst, out); };
  });
}

// Sends sendBytes[p] from sendPtr[p] to every rank p and receives recvBytes[p] into
// recvPtr[p], in one group (the rank's own block is a copy).
void ProcessGroupCollectives::exchange(const std::vector<const char*>& sendPtr, const std::vector<size_t>& sendBytes,
                                       const std::vector<char*>& recvPtr, const std::vector<size_t>& recvBytes,
                                       c10::Device device, const OpInfo& op) {
  if (recvBytes[rank_]) {  // the own block: a copy (on the device of the buffers)
    auto bytes = at::TensorOptions().dtype(at::kByte).device(device);
    const auto n = static_cast<int64_t>(recvBytes[rank_]);
    at::from_blob(recvPtr[rank_], {n}, bytes).copy_(at::from_blob(const_cast<char*>(sendPtr[rank_]), {n}, bytes));
  }
  collComm_t comm = commOf(device);
  check(collGroupStart(), op, comm);
  collResult_t first = collSuccess;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    collResult_t r = collSuccess;
    if (sendBytes[p]) r = collSend(sendPtr[p], sendBytes[p], collUint8, p, comm, nullptr);
    if (r == collSuccess && recvBytes[p]) r = collRecv(recvPtr[p], recvBytes[p], collUint8, p, comm, nullptr);
    if (first == collSuccess) first = r;
  }
  collResult_t end = collGroupEnd();
  check(first != collSuccess ? first : end, op, comm);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                      std::vector<int64_t>& outputSplitSizes,
                                                                      std::vector<int64_t>& inputSplitSizes,
                                                                      const c10d::AllToAllOptions&) {
  checkTensor("all_to_all_single", output);
  checkTensor("all_to_all_single", input);
  TORCH_CHECK(input.device() == output.device(), "torch_collectives: all_to_all_single: input on ",
              input.device().str(), ", output on ", output.device().str());
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "torch_collectives: all_to_all_single: input is ",
              shapeOf(input), ", output ", shapeOf(output), ": the dtypes differ");
  const int64_t inRows = input.dim() ? input.size(0) : 1, outRows = output.dim() ? output.size(0) : 1;
  auto splits = [&](std::vector<int64_t> s, int64_t rows, const char* which) {
    if (s.empty()) {
      TORCH_CHECK(rows % size_ == 0, "torch_collectives: all_to_all_single: ", which, " has ", rows,
                  " rows, not a multiple of the group size ", size_, " (pass split sizes)");
      return evenSplits(rows, size_);
    }
    TORCH_CHECK(s.size() == static_cast<size_t>(size_), "torch_collectives: all_to_all_single: ", which,
                " split sizes have ", s.size(), " entries for ", size_, " ranks");
    int64_t sum = 0;
    for (int64_t v : s) {
      TORCH_CHECK(v >= 0, "torch_collectives: all_to_all_single: ", which, " split size ", v, " is negative");
      sum += v;
    }
    TORCH_CHECK(sum == rows, "torch_collectives: all_to_all_single: ", which, " split sizes sum to ", sum, ", not its ",
                rows, " rows");
    return s;
  };
  std::vector<int64_t> inSplit = splits(inputSplitSizes, inRows, "input");
  std::vector<int64_t> outSplit = splits(outputSplitSizes, outRows, "output");
  OpInfo op = info("all_to_all_single", input);
  op.inputs = {input};
  at::Tensor out = output, in = input;
  return post(c10d::OpType::ALLTOALL_BASE, op, {out}, in.device(),
              [this, out, in, inSplit, outSplit, inRows, outRows, op]() -> Finish {
                at::Tensor src = dense(in), dst = dense(out);
                if (src.data_ptr() == dst.data_ptr()) src = src.clone();  // in place: keep the input whole
                const size_t inRow = inRows ? src.nbytes() / static_cast<size_t>(inRows) : 0;
                const size_t outRow = outRows ? dst.nbytes() / static_cast<size_t>(outRows) : 0;
                std::vector<const char*> sp(size_);
                std::vector<char*> rp(size_);
                std::vector<size_t> sb(size_), rb(size_);
                size_t so = 0, ro = 0;
                for (int p = 0; p < size_; ++p) {
                  sp[p] = static_cast<const char*>(src.data_ptr()) + so;
                  rp[p] = static_cast<char*>(dst.data_ptr()) + ro;
                  sb[p] = static_cast<size_t>(inSplit[p]) * inRow;
                  rb[p] = static_cast<size_t>(outSplit[p]) * outRow;
                  so += sb[p];
                  ro += rb[p];
                }
                exchange(sp, sb, rp, rb, dst.device(), op);
                return [out, src, dst]() mutable { writeBack(dst, out); };
              });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::alltoall(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllToAllOptions&) {
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
              "torch_collectives: all_to_all takes ", size_, " input and ", size_, " output tensors, got ",
              inputs.size(), " and ", outputs.size());
  for (int p = 0; p < size_; ++p) {
    checkTensor("all_to_all", inputs[p]);
    checkTensor("all_to_all", outputs[p]);
    TORCH_CHECK(inputs[p].device() == inputs[0].device() && outputs[p].device() == inputs[0].device(),
                "torch_collectives: all_to_all: input ", p, " is on ", inputs[p].device().str(), " and output ", p,
                " on ", outputs[p].device().str(), ", input 0 on ", inputs[0].device().str(), "; one device per call");
    TORCH_CHECK(inputs[p].scalar_type() == inputs[0].scalar_type() &&
                    outputs[p].scalar_type() == inputs[0].scalar_type(),
                "torch_collectives: all_to_all: every tensor must have one dtype");
  }
  OpInfo op = info("all_to_all", inputs[0]);
  op.inputs = inputs;
  return post(c10d::OpType::ALLTOALL, op, outputs, deviceOf(inputs), [this, outputs, inputs, op]() -> Finish {
    std::vector<at::Tensor> src(size_), dst(size_);
    std::vector<const char*> sp(size_);
    std::vector<char*> rp(size_);
    std::vector<size_t> sb(size_), rb(size_);
    for (int p = 0; p < size_; ++p) {
      src[p] = dense(inputs[p]);
      dst[p] = dense(outputs[p]);
      sp[p] = static_cast<const char*>(src[p].data_ptr());
      rp[p] = static_cast<char*>(dst[p].data_ptr());
      sb[p] = src[p].nbytes();
      rb[p] = dst[p].nbytes();
    }
    exchange(sp, sb, rp, rb, deviceOf(dst), op);
    return [this, outputs, src, dst]() mutable {
      for (int p = 0; p < size_; ++p) writeBack(dst[p], outputs[p]);
    };
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollectives::barrier(const c10d::BarrierOptions&) {
  OpInfo op = info("barrier", "no data");
  return post(c10d::OpType::BARRIER, op, {}, c10::Device(c10::kCPU), [this, op]() -> Finish {
    auto token = std::make_shared<uint8_t>(0);
    check(collAllReduce(token.get(), token.get(), 1, collUint8, collMax, comm_, nullptr), op, comm_);
    return [token] {};
  });
}

// Rank 0 waits for every other rank's arrival key; the others wait for rank 0's release.
// Keys are numbered by this group's monitored barriers, the same count on every rank.
void ProcessGroupCollectives::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  checkOpen("monitored_barrier");
  const auto limit = opts.timeout.count() >= 0 ? opts.timeout : options_->timeout;  // unset: negative
  const double limitS = static_cast<double>(limit.count()) / 1000.0;
  const std::string base = keyPrefix_ + "monitored_barrier/" + std::to_string(monitoredBarriers_++) + "/";
  if (rank_ != 0) {
    store_->set(base + std::to_string(rank_), std::vector<uint8_t>{1});
    awaitKey(base + "release", limitS);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) {
    const std::string key = base + std::to_string(r);
    while (!store_->check({key}) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (store_->check({key})) continue;
    missing.push_back(r);
    if (!waitAllRanks) break;
  }
  if (missing.empty()) {
    store_->set(base + "release", std::vector<uint8_t>{1});
    return;
  }
  std::ostringstream s;
  s << "Rank 0 timed out in monitoredBarrier after " << limit.count()
    << " ms: " << (missing.size() == 1 ? "Rank " : "Ranks ");
  for (size_t i = 0; i < missing.size(); ++i) s << (i ? ", " : "") << missing[i];
  s << " failed to pass monitoredBarrier in " << limit.count() << " ms";
  TORCH_CHECK(false, "torch_collectives: ", s.str());
}

}  // namespace torch_collectives

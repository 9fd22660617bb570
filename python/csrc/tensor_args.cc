// The backend's checks of its arguments and the helpers its operations share
// (tensor_args.h).
#include "tensor_args.h"

#include <algorithm>
#include <sstream>

#include "collectives/collectives.h"
#include "lowering.h"

namespace torch_collectives {

// The bytes of each tensor of ts, as part `part`.
void addSpans(const std::vector<at::Tensor>& ts, size_t part, std::vector<Span>& out) {
  for (const at::Tensor& t : ts) {
    if (t.numel() == 0) continue;
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    const auto begin = reinterpret_cast<uintptr_t>(t.const_data_ptr());
    out.push_back({begin, begin + static_cast<uintptr_t>((last + 1) * t.element_size()), part});
  }
}

// Each tensor a part of its own; with `with`, the tensor of the same index in its part.
std::vector<Span> spansOfEach(const std::vector<at::Tensor>& ts, const std::vector<at::Tensor>& with) {
  std::vector<Span> spans;
  for (size_t i = 0; i < ts.size(); ++i) {
    addSpans({ts[i]}, i, spans);
    if (i < with.size()) addSpans({with[i]}, i, spans);
  }
  return spans;
}

std::string shapeOf(const at::Tensor& t) {
  std::ostringstream s;
  s << dtypeName(t.scalar_type()) << t.sizes();
  return s.str();
}

// A dense tensor on the CPU, or on a CUDA device when the library has CUDA.
void checkTensor(const char* op, const at::Tensor& t) {
  TORCH_CHECK(t.layout() == at::kStrided, "torch_collectives: ", op, ": only dense (strided) tensors, got layout ",
              t.layout());
  if (t.device().is_cpu()) return;
  TORCH_CHECK(t.device().is_cuda(), "torch_collectives: ", op, ": tensor on ", t.device().str(),
              "; CPU and CUDA tensors only");
  int gpus = 0;
  TORCH_CHECK(collCudaDeviceCount(&gpus) == collSuccess && gpus > 0, "torch_collectives: ", op, ": tensor on ",
              t.device().str(), " but the Collectives library was built without CUDA or sees no GPU (",
              collGetLastError(nullptr), ")");
}

c10::Device deviceOf(const std::vector<at::Tensor>& ts) { return ts.empty() ? c10::Device(c10::kCPU) : ts[0].device(); }

const at::Tensor& single(const char* op, const std::vector<at::Tensor>& ts) {
  TORCH_CHECK(ts.size() == 1, "torch_collectives: ", op, " takes one tensor per process, got ", ts.size());
  checkTensor(op, ts[0]);
  return ts[0];
}

void checkSameAs(const char* op, const char* what, const at::Tensor& t, const at::Tensor& like) {
  checkTensor(op, t);
  TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel() && t.device() == like.device(),
              "torch_collectives: ", op, ": ", "an ", what, " is ", shapeOf(t), " on ", t.device().str(), ", expected ",
              like.numel(), " elements of ", dtypeName(like.scalar_type()), " on ", like.device().str());
}

void checkRoot(const char* op, int64_t root, int size) {
  TORCH_CHECK(root >= 0 && root < size, "torch_collectives: ", op, ": root ", root, " is not a rank of this group (0..",
              size - 1, ")");
}

// A contiguous tensor of t's values (t itself when it already is), and the write back.
at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
void writeBack(const at::Tensor& buf, at::Tensor& t) {
  if (!buf.is_same(t)) t.copy_(buf);
}

// Whether tensors of two different parts (the operations of a block, the tensors of a
// coalesced list) share bytes; a tensor's bytes run from its first element to its last
// (torch's strides are never negative).
bool partsOverlap(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  uintptr_t end = 0;
  size_t owner = 0;
  for (const Span& s : spans) {
    if (s.begin < end && s.part != owner) return true;
    if (s.end > end) {
      end = s.end;
      owner = s.part;
    }
  }
  return false;
}

// The one list of `size` tensors shaped like `like` that op takes (what: "output").
std::vector<at::Tensor> rankList(const char* op, const char* what, const std::vector<std::vector<at::Tensor>>& lists,
                                 const at::Tensor& like, int size) {
  TORCH_CHECK(lists.size() == 1 && lists[0].size() == static_cast<size_t>(size), "torch_collectives: ", op,
              " takes one ", "list of ", size, " ", what, " tensors");
  for (const at::Tensor& t : lists[0]) checkSameAs(op, what, t, like);
  return lists[0];
}

// rankList on the root of gather or scatter; elsewhere nothing, and a list is an error.
std::vector<at::Tensor> rootList(const char* op, const char* what, const std::vector<std::vector<at::Tensor>>& lists,
                                 const at::Tensor& like, int size, int rank, int root) {
  if (rank == root) return rankList(op, what, lists, like, size);
  TORCH_CHECK(lists.empty() || lists[0].empty(), "torch_collectives: ", op, ": only the root (rank ", root, ") passes ",
              what, " tensors");
  return {};
}

// The tensor pair of the *_tensor ops: `whole` holds size x part.numel() elements of
// part's dtype, on part's device (wholeName: "input" or "output").
void checkWhole(const char* op, const char* wholeName, const at::Tensor& whole, const at::Tensor& part, int size) {
  checkTensor(op, whole);
  checkTensor(op, part);
  TORCH_CHECK(whole.device() == part.device(), "torch_collectives: ", op, ": input and output are on ",
              whole.device().str(), " and ", part.device().str());
  TORCH_CHECK(whole.scalar_type() == part.scalar_type() && whole.numel() == part.numel() * size,
              "torch_collectives: ", op, ": ", wholeName, " is ", shapeOf(whole), ", expected ", size, " x ",
              part.numel(), " elements of ", dtypeName(part.scalar_type()));
}

std::vector<int64_t> evenSplits(int64_t rows, int size) {
  return std::vector<int64_t>(static_cast<size_t>(size), rows / size);
}

}  // namespace torch_collectives

// The backend's checks of its arguments (each failure a RuntimeError naming the
// operation, the argument and its value) and the tensor helpers its operations share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace torch_collectives {

std::string shapeOf(const at::Tensor& t);  // "float32[4, 4]"

// A dense tensor on the CPU, or on a CUDA device when the library has CUDA.
void checkTensor(const char* op, const at::Tensor& t);
// The one tensor per process of op (checked).
const at::Tensor& single(const char* op, const std::vector<at::Tensor>& ts);
// t has like's dtype, element count and device (what: "output", "input").
void checkSameAs(const char* op, const char* what, const at::Tensor& t, const at::Tensor& like);
void checkRoot(const char* op, int64_t root, int size);
// The one list of `size` tensors shaped like `like` that op takes (what: "output").
std::vector<at::Tensor> rankList(const char* op, const char* what, const std::vector<std::vector<at::Tensor>>& lists,
                                 const at::Tensor& like, int size);
// rankList on the root of gather or scatter; elsewhere nothing, and a list is an error.
std::vector<at::Tensor> rootList(const char* op, const char* what, const std::vector<std::vector<at::Tensor>>& lists,
                                 const at::Tensor& like, int size, int rank, int root);
// The tensor pair of the *_tensor ops: `whole` holds size x part.numel() elements of
// part's dtype, on part's device (wholeName: "input" or "output").
void checkWhole(const char* op, const char* wholeName, const at::Tensor& whole, const at::Tensor& part, int size);

c10::Device deviceOf(const std::vector<at::Tensor>& ts);  // the first's (CPU for none)
std::vector<int64_t> evenSplits(int64_t rows, int size);
// A contiguous tensor of t's values (t itself when it already is), and the write back.
at::Tensor dense(const at::Tensor& t);
void writeBack(const at::Tensor& buf, at::Tensor& t);

// The bytes [begin, end) of a tensor of part `part` of a batch: an operation of a
// coalesced block, a tensor (with its pair) of a coalesced list.
struct Span {
  uintptr_t begin, end;
  size_t part;
};
void addSpans(const std::vector<at::Tensor>& ts, size_t part, std::vector<Span>& out);
// Each tensor a part of its own; with `with`, the tensor of the same index in its part.
std::vector<Span> spansOfEach(const std::vector<at::Tensor>& ts, const std::vector<at::Tensor>& with = {});
// Whether tensors of two different parts share bytes; a tensor's bytes run from its first
// element to its last (torch's strides are never negative).
bool partsOverlap(std::vector<Span> spans);

}  // namespace torch_collectives

// Zero-copy torch::Tensor <-> DLPack.
//
// Both directions share memory: a DLPack view of a tensor points at the tensor's elements, a
// tensor made from a DLTensor points at the DLTensor's. Neither copies or moves an element.
// Supported dtypes: float32, float64, float16, bfloat16, bool, uint8, int8, int16, int32, int64
// (one lane). Devices: those backplane::torch::dlpack_device() maps (device.hpp).
#pragma once

#include <dlpack/dlpack.h>

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace backplane::torch {

// at::kFloat -> {kDLFloat, 32, 1}, at::kBool -> {kDLBool, 8, 1} (DLPack 0.8's code 6), ...
// Throws InvalidArgument naming the dtype and the supported ones.
DLDataType dlpack_dtype(at::ScalarType type);
// The reverse; also throws InvalidArgument, naming the DLPack dtype.
at::ScalarType torch_dtype(DLDataType type);
// "float32", "bfloat16", "bool", "int8", ..., or "code 5, 64 bits, 1 lanes" when unnamed.
std::string dtype_name(DLDataType type);
// The torch name of a LibTorch dtype, as Python prints it without "torch.": at::kFloat is
// "float32", at::kInt "int32", at::kComplexFloat "complex64". Every message of the bridge names
// dtypes this way.
std::string dtype_name(at::ScalarType type);

// A DLTensor that views a tensor's memory: data is the tensor's data pointer (its storage offset
// included, byte_offset 0), shape and strides (in elements) are copies held here, so later
// changes to the tensor's metadata do not reach the view. The view holds a reference to the
// tensor, so the memory stays alive as long as the view does. Dense (strided) tensors only.
class DLTensorView {
 public:
  // Throws InvalidArgument for an undefined, sparse, conjugated or negated tensor, or an
  // unsupported dtype or device; `name` ("query") leads the message.
  explicit DLTensorView(const at::Tensor& tensor, const char* name = "tensor");
  DLTensorView(DLTensorView&&) noexcept = default;
  DLTensorView& operator=(DLTensorView&&) noexcept = default;
  DLTensorView(const DLTensorView&) = delete;
  DLTensorView& operator=(const DLTensorView&) = delete;

  const DLTensor& dl() const noexcept { return dl_; }
  const DLTensor* get() const noexcept { return &dl_; }
  const at::Tensor& tensor() const noexcept { return tensor_; }

 private:
  at::Tensor tensor_;          // keeps the memory alive
  std::vector<int64_t> dims_;  // shape, then strides; moves keep the buffer dl_ points into
  DLTensor dl_{};
};

// A DLManagedTensor that owns a reference to `tensor` (the same view as DLTensorView), for
// consumers that take ownership; its deleter drops the reference and frees the struct.
DLManagedTensor* to_dlpack(const at::Tensor& tensor);

// A tensor over `managed`'s memory that takes ownership of it: managed->deleter runs once, when
// the tensor's storage is freed (after the last tensor sharing it). On error (a dtype or device
// this bridge does not map, negative sizes or strides) nothing is taken: the caller still owns
// `managed`.
at::Tensor from_dlpack(DLManagedTensor* managed);

// A tensor over memory the caller keeps alive: `on_release` (optional) runs once when the
// tensor's storage is freed, so a caller can drop its own reference then. On error it never runs.
at::Tensor from_dlpack(const DLTensor& tensor, std::function<void()> on_release = {});

}  // namespace backplane::torch

// Test helper: a DLTensor view of a LibTorch CPU tensor (no copy; the tensor must outlive it).
#pragma once

#include <ATen/core/Tensor.h>
#include <dlpack/dlpack.h>

namespace backplane::testing {

class TorchView {
 public:
  // An undefined tensor gives a view with no data (for optional arguments left out).
  explicit TorchView(const at::Tensor& t) : t_(t) {
    if (!t_.defined()) return;
    dl_.data = t_.data_ptr();
    dl_.device = {kDLCPU, 0};
    dl_.ndim = static_cast<int32_t>(t_.dim());
    dl_.dtype = {t_.scalar_type() == at::kBFloat16 ? static_cast<uint8_t>(kDLBfloat)
                                                   : static_cast<uint8_t>(kDLFloat),
                 static_cast<uint8_t>(t_.element_size() * 8), 1};
    dl_.shape = const_cast<int64_t*>(t_.sizes().data());
    dl_.strides = const_cast<int64_t*>(t_.strides().data());
    dl_.byte_offset = 0;
  }
  const DLTensor* dl() const { return &dl_; }
  operator const DLTensor*() const { return &dl_; }

 private:
  at::Tensor t_;
  DLTensor dl_{};
};

}  // namespace backplane::testing

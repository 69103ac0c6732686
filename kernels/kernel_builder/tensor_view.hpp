// What the kernel-builder extensions (<name>_ops.cpp) share: at::Tensor arguments as DLTensor
// views for the layer kernels, and their Status as a c10::Error (Python's RuntimeError).
//
// Header only and small on purpose: each extension is one LibTorch translation unit, and
// linking the LibTorch bridge (backplane::torch) would pull the kernel hub in with it.
#pragma once

#include <dlpack/dlpack.h>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"

#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace backplane::kernel_builder {

// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;

// The DLPack dtype of a LibTorch one. Every real dtype maps, so that the kernel's own check
// names a float64 or int32 argument and the dtypes it takes; the rest are refused here.
inline DLDataType dlpack_dtype(const at::Tensor& t, const char* op, const char* name) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return {kDLFloat, 32, 1};
    case at::kBFloat16:
      return {kDLBfloat, 16, 1};
    case at::kHalf:
      return {kDLFloat, 16, 1};
    case at::kDouble:
      return {kDLFloat, 64, 1};
    case at::kByte:
      return {kDLUInt, 8, 1};
    case at::kChar:
      return {kDLInt, 8, 1};
    case at::kShort:
      return {kDLInt, 16, 1};
    case at::kInt:
      return {kDLInt, 32, 1};
    case at::kLong:
      return {kDLInt, 64, 1};
    case at::kBool:
      return {kDLBoolCode, 8, 1};
    default:
      break;
  }
  TORCH_CHECK(false, op, ": ", name, " has dtype ", t.scalar_type(),
              "; supported: float32, bfloat16, float16");
}

// Where an op's implementation runs: the dispatch key it is registered for.
enum class Where { kCpu, kCuda };

// A DLTensor over `t`'s elements (storage offset included, byte_offset 0) for the duration of
// one op call: shape and strides are copies held here, the tensor itself is the caller's.
// `writable` asks LibTorch for a mutable pointer (it materializes a lazily cloned tensor).
class TensorView {
 public:
  TensorView(const at::Tensor& t, const char* op, const char* name, Where where,
             bool writable = false) {
    TORCH_CHECK(t.defined(), op, ": ", name, " is an undefined tensor");
    TORCH_CHECK(t.layout() == at::kStrided, op, ": ", name, " has layout ", t.layout(),
                "; expected a strided (dense) tensor");
    if (where == Where::kCpu) {
      TORCH_CHECK(t.device().is_cpu(), op, ": ", name, " is on ", t.device(),
                  "; the cpu kernel takes host (cpu) tensors");
      dl_.device = {kDLCPU, 0};
    } else {
      TORCH_CHECK(t.device().is_cuda(), op, ": ", name, " is on ", t.device(),
                  "; the cuda kernel takes cuda tensors");
      dl_.device = {kDLCUDA, t.device().index()};
    }
    TORCH_CHECK(!t.is_neg() && !t.is_conj(), op, ": ", name,
                " has its negative or conjugate bit set; call resolve_neg()/resolve_conj()");
    dl_.dtype = dlpack_dtype(t, op, name);
    const auto ndim = static_cast<size_t>(t.dim());
    dims_.resize(2 * ndim);
    for (size_t i = 0; i < ndim; ++i) {
      dims_[i] = t.sizes()[i];
      dims_[ndim + i] = t.strides()[i];
    }
    dl_.data = writable ? t.mutable_data_ptr() : const_cast<void*>(t.const_data_ptr());
    dl_.ndim = static_cast<int32_t>(ndim);
    dl_.shape = dims_.data();
    dl_.strides = dims_.data() + ndim;
    dl_.byte_offset = 0;
  }
  TensorView(const TensorView&) = delete;
  TensorView& operator=(const TensorView&) = delete;

  const DLTensor* get() const noexcept { return &dl_; }

 private:
  std::vector<int64_t> dims_;  // shape, then strides
  DLTensor dl_{};
};

// A kernel's Status as a c10::Error: "<op>: <argument> ..." (the kernel's message names the
// argument; it is prefixed with `op` unless it already starts with it).
inline void check(const kernels::Status& status, const char* op) {
  if (status.ok()) return;
  const std::string prefix = std::string(op) + ": ";
  if (status.message.compare(0, prefix.size(), prefix) == 0) {
    TORCH_CHECK(false, status.message);
  }
  TORCH_CHECK(false, prefix, status.message);
}

#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
// Runs `launch(stream)` with `t`'s GPU current and LibTorch's current stream of that GPU (a
// cudaStream_t as void*), as LibTorch's own kernels queue their work.
template <class Launch>
kernels::Status on_current_stream(const at::Tensor& t, Launch&& launch) {
  const c10::cuda::CUDAGuard guard(t.device());
  return launch(static_cast<void*>(c10::cuda::getCurrentCUDAStream(t.device().index()).stream()));
}
#endif

}  // namespace backplane::kernel_builder

// TORCH_LIBRARY pastes and stringifies its namespace argument, so a macro naming it
// (BACKPLANE_OPS_ID, set by the build) needs one expansion first.
#define BACKPLANE_TORCH_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define BACKPLANE_TORCH_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

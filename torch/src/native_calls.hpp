// The plugin-ABI calls of this project's layer kernels (hub::PackageKernel function pointers)
// over LibTorch tensors, forward and backward, shared by the layers (layers.cpp) and their
// autograd functions (layer_autograd.cpp). Each throws InvalidArgument naming the layer with
// the kernel's message when the kernel refuses the call. The tensors' last dims must be
// contiguous (the callers make them so).
#pragma once

#include <backplane/hub/package.hpp>

#include <ATen/core/Tensor.h>

#include <string>

namespace backplane::torch::detail {

// The kernel's status as an exception naming the layer; nothing for success.
void check(bp_status* status, const std::string& layer);

// The kernels need the last dim contiguous; other strides pass as they are.
at::Tensor last_dim_contiguous(const at::Tensor& t);

// rms_norm, with the fused residual add when `residual` is given.
void call_rms_norm(const hub::PackageKernel& kernel, const at::Tensor& input,
                   const at::Tensor& weight, const at::Tensor* residual, double eps,
                   at::Tensor& out, const std::string& layer);
void call_rms_norm_backward(const hub::PackageKernel& kernel, const at::Tensor& grad_output,
                            const at::Tensor& input, const at::Tensor& weight, double eps,
                            at::Tensor& grad_input, at::Tensor& grad_weight,
                            const std::string& layer);

// silu_and_mul, gelu_and_mul, gelu_tanh_and_mul and their backward ops.
void call_gated(const hub::PackageKernel& kernel, const at::Tensor& input, at::Tensor& out,
                const std::string& layer);
void call_gated_backward(const hub::PackageKernel& kernel, const at::Tensor& grad_output,
                         const at::Tensor& input, at::Tensor& grad_input, const std::string& layer);

// rotary_embedding or rotary_embedding_backward (one signature): q and k (NULL: none) in place.
void call_rotary(const hub::PackageKernel& kernel, at::Tensor& q, at::Tensor* k,
                 const at::Tensor& cos, const at::Tensor& sin, bool interleaved,
                 const std::string& layer);

}  // namespace backplane::torch::detail

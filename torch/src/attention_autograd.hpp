// Attention under autograd: a torch::autograd::Function whose forward runs the resolved
// attention_forward kernel with a logsumexp and whose backward runs the same plugin's
// attention_backward, saving q, k, v, the mask, the output and the logsumexp. It keeps a copy of
// the kernel (and so the plugin) until the backward has run.
#pragma once

#include <backplane/runtime/kernels.hpp>

#include <ATen/core/Tensor.h>

#include <optional>

namespace backplane::torch::detail {

// `kernel` has a backward (has_backward()). `stream`: the device's current stream.
at::Tensor attention_with_grad(const AttentionKernel& kernel, const at::Tensor& q,
                               const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& mask, bool causal,
                               std::optional<double> scale, void* stream);

// Attention from LibTorch's ops with the kernels' semantics (grouped-query heads, bool or
// additive mask, bottom-right causal limit), differentiable by LibTorch: for calls that need
// gradients from a kernel without a backward. Plain ops, so that every LibTorch the bridge
// builds against has them. Rows that see no key come out NaN (softmax of -inf), where the
// kernels give zeros.
at::Tensor composite_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& mask, bool causal,
                               std::optional<double> scale);

}  // namespace backplane::torch::detail

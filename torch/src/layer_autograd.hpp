// The layers' kernels under autograd (training mode): torch::autograd::Functions whose forward
// runs the bound forward kernel and whose backward runs the package's backward kernel, saving
// only what that backward reads (RMSNorm: x and the weight; the gated activations: x; rotary:
// cos and sin;). Each keeps a copy
// of its kernels, so the library stays loaded and a later mode switch cannot pull them away
// before the backward runs.
#pragma once

#include <backplane/hub/use_kernels.hpp>

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace backplane::torch::detail {

// `bound` has a backward (bound.backward.function), as for every call below.
at::Tensor rms_norm_with_grad(const hub::BoundLayerKernel& bound, const at::Tensor& x,
                              const at::Tensor& weight, double eps, const std::string& layer);
at::Tensor gated_with_grad(const hub::BoundLayerKernel& bound, const at::Tensor& x,
                           const std::vector<int64_t>& out_shape, const std::string& layer);
// Rotates q and k in place (marked dirty for autograd) and returns them.
std::pair<at::Tensor, at::Tensor> rotary_with_grad(const hub::BoundLayerKernel& bound,
                                                   at::Tensor& q, at::Tensor& k,
                                                   const at::Tensor& cos, const at::Tensor& sin,
                                                   bool interleaved, const std::string& layer);

}  // namespace backplane::torch::detail

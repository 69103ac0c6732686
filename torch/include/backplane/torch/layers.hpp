// Model layers for LibTorch programs whose forward runs the Hub kernel use_kernels bound to
// them, and the plain LibTorch composite otherwise: the C++ counterpart of transformers' layers
// decorated with use_kernel_forward_from_hub.
//
//   auto kernels = std::make_shared<backplane::hub::LayerKernels>(
//       backplane::hub::LayerKernels::use_kernels(runtime, device, store));
//   backplane::torch::RMSNorm norm(weight, 1e-6, kernels);
//   at::Tensor y = norm(x);             // the RMSNorm kernel, if one is bound
//   kernels->set_mode(backplane::KernelMode::training());
//   y = norm(x);                        // the training kernel (differentiable), if one is bound
//
// Each layer asks the shared LayerKernels for its kernel on every call (a map lookup), so a mode
// switch reaches every layer at once. A kernel can be one of this project's packages or a
// kernel-builder Torch build from the Kernel Hub (the layer calls its op through the dispatcher:
// extension.hpp). Without LayerKernels (nullptr) a layer is the composite.
// Gradients: in training mode a layer whose package has a backward runs its kernels under
// autograd (a torch::autograd::Function: the forward kernel now, the backward kernel when
// autograd asks). Where no backward is bound (inference mode, a package without one, a
// kernel-builder build), a call with inputs that require grad says so once and runs the
// composite, so the gradients are always LibTorch's or the kernels'. forward_out refuses such
// inputs (autograd cannot record an out= call).
#pragma once

#include <backplane/hub/use_kernels.hpp>

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

namespace backplane::torch {

using SharedLayerKernels = std::shared_ptr<const hub::LayerKernels>;

// Shared by the layers below: the name under which they look themselves up ("RMSNorm") and
// whether the last call ran a kernel.
class KernelLayer {
 public:
  const std::string& layer_name() const { return name_; }
  // Whether a kernel is bound for this layer in the current mode.
  bool uses_kernel() const;

 protected:
  KernelLayer(std::string name, SharedLayerKernels kernels)
      : name_(std::move(name)), kernels_(std::move(kernels)) {}
  // The bound kernel, or nullptr (composite) when none is bound or the input is not on the
  // LayerKernels' device.
  const hub::BoundLayerKernel* kernel_for(const at::Tensor& input) const;
  // kernel_for's binding when it is this project's format (a function of the plugin ABI)...
  const hub::BoundLayerKernel* native_kernel_for(const at::Tensor& input) const;
  // ...and when it is a kernel-builder Torch build, whose op the layer calls through
  // TorchExtension (extension.hpp). In training mode, a build without the layer's backward op
  // gives nullptr (the composite), with a warning.
  const hub::BoundLayerKernel* torch_kernel_for(const at::Tensor& input) const;
  // For a call autograd records (grad mode on, an input that requires grad): the native binding
  // when it has a backward (training mode); else nullptr, having said once why the layer runs
  // its composite instead (so that the gradients flow).
  const hub::BoundLayerKernel* grad_kernel_for(const at::Tensor& input) const;

 private:
  std::string name_;
  SharedLayerKernels kernels_;
};

// transformers' LlamaRMSNorm: x * rsqrt(mean(x^2, -1) + eps) * weight, computed in float32.
class RMSNorm : public KernelLayer {
 public:
  RMSNorm(at::Tensor weight, double eps, SharedLayerKernels kernels = nullptr);
  // The output comes from empty_output (output.hpp) on the kernel path.
  at::Tensor operator()(const at::Tensor& x) const;
  // Into `out`, which must have x's shape, dtype and device and be contiguous (x itself: in
  // place); returns out.
  at::Tensor& forward_out(const at::Tensor& x, at::Tensor& out) const;
  // The fused residual add: residual += x (in place), then returns rms_norm(residual).
  at::Tensor operator()(const at::Tensor& x, at::Tensor& residual) const;

 private:
  at::Tensor composite(const at::Tensor& x) const;
  // Whether a kernel ran: the Torch build's op or the native kernel, from x into out.
  bool run_kernel(const at::Tensor& x, at::Tensor& out) const;
  at::Tensor weight_;
  double eps_;
};

// x [..., 2d] -> act(x[..., :d]) * x[..., d:], act SiLU, GELU (erf) or GELU (tanh).
class GatedActivation : public KernelLayer {
 public:
  enum class Kind { kSilu, kGelu, kGeluTanh };
  GatedActivation(Kind kind, SharedLayerKernels kernels = nullptr);
  // The output comes from empty_output (output.hpp) on the kernel path.
  at::Tensor operator()(const at::Tensor& x) const;
  // Into `out` [..., d] of x's dtype and device, contiguous; returns out.
  at::Tensor& forward_out(const at::Tensor& x, at::Tensor& out) const;

 private:
  at::Tensor composite(const at::Tensor& x) const;
  bool run_kernel(const at::Tensor& x, at::Tensor& out) const;
  Kind kind_;
};
struct SiluAndMul : GatedActivation {
  explicit SiluAndMul(SharedLayerKernels kernels = nullptr)
      : GatedActivation(Kind::kSilu, std::move(kernels)) {}
};
struct GeluAndMul : GatedActivation {
  explicit GeluAndMul(SharedLayerKernels kernels = nullptr)
      : GatedActivation(Kind::kGelu, std::move(kernels)) {}
};
struct GeluTanhAndMul : GatedActivation {
  explicit GeluTanhAndMul(SharedLayerKernels kernels = nullptr)
      : GatedActivation(Kind::kGeluTanh, std::move(kernels)) {}
};

// Rotary position embedding, in place on q [batch, heads_q, seq, head_dim] and k [batch,
// heads_k, seq, head_dim]. cos and sin are [seq, rotary_dim / 2] (cos(position * inv_freq),
// not repeated); neox style rotates halves (transformers' apply_rotary_pos_emb), interleaved
// rotates pairs (GPT-J).
class RotaryEmbedding : public KernelLayer {
 public:
  explicit RotaryEmbedding(bool interleaved = false, SharedLayerKernels kernels = nullptr);
  void operator()(at::Tensor& q, at::Tensor& k, const at::Tensor& cos, const at::Tensor& sin) const;

  // cos and sin tables [seq, rotary_dim / 2] in float32 for positions 0..seq-1.
  static std::pair<at::Tensor, at::Tensor> tables(int64_t seq, int64_t rotary_dim,
                                                  double base = 10000.0);

 private:
  bool interleaved_;
};

}  // namespace backplane::torch

#include <backplane/error.hpp>
#include <backplane/torch/device.hpp>
#include <backplane/torch/dlpack.hpp>
#include <backplane/torch/extension.hpp>
#include <backplane/torch/layers.hpp>
#include <backplane/torch/output.hpp>
#include <backplane/warnings.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "layer_autograd.hpp"
#include "native_calls.hpp"

#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

namespace backplane::torch {
namespace {

using detail::check;
using detail::last_dim_contiguous;

// Whether autograd records this call: grad mode on and some input requires grad.
bool records_grad(std::initializer_list<const at::Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

// out= calls write into the caller's tensor, which autograd cannot record (nor does LibTorch).
void refuse_out_with_grad(const std::initializer_list<const at::Tensor*> inputs,
                          const std::string& layer) {
  if (records_grad(inputs)) {
    throw InvalidArgument(layer +
                          ": forward_out writes into out, which autograd cannot record, "
                          "and an input requires grad; call the layer (operator()) instead");
  }
}

// An out= tensor the kernels can write: the layer's output shape, x's dtype and device, and
// contiguous (the kernels write whole rows); x itself only where the kernel works in place.
void check_out(const at::Tensor& out, at::IntArrayRef shape, const at::Tensor& x,
               const std::string& layer, bool in_place_allowed) {
  const auto refuse = [&](const std::string& what) {
    throw InvalidArgument(layer + ": out " + what);
  };
  if (!out.defined()) refuse("is an undefined tensor; pass a tensor of shape " + c10::str(shape));
  if (out.sizes() != shape) {
    refuse("has shape " + c10::str(out.sizes()) + ", expected " + c10::str(shape));
  }
  if (out.scalar_type() != x.scalar_type()) {
    refuse("is " + std::string(c10::toString(out.scalar_type())) + ", expected x's dtype " +
           c10::toString(x.scalar_type()));
  }
  if (out.device() != x.device()) {
    refuse("is on " + out.device().str() + ", expected x's device " + x.device().str());
  }
  if (!out.is_contiguous()) refuse("must be contiguous (the kernels write whole rows)");
  if (!in_place_allowed && out.numel() > 0 && x.numel() > 0 && out.data_ptr() == x.data_ptr()) {
    refuse("is x itself; in place is not supported, pass another tensor");
  }
}

// A kernel-builder binding's extension, opened on first use (its digest checked again, now that
// LibTorch is there to open it), and whether it has the layer's backward op; both found by the
// folder and op on every later call.
struct OpenedLayer {
  std::shared_ptr<const TorchExtension> extension;
  bool has_backward = false;
};

const OpenedLayer& opened_layer(const hub::BoundLayerKernel& bound) {
  static std::mutex mutex;
  static auto* opened = new std::map<std::string, OpenedLayer>();  // lives to the end
  const std::string key = bound.torch_extension.string() + '\n' + bound.torch_layer->op;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened->find(key); it != opened->end()) return it->second;
  ExtensionLoadOptions options;
  options.link_root = bound.torch_link_root;
  OpenedLayer layer;
  layer.extension = TorchExtension::load(bound.torch_extension, options);
  if (!layer.extension->has_op(bound.torch_layer->op)) {
    throw InvalidArgument(bound.layer + ": the kernel-builder build " +
                          bound.torch_extension.string() + " has no op " + bound.torch_layer->op +
                          ", which its layer " + bound.torch_layer->layer + " calls");
  }
  const char* backward = bound.torch_layer->backward_op;
  layer.has_backward = backward != nullptr && layer.extension->has_op(backward);
  return opened->emplace(key, std::move(layer)).first->second;
}

const TorchExtension& extension_of(const hub::BoundLayerKernel& bound) {
  return *opened_layer(bound).extension;
}

}  // namespace

const hub::BoundLayerKernel* KernelLayer::torch_kernel_for(const at::Tensor& input) const {
  const hub::BoundLayerKernel* bound = kernel_for(input);
  if (bound == nullptr || bound->torch_extension.empty()) return nullptr;
  const char* backward = bound->torch_layer->backward_op;
  if (kernels_->mode().is_training() && backward != nullptr && !opened_layer(*bound).has_backward) {
    tell_warning({}, "layer `" + bound->layer + "`: the kernel-builder build " +
                         bound->torch_extension.string() + " has no " + backward +
                         " op, so its kernel has no backward; using the original forward in "
                         "mode " +
                         kernels_->mode().str());
    return nullptr;
  }
  return bound;
}

const hub::BoundLayerKernel* KernelLayer::grad_kernel_for(const at::Tensor& input) const {
  const hub::BoundLayerKernel* bound = kernel_for(input);
  if (bound == nullptr) return nullptr;
  if (bound->torch_extension.empty() && bound->backward.function != nullptr) return bound;
  const KernelMode mode = kernels_->mode();
  const std::string why =
      !bound->torch_extension.empty()
          ? "its kernel-builder build runs without autograd in this bridge"
          : "the kernel bound in mode " + mode.str() + " has no backward" +
                (mode.is_training() ? "" : " (set_mode(training) binds the training kernels)");
  tell_warning({}, "layer `" + name_ + "`: an input requires grad, but " + why +
                       "; running the layer's own composite so that the gradients flow");
  return nullptr;
}

const hub::BoundLayerKernel* KernelLayer::native_kernel_for(const at::Tensor& input) const {
  const hub::BoundLayerKernel* bound = kernel_for(input);
  return bound != nullptr && bound->torch_extension.empty() ? bound : nullptr;
}

bool KernelLayer::uses_kernel() const {
  return kernels_ != nullptr && kernels_->find(name_) != nullptr;
}

const hub::BoundLayerKernel* KernelLayer::kernel_for(const at::Tensor& input) const {
  if (kernels_ == nullptr) return nullptr;
  const hub::BoundLayerKernel* bound = kernels_->find(name_);
  if (bound == nullptr) return nullptr;
  // LibTorch's "cpu" has no index; the kernels' device always has one ("cpu:0").
  const Device on = backplane_device(input.device());
  const Device& bound_to = kernels_->device();
  if (on.type() != bound_to.type() || on.index().value_or(0) != bound_to.index().value_or(0)) {
    return nullptr;
  }
  return bound;
}

RMSNorm::RMSNorm(at::Tensor weight, double eps, SharedLayerKernels kernels)
    : KernelLayer("RMSNorm", std::move(kernels)), weight_(std::move(weight)), eps_(eps) {}

bool RMSNorm::run_kernel(const at::Tensor& x, at::Tensor& out) const {
  if (const hub::BoundLayerKernel* k = torch_kernel_for(x)) {
    extension_of(*k).call(k->torch_layer->op, {out, last_dim_contiguous(x), weight_, eps_});
    return true;
  }
  const hub::BoundLayerKernel* k = native_kernel_for(x);
  if (k == nullptr) return false;
  detail::call_rms_norm(k->kernel, last_dim_contiguous(x), weight_, nullptr, eps_, out,
                        layer_name());
  return true;
}

at::Tensor RMSNorm::composite(const at::Tensor& x) const {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor normed = x32 * at::rsqrt(x32.pow(2).mean(-1, true) + eps_);
  return weight_ * normed.to(x.scalar_type());
}

at::Tensor RMSNorm::operator()(const at::Tensor& x) const {
  if (records_grad({&x, &weight_})) {
    if (const hub::BoundLayerKernel* k = grad_kernel_for(x)) {
      return detail::rms_norm_with_grad(*k, x, weight_, eps_, layer_name());
    }
    return composite(x);
  }
  if (kernel_for(x) == nullptr) return composite(x);
  at::Tensor out = empty_output(x.sizes(), x.options());
  if (!run_kernel(x, out)) return composite(x);  // a training call without a backward op
  return out;
}

at::Tensor& RMSNorm::forward_out(const at::Tensor& x, at::Tensor& out) const {
  refuse_out_with_grad({&x, &weight_}, layer_name());
  check_out(out, x.sizes(), x, layer_name(), /*in_place_allowed=*/true);
  if (!run_kernel(x, out)) out.copy_(composite(x));
  return out;
}

at::Tensor RMSNorm::operator()(const at::Tensor& x, at::Tensor& residual) const {
  // The fused kernel updates residual outside autograd: with gradients, the add stays LibTorch's.
  if (const hub::BoundLayerKernel* k = native_kernel_for(x);
      k != nullptr && residual.stride(-1) == 1 && !records_grad({&x, &residual, &weight_})) {
    const at::Tensor input = last_dim_contiguous(x);
    at::Tensor out = empty_output(input.sizes(), input.options());
    detail::call_rms_norm(k->kernel, input, weight_, &residual, eps_, out, layer_name());
    return out;
  }
  residual.add_(x);
  return (*this)(residual);
}

GatedActivation::GatedActivation(Kind kind, SharedLayerKernels kernels)
    : KernelLayer(kind == Kind::kSilu   ? "SiluAndMul"
                  : kind == Kind::kGelu ? "GeluAndMul"
                                        : "GeluTanhAndMul",
                  std::move(kernels)),
      kind_(kind) {}

namespace {
std::vector<int64_t> gated_output_shape(const at::Tensor& x, const std::string& layer) {
  if (x.dim() == 0 || x.size(-1) % 2 != 0) {
    throw InvalidArgument(layer + ": the last dim of x must be even (2 * d), got shape " +
                          c10::str(x.sizes()));
  }
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() /= 2;
  return shape;
}
}  // namespace

bool GatedActivation::run_kernel(const at::Tensor& x, at::Tensor& out) const {
  if (const hub::BoundLayerKernel* k = torch_kernel_for(x)) {
    extension_of(*k).call(k->torch_layer->op, {out, last_dim_contiguous(x)});
    return true;
  }
  const hub::BoundLayerKernel* k = native_kernel_for(x);
  if (k == nullptr) return false;
  detail::call_gated(k->kernel, last_dim_contiguous(x), out, layer_name());
  return true;
}

at::Tensor GatedActivation::composite(const at::Tensor& x) const {
  const int64_t d = x.size(-1) / 2;
  const at::Tensor gate = x.narrow(-1, 0, d), up = x.narrow(-1, d, d);
  switch (kind_) {
    case Kind::kSilu:
      return at::silu(gate) * up;
    case Kind::kGelu:
      return at::gelu(gate) * up;
    case Kind::kGeluTanh:
      return at::gelu(gate, "tanh") * up;
  }
  return {};
}

at::Tensor GatedActivation::operator()(const at::Tensor& x) const {
  const std::vector<int64_t> shape = gated_output_shape(x, layer_name());
  if (records_grad({&x})) {
    if (const hub::BoundLayerKernel* k = grad_kernel_for(x)) {
      return detail::gated_with_grad(*k, x, shape, layer_name());
    }
    return composite(x);
  }
  if (kernel_for(x) == nullptr) return composite(x);
  at::Tensor out = empty_output(shape, x.options());
  if (!run_kernel(x, out)) return composite(x);
  return out;
}

at::Tensor& GatedActivation::forward_out(const at::Tensor& x, at::Tensor& out) const {
  refuse_out_with_grad({&x}, layer_name());
  check_out(out, gated_output_shape(x, layer_name()), x, layer_name(), false);
  if (!run_kernel(x, out)) out.copy_(composite(x));
  return out;
}

RotaryEmbedding::RotaryEmbedding(bool interleaved, SharedLayerKernels kernels)
    : KernelLayer("RotaryEmbedding", std::move(kernels)), interleaved_(interleaved) {}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::tables(int64_t seq, int64_t rotary_dim,
                                                          double base) {
  const at::Tensor inv_freq =
      at::pow(base, at::arange(0, rotary_dim, 2, at::kFloat) / static_cast<double>(rotary_dim))
          .reciprocal();
  const at::Tensor angles = at::outer(at::arange(seq, at::kFloat), inv_freq);
  return {angles.cos(), angles.sin()};
}

void RotaryEmbedding::operator()(at::Tensor& q, at::Tensor& k, const at::Tensor& cos,
                                 const at::Tensor& sin) const {
  const bool grad = records_grad({&q, &k, &cos, &sin});
  // cos and sin get no gradient from the kernels: tables that require one take the composite.
  if (grad && !cos.requires_grad() && !sin.requires_grad() && q.stride(-1) == 1 &&
      k.stride(-1) == 1) {
    if (const hub::BoundLayerKernel* bound = grad_kernel_for(q)) {
      std::tie(q, k) = detail::rotary_with_grad(*bound, q, k, cos, sin, interleaved_, layer_name());
      return;
    }
  }
  if (!grad && q.stride(-1) == 1 && k.stride(-1) == 1) {
    if (const hub::BoundLayerKernel* bound = torch_kernel_for(q)) {
      extension_of(*bound).call(bound->torch_layer->op, {q, k, cos, sin, interleaved_});
      return;
    }
    if (const hub::BoundLayerKernel* kernel = native_kernel_for(q)) {
      detail::call_rotary(kernel->kernel, q, &k, cos, sin, interleaved_, layer_name());
      return;
    }
  }
  const int64_t half = cos.size(-1), rotary_dim = 2 * half;
  // [seq, half] broadcasts over [batch, heads, seq, .]; [batch, seq, half] needs the heads dim.
  const at::Tensor cos_b = cos.dim() == 3 ? cos.unsqueeze(1) : cos;
  const at::Tensor sin_b = sin.dim() == 3 ? sin.unsqueeze(1) : sin;
  const auto rotate = [&](at::Tensor& x) {
    at::Tensor part = x.narrow(-1, 0, rotary_dim);
    const at::Tensor x32 = part.to(at::kFloat);
    at::Tensor rotated;
    if (interleaved_) {  // pairs (x[2i], x[2i + 1])
      const at::Tensor even = x32.slice(-1, 0, rotary_dim, 2),
                       odd = x32.slice(-1, 1, rotary_dim, 2);
      const at::Tensor c = cos_b.to(at::kFloat), s = sin_b.to(at::kFloat);
      rotated = at::stack({even * c - odd * s, odd * c + even * s}, -1).flatten(-2);
    } else {  // halves, as transformers' rotate_half
      const at::Tensor c = at::cat({cos_b, cos_b}, -1).to(at::kFloat);
      const at::Tensor s = at::cat({sin_b, sin_b}, -1).to(at::kFloat);
      const at::Tensor rotate_half =
          at::cat({-x32.narrow(-1, half, half), x32.narrow(-1, 0, half)}, -1);
      rotated = x32 * c + rotate_half * s;
    }
    part.copy_(rotated);
  };
  rotate(q);
  rotate(k);
}

}  // namespace backplane::torch

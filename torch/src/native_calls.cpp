#include "native_calls.hpp"

#include <backplane/error.hpp>
#include <backplane/hub/package.hpp>
#include <backplane/torch/dlpack.hpp>

#include <optional>

namespace backplane::torch::detail {
namespace {

template <class Fn>
Fn function_of(const hub::PackageKernel& kernel) {
  return reinterpret_cast<Fn>(kernel.function);
}

}  // namespace

void check(bp_status* status, const std::string& layer) {
  const std::string message = hub::LoadedPackage::take_status(status);
  if (!message.empty()) throw InvalidArgument(layer + " kernel: " + message);
}

at::Tensor last_dim_contiguous(const at::Tensor& t) {
  return t.dim() > 0 && t.size(-1) > 1 && t.stride(-1) != 1 ? t.contiguous() : t;
}

void call_rms_norm(const hub::PackageKernel& kernel, const at::Tensor& input,
                   const at::Tensor& weight, const at::Tensor* residual, double eps,
                   at::Tensor& out, const std::string& layer) {
  const DLTensorView in_view(input, "input"), weight_view(weight, "weight"),
      out_view(out, "output");
  std::optional<DLTensorView> residual_view;
  if (residual != nullptr) residual_view.emplace(*residual, "residual");
  bp_rms_norm_args args{};
  args.struct_size = sizeof args;
  args.input = in_view.get();
  args.weight = weight_view.get();
  args.residual = residual_view ? residual_view->get() : nullptr;
  args.output = out_view.get();
  args.epsilon = eps;
  check(function_of<bp_rms_norm_fn>(kernel)(kernel.context, &args), layer);
}

void call_rms_norm_backward(const hub::PackageKernel& kernel, const at::Tensor& grad_output,
                            const at::Tensor& input, const at::Tensor& weight, double eps,
                            at::Tensor& grad_input, at::Tensor& grad_weight,
                            const std::string& layer) {
  const DLTensorView g(grad_output, "grad_output"), x(input, "input"), w(weight, "weight"),
      gx(grad_input, "grad_input"), gw(grad_weight, "grad_weight");
  bp_rms_norm_backward_args args{};
  args.struct_size = sizeof args;
  args.grad_output = g.get();
  args.input = x.get();
  args.weight = w.get();
  args.grad_input = gx.get();
  args.grad_weight = gw.get();
  args.epsilon = eps;
  check(function_of<bp_rms_norm_backward_fn>(kernel)(kernel.context, &args), layer);
}

void call_gated(const hub::PackageKernel& kernel, const at::Tensor& input, at::Tensor& out,
                const std::string& layer) {
  const DLTensorView in_view(input, "input"), out_view(out, "output");
  bp_gated_activation_args args{};
  args.struct_size = sizeof args;
  args.input = in_view.get();
  args.output = out_view.get();
  check(function_of<bp_gated_activation_fn>(kernel)(kernel.context, &args), layer);
}

void call_gated_backward(const hub::PackageKernel& kernel, const at::Tensor& grad_output,
                         const at::Tensor& input, at::Tensor& grad_input,
                         const std::string& layer) {
  const DLTensorView g(grad_output, "grad_output"), x(input, "input"), gx(grad_input, "grad_input");
  bp_gated_activation_backward_args args{};
  args.struct_size = sizeof args;
  args.grad_output = g.get();
  args.input = x.get();
  args.grad_input = gx.get();
  check(function_of<bp_gated_activation_backward_fn>(kernel)(kernel.context, &args), layer);
}

void call_rotary(const hub::PackageKernel& kernel, at::Tensor& q, at::Tensor* k,
                 const at::Tensor& cos, const at::Tensor& sin, bool interleaved,
                 const std::string& layer) {
  const DLTensorView q_view(q, "query"), cos_view(cos, "cos"), sin_view(sin, "sin");
  std::optional<DLTensorView> k_view;
  if (k != nullptr) k_view.emplace(*k, "key");
  bp_rotary_embedding_args args{};
  args.struct_size = sizeof args;
  args.query = q_view.get();
  args.key = k_view ? k_view->get() : nullptr;
  args.cos = cos_view.get();
  args.sin = sin_view.get();
  args.style = interleaved ? BP_ROTARY_INTERLEAVED : BP_ROTARY_NEOX;
  check(function_of<bp_rotary_embedding_fn>(kernel)(kernel.context, &args), layer);
}

}  // namespace backplane::torch::detail

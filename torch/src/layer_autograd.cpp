#include "layer_autograd.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "native_calls.hpp"

namespace backplane::torch::detail {
namespace {

using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

// What a backward needs besides tensors, kept in the context as a capsule (an IValue holding
// any C++ object).
struct LayerState : ::torch::CustomClassHolder {
  hub::BoundLayerKernel bound;
  std::string layer;
  double eps = 0.0;
  bool interleaved = false;
};

template <class State>
const State& state_of(AutogradContext* ctx) {
  return *static_cast<const State*>(ctx->saved_data.at("state").toCapsule().get());
}

// A gradient as the kernels read it: defined (zeros when autograd passes none) and with a
// contiguous last dim.
at::Tensor gradient(const at::Tensor& g, const at::Tensor& like) {
  return g.defined() ? last_dim_contiguous(g) : at::zeros_like(like);
}

struct RmsNormFunction : public ::torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const c10::intrusive_ptr<LayerState>& state) {
    const at::Tensor input = last_dim_contiguous(x);
    at::Tensor out = at::empty(input.sizes(), input.options());
    call_rms_norm(state->bound.kernel, input, weight, nullptr, state->eps, out, state->layer);
    ctx->save_for_backward({input, weight});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const LayerState& s = state_of<LayerState>(ctx);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    at::Tensor grad_input = at::empty(input.sizes(), input.options());
    at::Tensor grad_weight = at::empty(weight.sizes(), weight.options());
    call_rms_norm_backward(s.bound.backward, gradient(grads[0], input), input, weight, s.eps,
                           grad_input, grad_weight, s.layer);
    return {grad_input, grad_weight, at::Tensor()};
  }
};

struct GatedFunction : public ::torch::autograd::Function<GatedFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const std::vector<int64_t>& out_shape,
                            const c10::intrusive_ptr<LayerState>& state) {
    const at::Tensor input = last_dim_contiguous(x);
    at::Tensor out = at::empty(out_shape, input.options());
    call_gated(state->bound.kernel, input, out, state->layer);
    ctx->save_for_backward({input});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const LayerState& s = state_of<LayerState>(ctx);
    const at::Tensor input = ctx->get_saved_variables()[0];
    std::vector<int64_t> out_shape = input.sizes().vec();
    out_shape.back() /= 2;
    const at::Tensor g =
        grads[0].defined() ? last_dim_contiguous(grads[0]) : at::zeros(out_shape, input.options());
    at::Tensor grad_input = at::empty(input.sizes(), input.options());
    call_gated_backward(s.bound.backward, g, input, grad_input, s.layer);
    return {grad_input, at::Tensor(), at::Tensor()};
  }
};

// One tensor (query or key) per Function: autograd lets a Function modify a view in place only
// when it returns that one tensor, and a model's q and k are views of their projections.
struct RotaryFunction : public ::torch::autograd::Function<RotaryFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, const at::Tensor& cos,
                            const at::Tensor& sin, const c10::intrusive_ptr<LayerState>& state) {
    call_rotary(state->bound.kernel, x, nullptr, cos, sin, state->interleaved, state->layer);
    ctx->mark_dirty({x});
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const LayerState& s = state_of<LayerState>(ctx);
    const variable_list saved = ctx->get_saved_variables();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    // The rotation back runs in place: on a copy of the gradient, which autograd owns.
    at::Tensor g = grads[0].clone(at::MemoryFormat::Contiguous);
    call_rotary(s.bound.backward, g, nullptr, saved[0], saved[1], s.interleaved, s.layer);
    return {g, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

c10::intrusive_ptr<LayerState> layer_state(const hub::BoundLayerKernel& bound,
                                           const std::string& layer) {
  auto state = c10::make_intrusive<LayerState>();
  state->bound = bound;
  state->layer = layer;
  return state;
}

}  // namespace

at::Tensor rms_norm_with_grad(const hub::BoundLayerKernel& bound, const at::Tensor& x,
                              const at::Tensor& weight, double eps, const std::string& layer) {
  auto state = layer_state(bound, layer);
  state->eps = eps;
  return RmsNormFunction::apply(x, weight, state);
}

at::Tensor gated_with_grad(const hub::BoundLayerKernel& bound, const at::Tensor& x,
                           const std::vector<int64_t>& out_shape, const std::string& layer) {
  return GatedFunction::apply(x, out_shape, layer_state(bound, layer));
}

std::pair<at::Tensor, at::Tensor> rotary_with_grad(const hub::BoundLayerKernel& bound,
                                                   at::Tensor& q, at::Tensor& k,
                                                   const at::Tensor& cos, const at::Tensor& sin,
                                                   bool interleaved, const std::string& layer) {
  auto state = layer_state(bound, layer);
  state->interleaved = interleaved;
  at::Tensor q_out = RotaryFunction::apply(q, cos, sin, state);
  at::Tensor k_out = RotaryFunction::apply(k, cos, sin, state);
  return {q_out, k_out};
}

}  // namespace backplane::torch::detail

#include "attention_autograd.hpp"

#include <backplane/torch/dlpack.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>

namespace backplane::torch::detail {
namespace {

using ::torch::autograd::AutogradContext;
using ::torch::autograd::variable_list;

// The kernel and the call's options, kept in the context as a capsule (an IValue holding any
// C++ object).
struct AttentionState : ::torch::CustomClassHolder {
  explicit AttentionState(AttentionKernel k) : kernel(std::move(k)) {}
  AttentionKernel kernel;
  bool causal = false;
  std::optional<double> scale;
  void* stream = nullptr;
  at::Tensor mask;  // undefined: none. Not an input of the Function: it gets no gradient.
};

const AttentionState& state_of(AutogradContext* ctx) {
  return *static_cast<const AttentionState*>(ctx->saved_data.at("state").toCapsule().get());
}

struct AttentionFunction : public ::torch::autograd::Function<AttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const c10::intrusive_ptr<AttentionState>& state) {
    at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
    at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
    const DLTensorView qv(q, "query"), kv(k, "key"), vv(v, "value"), ov(out, "out"),
        lv(lse, "logsumexp");
    std::optional<DLTensorView> mv;
    if (state->mask.defined()) mv.emplace(state->mask, "mask");
    AttentionArguments call;
    call.query = qv.get();
    call.key = kv.get();
    call.value = vv.get();
    call.mask = mv ? mv->get() : nullptr;
    call.output = ov.get();
    call.logsumexp = lv.get();
    call.causal = state->causal;
    call.scale = state->scale;
    call.stream = state->stream;
    state->kernel(call);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["state"] = c10::IValue::make_capsule(state);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const AttentionState& s = state_of(ctx);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3];
    const at::Tensor& lse = saved[4];
    const at::Tensor g = grads[0].defined() ? grads[0] : at::zeros_like(out);
    at::Tensor dq = at::empty(q.sizes(), q.options()), dk = at::empty(k.sizes(), k.options()),
               dv = at::empty(v.sizes(), v.options());
    const DLTensorView qv(q, "query"), kv(k, "key"), vv(v, "value"), ov(out, "out"),
        lv(lse, "logsumexp"), gv(g, "grad_output"), dqv(dq, "grad_query"), dkv(dk, "grad_key"),
        dvv(dv, "grad_value");
    std::optional<DLTensorView> mv;
    if (s.mask.defined()) mv.emplace(s.mask, "mask");
    AttentionBackwardArguments call;
    call.query = qv.get();
    call.key = kv.get();
    call.value = vv.get();
    call.mask = mv ? mv->get() : nullptr;
    call.output = ov.get();
    call.logsumexp = lv.get();
    call.grad_output = gv.get();
    call.grad_query = dqv.get();
    call.grad_key = dkv.get();
    call.grad_value = dvv.get();
    call.causal = s.causal;
    call.scale = s.scale;
    call.stream = s.stream;
    s.kernel.backward(call);
    return {dq, dk, dv, at::Tensor()};
  }
};

}  // namespace

at::Tensor attention_with_grad(const AttentionKernel& kernel, const at::Tensor& q,
                               const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& mask, bool causal,
                               std::optional<double> scale, void* stream) {
  auto state = c10::make_intrusive<AttentionState>(kernel);
  state->causal = causal;
  state->scale = scale;
  state->stream = stream;
  if (mask) state->mask = *mask;
  return AttentionFunction::apply(q, k, v, state);
}

at::Tensor composite_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const std::optional<at::Tensor>& mask, bool causal,
                               std::optional<double> scale_option) {
  const int64_t group = k.size(1) > 0 ? q.size(1) / k.size(1) : 1;
  const at::Tensor kk = group > 1 ? k.repeat_interleave(group, 1) : k;
  const at::Tensor vv = group > 1 ? v.repeat_interleave(group, 1) : v;
  const double scale = scale_option.value_or(1.0 / std::sqrt(static_cast<double>(q.size(3))));
  at::Tensor scores = at::matmul(q, kk.transpose(-2, -1)) * scale;
  const double neg_inf = -std::numeric_limits<double>::infinity();
  if (mask) {
    const at::Tensor& m = *mask;
    if (m.scalar_type() == at::kBool || m.scalar_type() == at::kByte) {
      scores = scores.masked_fill(at::logical_not(m.to(at::kBool)), neg_inf);
    } else {
      scores = scores + m;
    }
  }
  if (causal) {
    const int64_t sq = q.size(2), sk = k.size(2);
    const at::Tensor keep = at::ones({sq, sk}, q.options().dtype(at::kBool)).tril(sk - sq);
    scores = scores.masked_fill(at::logical_not(keep), neg_inf);
  }
  return at::matmul(at::softmax(scores, -1), vv);
}

}  // namespace backplane::torch::detail

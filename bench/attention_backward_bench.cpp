// The attention backward against LibTorch's, in backplane-bench's run (same process, same
// threads): causal prefill 1x32x1024x128 in float32 and bfloat16, and an MQA prefill (8 query
// heads over one kv head, batch 1: fewer kv heads than cores, so backplane cuts the keys into
// chunks; LibTorch with enable_gqa).
//   train_attention/<case>/libtorch   autograd through at::scaled_dot_product_attention
//       (is_causal: LibTorch's fused CPU flash attention, forward and backward); the forward
//       runs once, each iteration is one torch::autograd::grad over the kept graph
//   train_attention/<case>/backplane  attention::backward from the forward's saved logsumexp,
//       into gradients allocated once (as autograd's outputs, LibTorch's allocator)
// Both count the backward's five products (S, dP, dV, dK, dQ over the visible half of the
// score matrix) as "flops", to set against roofline/sgemm. Threads: BACKPLANE_BENCH_THREADS.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>
#include <string>
#include <vector>

#include <backplane/torch/dlpack.hpp>

#include "attention/attention.hpp"
#include "layer_threads.hpp"

namespace {

using View = backplane::torch::DLTensorView;
namespace attn = backplane::attention;

struct BackwardCase {
  at::ScalarType dtype;
  int64_t batch, heads, heads_kv, seq, head_dim;
  std::string name;

  double flops() const {  // causal: half of the five [seq x seq x head_dim] products
    return 5.0 * 2.0 * static_cast<double>(batch * heads * seq * seq * head_dim) / 2.0;
  }
};

std::vector<BackwardCase> backward_cases() {
  std::vector<BackwardCase> out;
  for (const at::ScalarType t : {at::kFloat, at::kBFloat16}) {
    const std::string suffix = t == at::kFloat ? "_f32" : "_bf16";
    out.push_back(
        {t, 1, 32, 32, 1024, 128, "train_attention/prefill_causal_1x32x1024x128" + suffix});
  }
  out.push_back(
      {at::kFloat, 1, 8, 1, 1024, 128, "train_attention/prefill_causal_mqa_1x8q1kv_1024x128_f32"});
  return out;
}

struct Operands {
  at::Tensor q, k, v, grad;
  explicit Operands(const BackwardCase& c) {
    const auto o = at::TensorOptions().dtype(c.dtype);
    at::manual_seed(7);
    q = at::randn({c.batch, c.heads, c.seq, c.head_dim}).to(o);
    k = at::randn({c.batch, c.heads_kv, c.seq, c.head_dim}).to(o);
    v = at::randn({c.batch, c.heads_kv, c.seq, c.head_dim}).to(o);
    grad = at::randn({c.batch, c.heads, c.seq, c.head_dim}).to(o);
  }
};

void Counters(benchmark::State& state, const BackwardCase& c) {
  state.counters["flops"] =
      benchmark::Counter(c.flops(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = backplane::bench::layer_threads();
}

void BackwardLibTorch(benchmark::State& state, const BackwardCase* c) {
  backplane::bench::layer_threads();
  const Operands in(*c);
  const at::Tensor q = in.q.detach().requires_grad_(true);
  const at::Tensor k = in.k.detach().requires_grad_(true);
  const at::Tensor v = in.v.detach().requires_grad_(true);
  const at::Tensor out =
      at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt,
                                       /*enable_gqa=*/c->heads_kv != c->heads);
  for (auto _ : state) {
    const auto grads = torch::autograd::grad({out}, {q, k, v}, {in.grad}, /*retain_graph=*/true);
    benchmark::DoNotOptimize(grads[0].data_ptr());
  }
  Counters(state, *c);
}

void BackwardBackplane(benchmark::State& state, const BackwardCase* c) {
  backplane::bench::layer_threads();
  const Operands in(*c);
  const at::Tensor out = at::empty_like(in.q);
  const at::Tensor lse = at::empty({c->batch, c->heads, c->seq}, at::kFloat);
  const View qv(in.q), kv(in.k), vv(in.v), ov(out), lv(lse), gv(in.grad);
  attn::Options options;
  options.causal = true;
  attn::Tensors fwd;
  fwd.query = qv.get();
  fwd.key = kv.get();
  fwd.value = vv.get();
  fwd.output = ov.get();
  fwd.logsumexp = lv.get();
  if (const attn::Status s = attn::forward(fwd, options); !s.ok()) {
    state.SkipWithError(s.message.c_str());
    return;
  }
  const at::Tensor gq = at::empty_like(in.q), gk = at::empty_like(in.k), gvv = at::empty_like(in.v);
  const View gqv(gq), gkv(gk), gvview(gvv);
  attn::BackwardTensors bwd;
  bwd.query = qv.get();
  bwd.key = kv.get();
  bwd.value = vv.get();
  bwd.output = ov.get();
  bwd.logsumexp = lv.get();
  bwd.grad_output = gv.get();
  bwd.grad_query = gqv.get();
  bwd.grad_key = gkv.get();
  bwd.grad_value = gvview.get();
  attn::RunInfo info;
  for (auto _ : state) {
    if (const attn::Status s = attn::backward(bwd, options, &info); !s.ok()) {
      state.SkipWithError(s.message.c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  Counters(state, *c);
  state.SetLabel(std::string(info.target) + " " + info.tile_kernel);
}

[[maybe_unused]] const bool registered = [] {
  static const std::vector<BackwardCase> cases = backward_cases();
  for (const BackwardCase& c : cases) {
    benchmark::RegisterBenchmark((c.name + "/libtorch").c_str(), BackwardLibTorch, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((c.name + "/backplane").c_str(), BackwardBackplane, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace

// The layer kernels' training step against LibTorch autograd, in backplane-bench's run (same
// process, same threads): one forward and one backward per iteration.
//   train_rmsnorm/<rows>x<hidden>_<dtype>/{backplane,libtorch}  at::rms_norm (its fused op) and
//       autograd for the input and weight gradients
//   train_silu_and_mul/<rows>x2x<d>_<dtype>/{backplane,libtorch}  at::silu(x1) * x2 and autograd
//   train_rotary/<b>x<heads>x<seq>x<dim>_<dtype>/{backplane,libtorch}  transformers'
//       apply_rotary_pos_emb on query and key (cos and sin made beforehand) and autograd
// .../backplane writes into buffers made once (the gradients' too); .../backplane_alloc allocates
// the output and the gradients every step as autograd does (LibTorch's CPU allocator, fresh
// pages), the equal-terms column against .../libtorch. Rotary runs in place on both of its
// backplane rows (the forward on q and k, the backward on the gradients it is given). Threads:
// BACKPLANE_BENCH_THREADS as the other benchmarks (layer_threads()).
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>
#include <vector>

#include <backplane/torch/dlpack.hpp>

#include "activation/activation.hpp"
#include "layer_threads.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"

namespace {

using View = backplane::torch::DLTensorView;

enum class Op { kRmsNorm, kSiluAndMul, kRotary };

struct TrainCase {
  Op op;
  at::ScalarType dtype;
  std::vector<int64_t> dims;  // rmsnorm: rows, hidden; silu: rows, d; rotary: b, heads, seq, dim
  std::string name;
};

std::vector<TrainCase> train_cases() {
  std::vector<TrainCase> out;
  for (const at::ScalarType t : {at::kFloat, at::kBFloat16}) {
    const std::string suffix = t == at::kFloat ? "_f32" : "_bf16";
    out.push_back({Op::kRmsNorm, t, {4096, 4096}, "train_rmsnorm/4096x4096" + suffix});
    out.push_back({Op::kSiluAndMul, t, {2048, 11008}, "train_silu_and_mul/2048x2x11008" + suffix});
    out.push_back({Op::kRotary, t, {1, 32, 2048, 128}, "train_rotary/1x32x2048x128" + suffix});
  }
  return out;
}

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t h = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

// The operands of a case, made once: inputs, the output's gradient, cos and sin.
struct Operands {
  at::Tensor x, weight, grad, cos, sin, cos_full, sin_full, k, grad_k;
  explicit Operands(const TrainCase& c) {
    const auto o = at::TensorOptions().dtype(c.dtype);
    const auto& d = c.dims;
    switch (c.op) {
      case Op::kRmsNorm:
        x = at::randn({d[0], d[1]}).to(o);
        weight = (at::rand({d[1]}) + 0.5).to(o);
        grad = at::randn({d[0], d[1]}).to(o);
        break;
      case Op::kSiluAndMul:
        x = at::randn({d[0], 2 * d[1]}).to(o);
        grad = at::randn({d[0], d[1]}).to(o);
        break;
      case Op::kRotary: {
        x = at::randn({d[0], d[1], d[2], d[3]}).to(o);
        k = at::randn({d[0], d[1], d[2], d[3]}).to(o);
        grad = at::randn({d[0], d[1], d[2], d[3]}).to(o);
        grad_k = at::randn({d[0], d[1], d[2], d[3]}).to(o);
        const at::Tensor angles =
            at::arange(d[2], at::kFloat).unsqueeze(-1) *
            at::pow(10000.0, -at::arange(d[3] / 2, at::kFloat) * 2 / static_cast<double>(d[3]));
        cos = angles.cos();
        sin = angles.sin();
        cos_full = at::cat({cos, cos}, -1).to(o);  // as the model's rotary module makes them
        sin_full = at::cat({sin, sin}, -1).to(o);
        break;
      }
    }
  }
};

void TrainLibTorch(benchmark::State& state, const TrainCase* c) {
  backplane::bench::layer_threads();
  const Operands in(*c);
  const at::Tensor x = in.x.detach().requires_grad_(true);
  const at::Tensor w = in.weight.defined() ? in.weight.detach().requires_grad_(true) : at::Tensor();
  const at::Tensor k = in.k.defined() ? in.k.detach().requires_grad_(true) : at::Tensor();
  for (auto _ : state) {
    x.mutable_grad() = at::Tensor();
    switch (c->op) {
      case Op::kRmsNorm: {
        w.mutable_grad() = at::Tensor();
        at::rms_norm(x, {c->dims[1]}, w, 1e-6).backward(in.grad);
        benchmark::DoNotOptimize(w.grad().data_ptr());
        break;
      }
      case Op::kSiluAndMul: {
        const int64_t d = c->dims[1];
        (at::silu(x.narrow(-1, 0, d)) * x.narrow(-1, d, d)).backward(in.grad);
        break;
      }
      case Op::kRotary: {
        k.mutable_grad() = at::Tensor();
        const at::Tensor q_out = x * in.cos_full + rotate_half(x) * in.sin_full;
        const at::Tensor k_out = k * in.cos_full + rotate_half(k) * in.sin_full;
        torch::autograd::backward({q_out, k_out}, {in.grad, in.grad_k});
        benchmark::DoNotOptimize(k.grad().data_ptr());
        break;
      }
    }
    benchmark::DoNotOptimize(x.grad().data_ptr());
  }
  state.counters["threads"] = backplane::bench::layer_threads();
}

void TrainBackplane(benchmark::State& state, const TrainCase* c, bool alloc) {
  backplane::bench::layer_threads();
  const Operands in(*c);
  namespace bp = backplane;
  switch (c->op) {
    case Op::kRmsNorm: {
      at::Tensor out = at::empty_like(in.x), gx = at::empty_like(in.x);
      at::Tensor gw = at::empty_like(in.weight);
      for (auto _ : state) {
        if (alloc) {
          out = at::empty_like(in.x);
          gx = at::empty_like(in.x);
          gw = at::empty_like(in.weight);
        }
        const View xv(in.x), wv(in.weight), ov(out), gv(in.grad), gxv(gx), gwv(gw);
        if (!bp::rmsnorm::forward_cpu({xv.get(), wv.get(), nullptr, ov.get()}, 1e-6).ok() ||
            !bp::rmsnorm::backward_cpu(
                 {gv.get(), xv.get(), wv.get(), nullptr, gxv.get(), gwv.get()}, 1e-6)
                 .ok()) {
          state.SkipWithError("rms_norm failed");
          return;
        }
        benchmark::ClobberMemory();
      }
      break;
    }
    case Op::kSiluAndMul: {
      const auto silu = bp::activation::Activation::kSilu;
      at::Tensor out = at::empty_like(in.grad), gx = at::empty_like(in.x);
      for (auto _ : state) {
        if (alloc) {
          out = at::empty_like(in.grad);
          gx = at::empty_like(in.x);
        }
        const View xv(in.x), ov(out), gv(in.grad), gxv(gx);
        if (!bp::activation::forward_cpu(silu, xv.get(), ov.get()).ok() ||
            !bp::activation::backward_cpu(silu, gv.get(), xv.get(), gxv.get()).ok()) {
          state.SkipWithError("silu_and_mul failed");
          return;
        }
        benchmark::ClobberMemory();
      }
      break;
    }
    case Op::kRotary: {
      // In place on both sides of the step: the forward on q and k, the backward on copies of
      // their outputs' gradients (the backward's inputs are consumed, as autograd's are).
      const at::Tensor q = in.x.clone(), k = in.k.clone();
      const at::Tensor gq = in.grad.clone(), gk = in.grad_k.clone();
      const at::Tensor cos = in.cos.to(c->dtype), sin = in.sin.to(c->dtype);
      const View qv(q), kv(k), gqv(gq), gkv(gk), cv(cos), sv(sin);
      for (auto _ : state) {
        if (!bp::rotary::forward_cpu({qv.get(), kv.get(), cv.get(), sv.get()},
                                     bp::rotary::Style::kNeox)
                 .ok() ||
            !bp::rotary::backward_cpu({gqv.get(), gkv.get(), cv.get(), sv.get()},
                                      bp::rotary::Style::kNeox)
                 .ok()) {
          state.SkipWithError("rotary failed");
          return;
        }
        benchmark::ClobberMemory();
      }
      break;
    }
  }
  state.counters["threads"] = backplane::bench::layer_threads();
}

[[maybe_unused]] const bool registered = [] {
  static const std::vector<TrainCase> cases = train_cases();
  for (const TrainCase& c : cases) {
    benchmark::RegisterBenchmark((c.name + "/libtorch").c_str(), TrainLibTorch, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    for (const bool alloc : {false, true}) {
      if (alloc && c.op == Op::kRotary) continue;  // in place either way
      benchmark::RegisterBenchmark((c.name + (alloc ? "/backplane_alloc" : "/backplane")).c_str(),
                                   TrainBackplane, &c, alloc)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  return true;
}();

}  // namespace

// The CPU layer kernels' backward against LibTorch autograd of their composites, run in float64
// from the same (already rounded) inputs and output gradients, over shapes, layouts and dtypes,
// on every SIMD target Highway compiled that this CPU runs.
//   rms_norm_backward:  autograd of transformers' LlamaRMSNorm (x * rsqrt(mean(x^2) + eps) *
//                       weight), plus the gradient of the updated residual (fused residual add)
//   rotary_embedding_backward: autograd of transformers' apply_rotary_pos_emb (rotate_half)
//                       and GPT-J's rotate_every_two, the tables constant
//   *_and_mul_backward: autograd of at::silu / at::gelu (erf or tanh) of the first half times
//                       the second
// A gradient is rounded once to the dtype: within one unit in the last place of the exact value,
// plus float32 noise relative to the products it is made of (|grad_output * up|).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "common/threads.hpp"
#include "per_target.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"
#include "rotary_composite.hpp"
#include "torch_dlpack.hpp"

namespace backplane {
namespace {

using kernels::Status;
using kernels::StatusCode;
using testing::dtype_label;
using testing::expect_close;
using testing::kDTypes;
using testing::TorchView;

class Backward : public testing::PerTarget {};

// ------------------------------------------------------------------ rms_norm

struct NormCase {
  std::vector<int64_t> shape;  // input
  bool grad_residual;
  enum Layout { kCompact, kRowPadding, kPermuted } layout;
};

const NormCase kNormCases[] = {
    {{1, 1}, false, NormCase::kCompact},         {{1, 7}, false, NormCase::kCompact},
    {{3, 17}, false, NormCase::kCompact},        {{5, 4096}, false, NormCase::kCompact},
    {{257, 33}, false, NormCase::kCompact},      {{1000, 256}, false, NormCase::kCompact},
    {{64, 1000}, false, NormCase::kRowPadding},  {{3, 2, 129}, false, NormCase::kPermuted},
    {{1, 5}, true, NormCase::kCompact},          {{7, 100}, true, NormCase::kCompact},
    {{96, 1024}, true, NormCase::kRowPadding},   {{4, 3, 65}, true, NormCase::kPermuted},
    {{4096, 1032}, false, NormCase::kCompact},    // 8 MiB of 16-bit input gradient: streamed
    {{2100, 2047}, true, NormCase::kRowPadding},  // streamed, rows starting at every alignment
};

// A tensor of `shape` in the case's layout (values standard normal, rounded to dtype).
at::Tensor make_rows(std::vector<int64_t> shape, NormCase::Layout layout, at::ScalarType dtype) {
  if (layout == NormCase::kRowPadding) {
    const int64_t width = shape.back();
    shape.back() += 13;
    return at::randn(shape).to(dtype).narrow(-1, 0, width);
  }
  if (layout == NormCase::kPermuted) {
    std::swap(shape[0], shape[1]);
    return at::randn(shape).to(dtype).transpose(0, 1);
  }
  return at::randn(shape).to(dtype);
}

struct NormGrads {
  at::Tensor input, weight;
};

// Autograd of x * rsqrt(mean(x^2) + eps) * weight in float64, from the same rounded inputs.
NormGrads autograd_norm_grads(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad,
                              double eps) {
  const at::Tensor x64 = x.to(at::kDouble).detach().requires_grad_(true);
  const at::Tensor w64 = weight.to(at::kDouble).detach().requires_grad_(true);
  const at::Tensor y = x64 * at::rsqrt(x64.pow(2).mean(-1, true) + eps) * w64;
  y.backward(grad.to(at::kDouble));
  return {x64.grad(), w64.grad()};
}

Status run_norm_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                         const at::Tensor& grad_residual, const at::Tensor& grad_input,
                         const at::Tensor& grad_weight, double eps) {
  const TorchView gv(grad), xv(x), wv(weight), rv(grad_residual), giv(grad_input), gwv(grad_weight);
  rmsnorm::BackwardTensors t;
  t.grad_output = gv;
  t.input = xv;
  t.weight = wv;
  t.grad_residual = grad_residual.defined() ? rv.dl() : nullptr;
  t.grad_input = giv;
  t.grad_weight = gwv;
  return rmsnorm::backward_cpu(t, eps);
}

TEST_P(Backward, RmsNormMatchesAutograd) {
  const double eps = 1e-6;
  for (const NormCase& c : kNormCases) {
    for (at::ScalarType dtype : kDTypes) {
      const std::string what = "rms_norm_backward " + c10::str(at::IntArrayRef(c.shape)) +
                               (c.grad_residual ? " grad_residual" : "") + " layout " +
                               std::to_string(c.layout) + " " + dtype_label(dtype);
      SCOPED_TRACE(what);
      const int64_t hidden = c.shape.back();
      const at::Tensor x = make_rows(c.shape, c.layout, dtype);
      const at::Tensor grad = make_rows(c.shape, c.layout, dtype);
      const at::Tensor weight = (at::rand({hidden}) + 0.5).to(dtype);
      const at::Tensor grad_residual =
          c.grad_residual ? make_rows(c.shape, c.layout, dtype) : at::Tensor();
      const at::Tensor grad_input = at::empty(c.shape, x.options());
      const at::Tensor grad_weight = at::empty({hidden}, x.options());
      const Status s =
          run_norm_backward(grad, x, weight, grad_residual, grad_input, grad_weight, eps);
      ASSERT_TRUE(s.ok()) << s.message;
      NormGrads ref = autograd_norm_grads(x, weight, grad, eps);
      if (c.grad_residual) ref.input = ref.input + grad_residual.to(at::kDouble);
      // grad_input: a few float32 operations per element after a row-wide dot product: float32
      // noise relative to the largest gradient, on top of the dtype's one rounding.
      const double base = dtype == at::kFloat ? 1e-6 : 1e-5;
      expect_close(grad_input, ref.input, testing::rounding_rtol(dtype),
                   base + 4e-6 * ref.input.abs().max().item<double>(), what + " grad_input");
      // grad_weight: a float32 sum over the rows, relative to the sum of the terms' sizes.
      const at::Tensor x64 = x.to(at::kDouble);
      const at::Tensor terms =
          (grad.to(at::kDouble) * x64 * at::rsqrt(x64.pow(2).mean(-1, true) + eps))
              .abs()
              .reshape({-1, hidden})
              .sum(0);
      expect_close(grad_weight, ref.weight, testing::rounding_rtol(dtype), 1e-6 * terms + 1e-6,
                   what + " grad_weight");
    }
  }
}

TEST(BackwardThreads, RmsNormGivesTheSameBitsOnAnyThreads) {
  for (at::ScalarType dtype : kDTypes) {
    SCOPED_TRACE(dtype_label(dtype));
    const at::Tensor x = at::randn({1000, 512}).to(dtype), grad = at::randn({1000, 512}).to(dtype);
    const at::Tensor w = (at::rand({512}) + 0.5).to(dtype);
    const at::Tensor gi1 = at::empty_like(x), gi4 = at::empty_like(x);
    const at::Tensor gw1 = at::empty_like(w), gw4 = at::empty_like(w);
    const int threads = kernels::num_threads();
    kernels::set_num_threads(1);
    ASSERT_TRUE(run_norm_backward(grad, x, w, at::Tensor(), gi1, gw1, 1e-6).ok());
    kernels::set_num_threads(4);
    ASSERT_TRUE(run_norm_backward(grad, x, w, at::Tensor(), gi4, gw4, 1e-6).ok());
    kernels::set_num_threads(threads);
    EXPECT_TRUE(at::equal(gi1, gi4));
    EXPECT_TRUE(at::equal(gw1, gw4));
  }
}

TEST(BackwardErrors, RmsNormNamesTheArgument) {
  const at::Tensor x = at::randn({4, 8}), grad = at::randn({4, 8}), w = at::ones({8});
  const at::Tensor gi = at::empty({4, 8}), gw = at::empty({8});
  struct Bad {
    at::Tensor grad, x, w, grad_residual, gi, gw;
    double eps;
    const char* says;
  } cases[] = {
      {at::randn({4, 7}), x, w, {}, gi, gw, 1e-6, "grad_output shape [4, 7] must equal input's"},
      {grad, x, at::ones({7}), {}, gi, gw, 1e-6, "weight shape [7] must be [hidden] = [8]"},
      {grad, x, w, {}, gi, at::empty({4}), 1e-6, "grad_weight shape [4] must be [hidden] = [8]"},
      {grad, x, w, at::randn({4, 9}), gi, gw, 1e-6, "grad_residual shape [4, 9] must equal"},
      {grad, x, w, {}, x, gw, 1e-6, "grad_input overlaps input"},
      {grad, x, w, {}, gi, w, 1e-6, "grad_weight overlaps weight"},
      {grad, x, w, {}, gi, gw, -1.0, "epsilon must be finite and >= 0"},
      {grad.to(at::kHalf), x, w, {}, gi, gw, 1e-6, "grad_output"},
  };
  for (const Bad& c : cases) {
    const Status s = run_norm_backward(c.grad, c.x, c.w, c.grad_residual, c.gi, c.gw, c.eps);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << c.says;
    EXPECT_NE(s.message.find(c.says), std::string::npos) << s.message;
    EXPECT_NE(s.message.find("rms_norm_backward"), std::string::npos) << s.message;
  }
}

// ------------------------------------------------------------------ rotary embedding

struct RotaryCase {
  int64_t batch, heads, seq, head_dim, rotary_dim;
  bool seq_major;  // gradients stored [batch, seq, heads, head_dim]
};

const RotaryCase kRotaryCases[] = {
    {1, 1, 1, 2, 2, false},     {2, 4, 7, 64, 64, false}, {1, 3, 5, 24, 16, false},
    {2, 2, 9, 130, 130, false}, {3, 2, 6, 40, 40, true},  {1, 8, 256, 128, 128, false},
};

TEST_P(Backward, RotaryMatchesAutograd) {
  for (const RotaryCase& c : kRotaryCases) {
    for (rotary::Style style : {rotary::Style::kNeox, rotary::Style::kInterleaved}) {
      for (at::ScalarType dtype : kDTypes) {
        for (bool f32_table : {true, false}) {
          const std::string what =
              std::string(style == rotary::Style::kNeox ? "neox " : "interleaved ") + "b" +
              std::to_string(c.batch) + " h" + std::to_string(c.heads) + " s" +
              std::to_string(c.seq) + " d" + std::to_string(c.head_dim) + " rot" +
              std::to_string(c.rotary_dim) + (c.seq_major ? " seq-major " : " ") +
              dtype_label(dtype) + (f32_table ? " f32 table" : " table in dtype");
          SCOPED_TRACE(what);
          const int64_t half = c.rotary_dim / 2;
          const at::Tensor angles = at::arange(c.seq, at::kFloat).unsqueeze(-1) *
                                    at::pow(10000.0, -at::arange(half, at::kFloat) * 2 /
                                                         static_cast<double>(c.rotary_dim));
          const at::ScalarType table_type = f32_table ? at::kFloat : dtype;
          const at::Tensor cos = angles.cos().to(table_type), sin = angles.sin().to(table_type);
          auto heads = [&] {
            if (c.seq_major) {
              return at::randn({c.batch, c.seq, c.heads, c.head_dim}).to(dtype).transpose(1, 2);
            }
            return at::randn({c.batch, c.heads, c.seq, c.head_dim}).to(dtype);
          };
          const at::Tensor q = heads(), grad_q = heads(), grad_k = heads();
          const at::Tensor q64 = q.to(at::kDouble).requires_grad_(true);
          testing::rotary_composite(q64, cos, sin, style).backward(grad_q.to(at::kDouble));
          const at::Tensor k64 = q.to(at::kDouble).requires_grad_(true);
          testing::rotary_composite(k64, cos, sin, style).backward(grad_k.to(at::kDouble));
          const TorchView qv(grad_q), kv(grad_k), cv(cos), sv(sin);
          const Status s = rotary::backward_cpu({qv, kv, cv, sv}, style);
          ASSERT_TRUE(s.ok()) << s.message;
          expect_close(grad_q, q64.grad(), dtype, what + " query");
          expect_close(grad_k, k64.grad(), dtype, what + " key");
        }
      }
    }
  }
}

TEST(BackwardErrors, RotaryNamesTheOp) {
  const at::Tensor g = at::randn({1, 2, 4, 8}), cos = at::ones({4, 4}), sin = at::ones({4, 3});
  const TorchView gv(g), cv(cos), sv(sin);
  const Status s = rotary::backward_cpu({gv, nullptr, cv, sv}, rotary::Style::kNeox);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
  EXPECT_NE(s.message.find("rotary_embedding_backward: sin"), std::string::npos) << s.message;
}

// ------------------------------------------------------------------ gated activations

at::Tensor activated(activation::Activation a, const at::Tensor& gate) {
  switch (a) {
    case activation::Activation::kSilu:
      return at::silu(gate);
    case activation::Activation::kGelu:
      return at::gelu(gate);
    case activation::Activation::kGeluTanh:
      return at::gelu(gate, "tanh");
  }
  return {};
}

// d(sum(grad * act(x[..., :d]) * x[..., d:])) / dx by autograd, in float64.
at::Tensor autograd_input_grad(activation::Activation a, const at::Tensor& x,
                               const at::Tensor& grad) {
  const at::Tensor x64 = x.to(at::kDouble).detach().requires_grad_(true);
  const int64_t d = x.size(-1) / 2;
  const at::Tensor y = activated(a, x64.narrow(-1, 0, d)) * x64.narrow(-1, d, d);
  y.backward(grad.to(at::kDouble));
  return x64.grad();
}

struct GatedCase {
  std::vector<int64_t> shape;  // input, last dim 2 * d
  enum Layout { kCompact, kPaddedRows, kPermuted } layout;
};

const GatedCase kGatedCases[] = {
    {{1, 2}, GatedCase::kCompact},         {{1, 14}, GatedCase::kCompact},
    {{3, 32}, GatedCase::kCompact},        {{5, 200}, GatedCase::kCompact},
    {{300, 66}, GatedCase::kPaddedRows},   {{2, 3, 34}, GatedCase::kCompact},
    {{3, 4, 50}, GatedCase::kPermuted},    {{4, 22016}, GatedCase::kCompact},
    {{64, 8192}, GatedCase::kCompact},     {{128, 1026}, GatedCase::kPaddedRows},
    {{512, 8192}, GatedCase::kCompact},     // 8 MiB of 16-bit input gradient: streamed
    {{520, 8198}, GatedCase::kPaddedRows},  // as large, halves off each other's line: plain
};

// Values of `shape` in the layout (standard normal times `scale`, rounded to dtype).
at::Tensor make(std::vector<int64_t> shape, GatedCase::Layout layout, double scale,
                at::ScalarType dtype) {
  if (layout == GatedCase::kPaddedRows) {
    const int64_t width = shape.back();
    shape.back() += 6;
    return (at::randn(shape) * scale).to(dtype).narrow(-1, 0, width);
  }
  if (layout == GatedCase::kPermuted) {
    std::swap(shape[0], shape[1]);
    return (at::randn(shape) * scale).to(dtype).transpose(0, 1);
  }
  return (at::randn(shape) * scale).to(dtype);
}

// The tolerance of a gradient made of products with grad * up: float32 noise relative to their
// size, on top of the dtype's one rounding.
void expect_grad_close(const at::Tensor& ours, const at::Tensor& ref, const at::Tensor& x,
                       const at::Tensor& grad, at::ScalarType dtype, const std::string& what) {
  const int64_t d = x.size(-1) / 2;
  const double size =
      (grad.to(at::kDouble).abs() * (x.narrow(-1, d, d).to(at::kDouble).abs() + 1.0))
          .max()
          .item<double>();
  expect_close(ours, ref, testing::rounding_rtol(dtype),
               1e-6 * size + (dtype == at::kFloat ? 1e-6 : 1e-5), what);
}

TEST_P(Backward, GatedActivationsMatchAutograd) {
  for (const GatedCase& c : kGatedCases) {
    for (activation::Activation a : {activation::Activation::kSilu, activation::Activation::kGelu,
                                     activation::Activation::kGeluTanh}) {
      for (at::ScalarType dtype : kDTypes) {
        const std::string what = std::string(activation::backward_op_name(a)) + " " +
                                 c10::str(at::IntArrayRef(c.shape)) + " layout " +
                                 std::to_string(c.layout) + " " + dtype_label(dtype);
        SCOPED_TRACE(what);
        // Wide gates reach both tails of each activation and the slope's extremes.
        const at::Tensor x = make(c.shape, c.layout, 4.0, dtype);
        std::vector<int64_t> half = c.shape;
        half.back() /= 2;
        const at::Tensor grad = make(half, c.layout, 1.0, dtype);
        const at::Tensor grad_input = at::empty(c.shape, x.options());
        const TorchView gv(grad), xv(x), giv(grad_input);
        const Status s = activation::backward_cpu(a, gv, xv, giv);
        ASSERT_TRUE(s.ok()) << s.message;
        expect_grad_close(grad_input, autograd_input_grad(a, x, grad), x, grad, dtype, what);
      }
    }
  }
}

TEST_P(Backward, GatedActivationsAtTheExtremes) {
  // Large magnitudes and zeros: no NaN or inf where the exact gradient is finite.
  const at::Tensor gate = at::tensor({-1e30f, -200.f, -90.f, -20.f, -5.f, -1e-20f, 0.f, 1e-20f, 3.f,
                                      20.f, 90.f, 200.f, 1e30f, -1e4f, 1e4f, 0.5f});
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = at::cat({gate, at::ones({16})}).reshape({1, 32}).to(dtype);
    const at::Tensor grad = at::ones({1, 16}).to(dtype);
    for (activation::Activation a : {activation::Activation::kSilu, activation::Activation::kGelu,
                                     activation::Activation::kGeluTanh}) {
      const at::Tensor grad_input = at::empty({1, 32}, x.options());
      const TorchView gv(grad), xv(x), giv(grad_input);
      ASSERT_TRUE(activation::backward_cpu(a, gv, xv, giv).ok());
      // 1e30 x 1 would overflow float64's own x^3 in gelu_tanh's slope: compare where the
      // reference is finite, and require finite results everywhere.
      const at::Tensor ref = autograd_input_grad(a, x, grad);
      const at::Tensor finite = ref.isfinite();
      EXPECT_TRUE(grad_input.to(at::kFloat).isfinite().all().item<bool>())
          << activation::backward_op_name(a) << " " << dtype_label(dtype);
      expect_grad_close(grad_input.to(at::kDouble).masked_fill(finite.logical_not(), 0.0),
                        ref.masked_fill(finite.logical_not(), 0.0), x, grad, dtype,
                        std::string(activation::backward_op_name(a)) + " " + dtype_label(dtype));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, Backward, ::testing::ValuesIn(testing::targets_to_test()),
                         testing::TargetParamName);

// ------------------------------------------------------------------ refusals

TEST(BackwardErrors, GatedActivationsNameTheArgument) {
  const auto silu = activation::Activation::kSilu;
  const at::Tensor x = at::randn({4, 8});
  const at::Tensor grad = at::randn({4, 4});
  struct Bad {
    at::Tensor grad, x, grad_input;
    const char* says;
  } cases[] = {
      {at::randn({4, 5}), x, at::empty({4, 8}), "grad_output shape [4, 5] must be input's"},
      {grad, at::randn({4, 7}), at::empty({4, 7}), "input's last dim must be even"},
      {grad, x, at::empty({4, 6}), "grad_input shape [4, 6] must equal input's [4, 8]"},
      {grad.to(at::kBFloat16), x, at::empty({4, 8}), "grad_output"},
      {grad, x, x, "grad_input overlaps input"},
      {grad, x, at::randn({4, 1}).expand({4, 8}), "grad_input"},
  };
  for (const Bad& c : cases) {
    const TorchView gv(c.grad), xv(c.x), giv(c.grad_input);
    const Status s = activation::backward_cpu(silu, gv, xv, giv);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << c.says;
    EXPECT_NE(s.message.find(c.says), std::string::npos) << s.message;
    EXPECT_NE(s.message.find("silu_and_mul_backward"), std::string::npos) << s.message;
  }
}

}  // namespace
}  // namespace backplane

// The CPU layer kernels' backward against LibTorch autograd of their composites, run in float64
// from the same (already rounded) inputs and output gradients, over shapes, layouts and dtypes,
// on every SIMD target Highway compiled that this CPU runs.
//   *_and_mul_backward: autograd of at::silu / at::gelu (erf or tanh) of the first half times
//                       the second
// A gradient is rounded once to the dtype: within one unit in the last place of the exact value,
// plus float32 noise relative to the products it is made of (|grad_output * up|).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "per_target.hpp"
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
    {{1, 2}, GatedCase::kCompact},       {{1, 14}, GatedCase::kCompact},
    {{3, 32}, GatedCase::kCompact},      {{5, 200}, GatedCase::kCompact},
    {{300, 66}, GatedCase::kPaddedRows}, {{2, 3, 34}, GatedCase::kCompact},
    {{3, 4, 50}, GatedCase::kPermuted},  {{4, 22016}, GatedCase::kCompact},
    {{64, 8192}, GatedCase::kCompact},   {{128, 1026}, GatedCase::kPaddedRows},
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
  const double rtol = dtype == at::kFloat ? 2e-5 : dtype == at::kBFloat16 ? 8e-3 : 1e-3;
  expect_close(ours, ref, rtol, 1e-6 * size + (dtype == at::kFloat ? 1e-6 : 1e-5), what);
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

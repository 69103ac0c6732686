// Every CPU backward kernel against central differences of its own forward kernel, in float32
// (no kernel takes float64): for a loss L = <w, forward(x)> summed in float64, the analytic
// directional derivative <grad_x, dx> from the backward (its grad_output w) against
// (L(x + dx) - L(x - dx)) / 2, with dx a random direction of step 1e-2 per element, taken as
// the float32 values x +- dx really hold. This checks the backward against the forward it
// belongs to, not against a reference written beside it (attention_backward_test and
// layer_backward_libtorch_test do that). The error is normalized by the spread of <grad_x, dx>
// over random directions (|grad_x| times dx's RMS): central differences of step h are off by
// O(h^2) and float32 rounding of L adds O(eps / h), up to 1.3e-4 here, while a gradient 1% off
// is off by about 1e-2 and a wrong or missing term by O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "attention/attention.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"

namespace backplane {
namespace {

constexpr double kStep = 1e-2;
constexpr double kTolerance = 1e-3;

// A compact float32 host tensor with its DLPack view (strides null: compact).
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
  DLTensor dl{};

  explicit Tensor(std::vector<int64_t> dims) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    data.assign(static_cast<size_t>(n), 0.0f);
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = {kDLFloat, 32, 1};
    dl.shape = shape.data();
  }
  Tensor(const Tensor& other) : Tensor(other.shape) { data = other.data; }
  Tensor& operator=(const Tensor&) = delete;

  void randomize(std::mt19937& rng, float mean = 0.0f, float spread = 1.0f) {
    std::normal_distribution<float> normal(mean, spread);
    for (float& x : data) x = normal(rng);
  }
};

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

double norm(const std::vector<float>& a) {
  return std::sqrt(dot(a, a));
}

// `loss` evaluates L with `x` as it is now; checks <gradient, dx> against the central difference
// along two random directions and returns the worse normalized error.
double directional_error(Tensor& x, const std::vector<float>& gradient,
                         const std::function<double()>& loss, std::mt19937& rng) {
  const std::vector<float> original = x.data;
  double worst = 0.0;
  for (int direction = 0; direction < 2; ++direction) {
    std::normal_distribution<double> normal(0.0, kStep);
    std::vector<float> plus(original.size()), minus(original.size()), step(original.size());
    for (size_t i = 0; i < original.size(); ++i) {
      const double d = normal(rng);
      plus[i] = static_cast<float>(original[i] + d);
      minus[i] = static_cast<float>(original[i] - d);
      step[i] = static_cast<float>((static_cast<double>(plus[i]) - minus[i]) / 2.0);
    }
    x.data = plus;
    const double up = loss();
    x.data = minus;
    const double down = loss();
    x.data = original;
    const double numeric = (up - down) / 2.0;
    const double analytic = dot(gradient, step);
    // The spread of <gradient, dx> over random directions: |gradient| times dx's RMS.
    const double scale = norm(gradient) * norm(step) / std::sqrt(static_cast<double>(step.size()));
    const double error =
        scale > 0.0 ? std::fabs(numeric - analytic) / scale : std::fabs(numeric - analytic);
    worst = std::max(worst, error);
  }
  std::printf("  normalized error %.2e\n", worst);
  return worst;
}

// ---- RMSNorm (and its fused residual add) ----

struct RmsNormCase {
  const char* name;
  int64_t rows, hidden;
  bool residual;
};

class RmsNormFiniteDifference : public ::testing::TestWithParam<RmsNormCase> {};

TEST_P(RmsNormFiniteDifference, BackwardIsTheForwardsDerivative) {
  const RmsNormCase c = GetParam();
  const double eps = 1e-6;
  std::mt19937 rng(5);
  Tensor input({c.rows, c.hidden}), weight({c.hidden}), residual({c.rows, c.hidden});
  Tensor w({c.rows, c.hidden}), u({c.rows, c.hidden});
  input.randomize(rng);
  weight.randomize(rng, 1.0f, 0.3f);
  residual.randomize(rng);
  w.randomize(rng);
  u.randomize(rng);  // the gradient reaching the updated residual from later layers

  // L = <w, out> (+ <u, residual + input>): the forward on copies, so inputs stay as they are.
  auto loss = [&] {
    Tensor x(input), r(residual), out({c.rows, c.hidden});
    rmsnorm::Tensors t{&x.dl, &weight.dl, c.residual ? &r.dl : nullptr, &out.dl};
    const rmsnorm::Status s = rmsnorm::forward_cpu(t, eps);
    EXPECT_TRUE(s.ok()) << s.message;
    return dot(w.data, out.data) + (c.residual ? dot(u.data, r.data) : 0.0);
  };

  // The rows the forward normalized: the input, or the updated residual.
  Tensor x(input);
  if (c.residual) {
    for (size_t i = 0; i < x.data.size(); ++i) x.data[i] += residual.data[i];
  }
  Tensor grad_input({c.rows, c.hidden}), grad_weight({c.hidden});
  const rmsnorm::BackwardTensors b{
      &w.dl, &x.dl, &weight.dl, c.residual ? &u.dl : nullptr, &grad_input.dl, &grad_weight.dl};
  const rmsnorm::Status s = rmsnorm::backward_cpu(b, eps);
  ASSERT_TRUE(s.ok()) << s.message;

  EXPECT_LE(directional_error(input, grad_input.data, loss, rng), kTolerance) << "grad_input";
  EXPECT_LE(directional_error(weight, grad_weight.data, loss, rng), kTolerance) << "grad_weight";
  if (c.residual) {
    // The residual before the add reaches the loss as the input does.
    EXPECT_LE(directional_error(residual, grad_input.data, loss, rng), kTolerance)
        << "grad_input as the residual's gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RmsNormFiniteDifference,
                         ::testing::Values(RmsNormCase{"rows7_hidden96", 7, 96, false},
                                           RmsNormCase{"rows5_hidden333", 5, 333, false},
                                           RmsNormCase{"residual_rows6_hidden128", 6, 128, true}),
                         [](const auto& p) { return std::string(p.param.name); });

// ---- The gated activations ----

class ActivationFiniteDifference : public ::testing::TestWithParam<activation::Activation> {};

TEST_P(ActivationFiniteDifference, BackwardIsTheForwardsDerivative) {
  const activation::Activation a = GetParam();
  const int64_t rows = 9, d = 77;
  std::mt19937 rng(7);
  Tensor input({rows, 2 * d}), w({rows, d}), grad_input({rows, 2 * d});
  input.randomize(rng, 0.0f, 2.0f);  // both sides of the activations' bends
  w.randomize(rng);
  auto loss = [&] {
    Tensor out({rows, d});
    const activation::Status s = activation::forward_cpu(a, &input.dl, &out.dl);
    EXPECT_TRUE(s.ok()) << s.message;
    return dot(w.data, out.data);
  };
  const activation::Status s = activation::backward_cpu(a, &w.dl, &input.dl, &grad_input.dl);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_LE(directional_error(input, grad_input.data, loss, rng), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Activations, ActivationFiniteDifference,
                         ::testing::Values(activation::Activation::kSilu,
                                           activation::Activation::kGelu,
                                           activation::Activation::kGeluTanh),
                         [](const auto& p) { return std::string(activation::op_name(p.param)); });

// ---- Rotary (neox and interleaved, full and partial rotary dims) ----

struct RotaryCase {
  const char* name;
  rotary::Style style;
  int64_t rotary_dim;
};

class RotaryFiniteDifference : public ::testing::TestWithParam<RotaryCase> {};

TEST_P(RotaryFiniteDifference, BackwardIsTheForwardsDerivative) {
  const RotaryCase c = GetParam();
  const int64_t batch = 2, heads_q = 4, heads_k = 2, seq = 11, head_dim = 32;
  std::mt19937 rng(11);
  Tensor query({batch, heads_q, seq, head_dim}), key({batch, heads_k, seq, head_dim});
  Tensor cos({seq, c.rotary_dim / 2}), sin({seq, c.rotary_dim / 2});
  for (int64_t p = 0; p < seq; ++p) {
    for (int64_t i = 0; i < c.rotary_dim / 2; ++i) {
      const double angle =
          static_cast<double>(p) *
          std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(c.rotary_dim));
      cos.data[static_cast<size_t>(p * (c.rotary_dim / 2) + i)] =
          static_cast<float>(std::cos(angle));
      sin.data[static_cast<size_t>(p * (c.rotary_dim / 2) + i)] =
          static_cast<float>(std::sin(angle));
    }
  }
  query.randomize(rng);
  key.randomize(rng);
  Tensor wq({batch, heads_q, seq, head_dim}), wk({batch, heads_k, seq, head_dim});
  wq.randomize(rng);
  wk.randomize(rng);
  auto loss = [&] {
    Tensor q(query), k(key);
    const rotary::Status s = rotary::forward_cpu({&q.dl, &k.dl, &cos.dl, &sin.dl}, c.style);
    EXPECT_TRUE(s.ok()) << s.message;
    return dot(wq.data, q.data) + dot(wk.data, k.data);
  };
  Tensor grad_q(wq), grad_k(wk);  // the backward rotates the gradients back in place
  const rotary::Status s =
      rotary::backward_cpu({&grad_q.dl, &grad_k.dl, &cos.dl, &sin.dl}, c.style);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_LE(directional_error(query, grad_q.data, loss, rng), kTolerance) << "grad_query";
  EXPECT_LE(directional_error(key, grad_k.data, loss, rng), kTolerance) << "grad_key";
}

INSTANTIATE_TEST_SUITE_P(
    Styles, RotaryFiniteDifference,
    ::testing::Values(RotaryCase{"neox", rotary::Style::kNeox, 32},
                      RotaryCase{"neox_partial", rotary::Style::kNeox, 16},
                      RotaryCase{"interleaved", rotary::Style::kInterleaved, 32},
                      RotaryCase{"interleaved_partial", rotary::Style::kInterleaved, 16}),
    [](const auto& p) { return std::string(p.param.name); });

// ---- Attention (sdpa forward; causal bottom-right, masks, GQA) ----

enum class Mask { kNone, kBool, kAdditive };

struct AttentionCase {
  const char* name;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim_v;
  bool causal;
  Mask mask;
};

class AttentionFiniteDifference : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionFiniteDifference, BackwardIsTheForwardsDerivative) {
  const AttentionCase c = GetParam();
  std::mt19937 rng(13);
  Tensor query({c.batch, c.heads_q, c.seq_q, c.head_dim});
  Tensor key({c.batch, c.heads_kv, c.seq_k, c.head_dim});
  Tensor value({c.batch, c.heads_kv, c.seq_k, c.head_dim_v});
  Tensor w({c.batch, c.heads_q, c.seq_q, c.head_dim_v});
  for (Tensor* t : {&query, &key, &value, &w}) t->randomize(rng);

  // Bool: about a quarter of the keys hidden, query row 0 seeing none; additive: biases.
  std::vector<uint8_t> keep;
  std::vector<int64_t> mask_shape = {c.batch, 1, c.seq_q, c.seq_k};
  DLTensor bool_mask{};
  Tensor additive({c.seq_q, c.seq_k});
  const DLTensor* mask = nullptr;
  if (c.mask == Mask::kBool) {
    keep.resize(static_cast<size_t>(c.batch * c.seq_q * c.seq_k));
    std::bernoulli_distribution kept(0.75);
    for (size_t i = 0; i < keep.size(); ++i) {
      keep[i] =
          (i / static_cast<size_t>(c.seq_k)) % static_cast<size_t>(c.seq_q) == 0 ? 0 : kept(rng);
    }
    bool_mask.data = keep.data();
    bool_mask.device = {kDLCPU, 0};
    bool_mask.ndim = 4;
    bool_mask.dtype = {6 /* kDLBool, past this DLPack's enum */, 8, 1};
    bool_mask.shape = mask_shape.data();
    mask = &bool_mask;
  } else if (c.mask == Mask::kAdditive) {
    additive.randomize(rng, -1.0f, 1.0f);
    mask = &additive.dl;
  }
  attention::Options options;
  options.causal = c.causal;

  auto loss = [&] {
    Tensor out({c.batch, c.heads_q, c.seq_q, c.head_dim_v});
    const attention::Status s =
        attention::forward({&query.dl, &key.dl, &value.dl, mask, &out.dl, nullptr}, options);
    EXPECT_TRUE(s.ok()) << s.message;
    return dot(w.data, out.data);
  };

  Tensor out({c.batch, c.heads_q, c.seq_q, c.head_dim_v}), lse({c.batch, c.heads_q, c.seq_q});
  attention::Status s =
      attention::forward({&query.dl, &key.dl, &value.dl, mask, &out.dl, &lse.dl}, options);
  ASSERT_TRUE(s.ok()) << s.message;
  Tensor grad_q(query.shape), grad_k(key.shape), grad_v(value.shape);
  s = attention::backward({&query.dl, &key.dl, &value.dl, mask, &out.dl, &lse.dl, &w.dl, &grad_q.dl,
                           &grad_k.dl, &grad_v.dl},
                          options);
  ASSERT_TRUE(s.ok()) << s.message;

  EXPECT_LE(directional_error(query, grad_q.data, loss, rng), kTolerance) << "grad_query";
  EXPECT_LE(directional_error(key, grad_k.data, loss, rng), kTolerance) << "grad_key";
  EXPECT_LE(directional_error(value, grad_v.data, loss, rng), kTolerance) << "grad_value";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionFiniteDifference,
    ::testing::Values(
        AttentionCase{"mha_37x53", 1, 2, 2, 37, 53, 32, 32, false, Mask::kNone},
        AttentionCase{"gqa_causal_prefill", 1, 4, 2, 70, 70, 64, 64, true, Mask::kNone},
        AttentionCase{"causal_bottom_right_chunk", 1, 2, 1, 19, 81, 32, 32, true, Mask::kNone},
        AttentionCase{"bool_mask_empty_row", 2, 2, 2, 23, 40, 32, 32, false, Mask::kBool},
        AttentionCase{"additive_mask_causal", 1, 3, 1, 33, 33, 48, 48, true, Mask::kAdditive},
        AttentionCase{"value_head_dim_differs", 1, 2, 2, 17, 29, 64, 40, false, Mask::kNone}),
    [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace backplane

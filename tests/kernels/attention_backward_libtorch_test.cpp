// The attention backward against LibTorch autograd (the torch wheel of the oracle venv) over the
// whole case table: the composite softmax(scale Q K^T + mask) V in float64 on the same rounded
// inputs, differentiated by autograd; and the forward's logsumexp against LibTorch's own fused
// CPU flash attention (at::_scaled_dot_product_flash_attention_for_cpu), whose backward reads
// the same quantity.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_testing.hpp"

namespace backplane::attention {
namespace {

using testing::Case;
using testing::HostTensor;
using testing::Instance;
using testing::MaskType;
using testing::rel_error;
using testing::tolerance;
using testing::Training;
using DType = cpu::DType;

// The logical values of a host tensor as a float64 LibTorch tensor of its shape.
at::Tensor as_double(const HostTensor& t) {
  const std::vector<float> v = t.logical();
  return at::from_blob(const_cast<float*>(v.data()), t.shape(), at::kFloat).to(at::kDouble);
}

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

struct Reference {
  std::vector<double> lse, dq, dk, dv;
};

// Autograd of the float64 composite. The mask (with the bottom-right causal limit folded in)
// is a dense additive float64 bias; rows that see no key take _safe_softmax's zeros, as the
// kernels' do.
Reference torch_reference(const Instance& in, const HostTensor& dout) {
  const Case& c = in.c;
  const at::Tensor q = as_double(in.q).requires_grad_(true);
  const at::Tensor k = as_double(in.k).requires_grad_(true);
  const at::Tensor v = as_double(in.v).requires_grad_(true);
  const int64_t group = c.heads_q / c.heads_kv;
  cpu::Problem p;
  EXPECT_TRUE(cpu::make_problem(in.tensors(), in.options(Implementation::kEager), &p).ok());
  std::vector<double> bias(static_cast<size_t>(c.batch * c.heads_q * c.seq_q * c.seq_k), 0.0);
  size_t idx = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads_q; ++h)
      for (int64_t i = 0; i < c.seq_q; ++i)
        for (int64_t j = 0; j < c.seq_k; ++j, ++idx) {
          double x = in.has_mask ? cpu::mask_bias(p, b, h, i, j) : 0.0;
          if (c.causal && j > i + c.seq_k - c.seq_q) x = -INFINITY;
          bias[idx] = x;
        }
  const at::Tensor mask =
      at::from_blob(bias.data(), {c.batch, c.heads_q, c.seq_q, c.seq_k}, at::kDouble);
  const at::Tensor kk = k.repeat_interleave(group, 1), vv = v.repeat_interleave(group, 1);
  const at::Tensor scores =
      at::matmul(q, kk.transpose(-2, -1)) * static_cast<double>(p.scale) + mask;
  const at::Tensor out = at::matmul(at::_safe_softmax(scores, -1), vv);
  const auto grads = torch::autograd::grad({out}, {q, k, v}, {as_double(dout)});
  Reference r;
  r.lse = to_vector(at::logsumexp(scores.detach(), -1));
  r.dq = to_vector(grads[0]);
  r.dk = to_vector(grads[1]);
  r.dv = to_vector(grads[2]);
  return r;
}

class AgainstAutograd : public ::testing::TestWithParam<Case> {};

TEST_P(AgainstAutograd, GradientsAndLogsumexpMatch) {
  const Case& c = GetParam();
  Training t(c);
  const Status s = t.run();
  ASSERT_TRUE(s.ok()) << s.message;
  const Reference ref = torch_reference(t.in, t.dout);
  const double tol = tolerance(c.dtype);
  const double eq = rel_error(t.dq.logical(), ref.dq), ek = rel_error(t.dk.logical(), ref.dk);
  const double ev = rel_error(t.dv.logical(), ref.dv);
  EXPECT_LE(eq, tol) << "grad_query";
  EXPECT_LE(ek, tol) << "grad_key";
  EXPECT_LE(ev, tol) << "grad_value";
  std::printf("%-36s rel. errors: grad_query %.2e grad_key %.2e grad_value %.2e\n", c.name.c_str(),
              eq, ek, ev);
  const std::vector<float> lse = t.lse.logical();
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      ASSERT_EQ(lse[i], -INFINITY) << "row " << i;
    } else {
      ASSERT_NEAR(lse[i], ref.lse[i], 2e-5 * (1.0 + std::fabs(ref.lse[i]))) << "row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, AgainstAutograd, ::testing::ValuesIn(testing::case_table()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// LibTorch's fused CPU attention returns the logsumexp its backward reads; ours is the same
// quantity (its is_causal is top-left aligned: equal seq lengths here).
TEST(AttentionLogsumexp, EqualsLibTorchFlashAttention) {
  for (const Case& c : {Case{"f32_causal", 2, 4, 4, 130, 130, 64, true, DType::kF32},
                        Case{"bf16_full", 1, 8, 8, 77, 77, 128, false, DType::kBF16}}) {
    Training t(c);
    ASSERT_TRUE(t.run().ok());
    const at::ScalarType st = c.dtype == DType::kF32 ? at::kFloat : at::kBFloat16;
    const auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
        as_double(t.in.q).to(st), as_double(t.in.k).to(st), as_double(t.in.v).to(st), 0.0,
        c.causal);
    ASSERT_EQ(lse.sizes(), at::IntArrayRef({c.batch, c.heads_q, c.seq_q})) << c.name;
    const std::vector<double> theirs = to_vector(lse);
    const std::vector<float> ours = t.lse.logical();
    double worst = 0.0;
    for (size_t i = 0; i < ours.size(); ++i)
      worst = std::max(worst, std::fabs(ours[i] - theirs[i]));
    EXPECT_LE(worst, 1e-4) << c.name;
  }
}

}  // namespace
}  // namespace backplane::attention

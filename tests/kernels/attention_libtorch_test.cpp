// The case table against LibTorch's math attention (the newest LibTorch, from the torch wheel),
// computed in float32 on the same (already rounded) inputs. Both our implementations are checked.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
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
using DType = cpu::DType;

at::ScalarType scalar_type(const DLTensor& t) {
  if (t.dtype.bits == 8) return at::kBool;
  if (t.dtype.code == kDLBfloat) return at::kBFloat16;
  return t.dtype.bits == 32 ? at::kFloat : at::kHalf;
}

// A zero-copy LibTorch view of a host tensor (strides and all).
at::Tensor view(HostTensor& t) {
  const DLTensor& dl = *t.dl();
  return at::from_blob(t.data(), t.shape(), t.strides(),
                       at::TensorOptions().dtype(scalar_type(dl)));
}

std::vector<float> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kFloat).contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

struct Reference {
  std::vector<float> out;
  std::vector<float> dense_mask;  // keeps the float mask handed to LibTorch alive
};

// LibTorch's math attention in float32. Masks reach it as F.scaled_dot_product_attention hands
// them over: additive float (a boolean mask becomes 0 / -inf first; _math itself would add
// booleans as 0 / 1). LibTorch's is_causal is aligned top-left, so a causal case with
// seq_q != seq_k (or with a mask) folds the bottom-right causal mask in.
Reference torch_math(Instance& in) {
  const Case& c = in.c;
  Reference ref;
  const at::Tensor q = view(in.q).to(at::kFloat);
  const at::Tensor k = view(in.k).to(at::kFloat);
  const at::Tensor v = view(in.v).to(at::kFloat);
  std::optional<at::Tensor> mask;
  bool is_causal = false;
  if (c.causal && c.mask == MaskType::kNone && c.seq_q == c.seq_k) {
    is_causal = true;
  } else if (c.causal || c.mask != MaskType::kNone) {
    ref.dense_mask.assign(static_cast<size_t>(c.batch * c.heads_q * c.seq_q * c.seq_k), 0.0f);
    cpu::Problem p;
    const Status s = cpu::make_problem(in.tensors(), in.options(Implementation::kEager), &p);
    EXPECT_TRUE(s.ok()) << s.message;
    size_t idx = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads_q; ++h)
        for (int64_t i = 0; i < c.seq_q; ++i)
          for (int64_t j = 0; j < c.seq_k; ++j, ++idx) {
            float bias = in.has_mask ? cpu::mask_bias(p, b, h, i, j) : 0.0f;
            if (c.causal && j > i + c.seq_k - c.seq_q) bias = -INFINITY;
            ref.dense_mask[idx] = bias;
          }
    mask = at::from_blob(ref.dense_mask.data(), {c.batch, c.heads_q, c.seq_q, c.seq_k},
                         at::TensorOptions(at::kFloat));
  }
  const at::Tensor out = std::get<0>(at::_scaled_dot_product_attention_math(
      q, k, v, mask, 0.0, is_causal, std::nullopt, std::nullopt, c.heads_q != c.heads_kv));
  ref.out = to_vector(out);
  return ref;
}

class AgainstLibTorch : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { at::set_num_threads(num_threads()); }
};

TEST_P(AgainstLibTorch, EagerAndSdpaMatchMathAttention) {
  const Case& c = GetParam();
  Instance in(c);
  const Reference ref = torch_math(in);
  for (Implementation impl : {Implementation::kEager, Implementation::kSdpa}) {
    const Status s = forward(in.tensors(), in.options(impl));
    ASSERT_TRUE(s.ok()) << s.message;
    const double err = rel_error(in.out.logical(), ref.out);
    EXPECT_LE(err, tolerance(c.dtype)) << implementation_name(impl);
    RecordProperty(std::string("rel_error_") + implementation_name(impl), std::to_string(err));
  }
}

INSTANTIATE_TEST_SUITE_P(Table, AgainstLibTorch, ::testing::ValuesIn(testing::case_table()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Fully masked rows: LibTorch's fused CPU kernel (at::scaled_dot_product_attention, given the
// boolean mask itself) and its math path give zeros; so do we.
TEST(AgainstLibTorchFused, FullyMaskedRowsAreZeroEverywhere) {
  for (DType t : {DType::kF32, DType::kBF16}) {
    Instance in(Case{"m", 1, 2, 2, 6, 40, 64, false, t, MaskType::kBool, {6, 40}});
    for (int64_t j = 0; j < 40; ++j) in.mask.set(in.mask.offset({3, j}), 0.0f);
    const at::Tensor fused =
        at::scaled_dot_product_attention(view(in.q), view(in.k), view(in.v), view(in.mask));
    const std::vector<float> torch_out = to_vector(fused);
    const Reference math = torch_math(in);
    ASSERT_TRUE(forward(in.tensors()).ok());
    const std::vector<float> ours = in.out.logical();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t d = 0; d < 64; ++d) {
        const size_t i = static_cast<size_t>((h * 6 + 3) * 64 + d);
        EXPECT_EQ(torch_out[i], 0.0f);
        EXPECT_EQ(math.out[i], 0.0f);
        EXPECT_EQ(ours[i], 0.0f);
      }
    EXPECT_LE(rel_error(ours, torch_out), tolerance(t));
  }
}

}  // namespace
}  // namespace backplane::attention

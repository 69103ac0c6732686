// Each CPU layer kernel against its LibTorch composite, computed in float64 from the same
// (already rounded) inputs (LibTorch's own float32 erf is good to 1.5e-7 absolute only), over a
// table of shapes and layouts, for float32, bfloat16 and float16, on every SIMD target Highway
// compiled that this CPU runs.
//   rms_norm:  transformers' LlamaRMSNorm (x * rsqrt(mean(x^2) + eps) * weight), with the
//              residual add of vLLM's fused_add_rms_norm
//   *_and_mul: at::silu / at::gelu (erf or tanh) of the first half times the second
//   rotary:    transformers' apply_rotary_pos_emb (rotate_half) and GPT-J's rotate_every_two
// A result rounded once to bfloat16 / float16 is within one unit in the last place of the
// exact value: tolerances are that, plus float32 noise.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "common/bf16_instruction.hpp"
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
using testing::PerTarget;
using testing::rotary_composite;
using testing::TargetParamName;
using testing::targets_to_test;
using testing::TorchView;

// ------------------------------------------------------------------ rms_norm

struct NormCase {
  std::vector<int64_t> shape;  // input
  bool residual;
  enum Layout { kCompact, kRowPadding, kPermuted, kInPlace } layout;
};

const NormCase kNormCases[] = {
    {{1, 1}, false, NormCase::kCompact},        {{1, 7}, false, NormCase::kCompact},
    {{3, 17}, false, NormCase::kCompact},       {{5, 4096}, false, NormCase::kCompact},
    {{257, 33}, false, NormCase::kCompact},     {{512, 1024}, false, NormCase::kCompact},
    {{2048, 1024}, false, NormCase::kCompact},  // 8 MiB of float32 output: streamed
    {{4096, 1032}, false, NormCase::kCompact},  // 8 MiB of 16-bit output: streamed
    {{64, 1000}, false, NormCase::kRowPadding}, {{3, 2, 129}, false, NormCase::kPermuted},
    {{9, 31}, false, NormCase::kInPlace},       {{1, 5}, true, NormCase::kCompact},
    {{7, 100}, true, NormCase::kCompact},       {{384, 1024}, true, NormCase::kRowPadding},
    {{4, 3, 65}, true, NormCase::kPermuted},    {{33, 257}, true, NormCase::kInPlace},
};

// A tensor of `shape` in the case's layout (values standard normal, rounded to dtype).
at::Tensor make_input(const std::vector<int64_t>& shape, NormCase::Layout layout,
                      at::ScalarType dtype) {
  if (layout == NormCase::kRowPadding) {
    std::vector<int64_t> wide = shape;
    wide.back() += 13;
    return at::randn(wide).to(dtype).narrow(-1, 0, shape.back());
  }
  if (layout == NormCase::kPermuted) {  // leading dims swapped: rows not in memory order
    std::vector<int64_t> swapped = shape;
    std::swap(swapped[0], swapped[1]);
    return at::randn(swapped).to(dtype).transpose(0, 1);
  }
  return at::randn(shape).to(dtype);
}

TEST_P(PerTarget, RmsNormMatchesTheComposite) {
  EXPECT_STREQ(rmsnorm::cpu_target(), target_name());
  const double eps = 1e-6;
  for (const NormCase& c : kNormCases) {
    for (at::ScalarType dtype : kDTypes) {
      const std::string what = "rms_norm " + std::string(c.residual ? "+residual " : "") +
                               c10::str(at::IntArrayRef(c.shape)) + " layout " +
                               std::to_string(c.layout) + " " + dtype_label(dtype);
      SCOPED_TRACE(what);
      const at::Tensor x = make_input(c.shape, c.layout, dtype);
      const at::Tensor w = at::randn({c.shape.back()}).to(dtype);
      const at::Tensor res = c.residual ? make_input(c.shape, c.layout, dtype) : at::Tensor();
      // The composite, from copies taken before the kernel changes anything.
      at::Tensor h = x.to(at::kDouble);
      at::Tensor res_ref;
      if (c.residual) {
        res_ref = (h + res.to(at::kDouble)).to(dtype);  // the sum as the residual stores it
        h = res_ref.to(at::kDouble);
      }
      const at::Tensor ref =
          h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps) * w.to(at::kDouble);

      const at::Tensor out = c.layout == NormCase::kInPlace ? x : at::empty_like(x);
      const TorchView xv(x), wv(w), ov(out), rv(res);
      rmsnorm::Tensors t;
      t.input = xv;
      t.weight = wv;
      t.output = ov;
      if (c.residual) t.residual = rv;
      const Status s = rmsnorm::forward_cpu(t, eps);
      ASSERT_TRUE(s.ok()) << s.message;
      expect_close(out, ref, dtype, what);
      if (c.residual) expect_close(res, res_ref, dtype, what + " (residual)");
    }
  }
}

TEST_P(PerTarget, RmsNormMatchesLibTorchsFusedOp) {
  // at::rms_norm (LibTorch's own op) in float32: the same definition as the composite.
  const at::Tensor x = at::randn({37, 300});
  const at::Tensor w = at::randn({300});
  const at::Tensor out = at::empty_like(x);
  const TorchView xv(x), wv(w), ov(out);
  ASSERT_TRUE(rmsnorm::forward_cpu({xv, wv, nullptr, ov}, 1e-5).ok());
  expect_close(out, at::rms_norm(x, {300}, w, 1e-5), at::kFloat, "at::rms_norm");
}

// ------------------------------------------------------------------ gated activations

struct ActivationCase {
  std::vector<int64_t> shape;  // input, last dim 2 * d
  bool padded_rows;
};

const ActivationCase kActivationCases[] = {
    {{1, 2}, false},     {{1, 14}, false},      {{3, 32}, false},
    {{5, 200}, false},   {{300, 66}, true},     {{2, 3, 34}, false},
    {{4, 22016}, false}, {{1024, 8192}, false}, {{512, 1026}, true},
};

const activation::Activation kActivations[] = {activation::Activation::kSilu,
                                               activation::Activation::kGelu,
                                               activation::Activation::kGeluTanh};

at::Tensor composite(activation::Activation a, const at::Tensor& x) {
  const int64_t d = x.size(-1) / 2;
  const at::Tensor gate = x.narrow(-1, 0, d).to(at::kDouble);
  const at::Tensor up = x.narrow(-1, d, d).to(at::kDouble);
  switch (a) {
    case activation::Activation::kSilu:
      return at::silu(gate) * up;
    case activation::Activation::kGelu:
      return at::gelu(gate) * up;
    case activation::Activation::kGeluTanh:
      return at::gelu(gate, "tanh") * up;
  }
  return {};
}

TEST_P(PerTarget, GatedActivationsMatchTheComposite) {
  EXPECT_STREQ(activation::cpu_target(), target_name());
  for (const ActivationCase& c : kActivationCases) {
    for (activation::Activation a : kActivations) {
      for (at::ScalarType dtype : kDTypes) {
        const std::string what = std::string(activation::op_name(a)) + " " +
                                 c10::str(at::IntArrayRef(c.shape)) +
                                 (c.padded_rows ? " padded rows " : " ") + dtype_label(dtype);
        SCOPED_TRACE(what);
        std::vector<int64_t> alloc = c.shape;
        if (c.padded_rows) alloc.back() += 6;
        // Wide values reach both tails of each activation.
        const at::Tensor x = (at::randn(alloc) * 4).to(dtype).narrow(-1, 0, c.shape.back());
        std::vector<int64_t> out_shape = c.shape;
        out_shape.back() /= 2;
        const at::Tensor out = at::empty(out_shape, x.options());
        const TorchView xv(x), ov(out);
        const Status s = activation::forward_cpu(a, xv, ov);
        ASSERT_TRUE(s.ok()) << s.message;
        expect_close(out, composite(a, x), dtype, what);
      }
    }
  }
}

TEST_P(PerTarget, GatedActivationsAtTheExtremes) {
  // Large magnitudes and zeros: no overflow to NaN or inf inside the kernels.
  const at::Tensor gate = at::tensor({-1e30f, -200.f, -90.f, -20.f, -5.f, -1e-20f, 0.f, 1e-20f, 3.f,
                                      20.f, 90.f, 200.f, 1e30f, -1e4f, 1e4f, 0.5f});
  // bfloat16 runs the coarser sigmoid (activation.cpp): unclamped on AVX-512, clamped elsewhere.
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = at::cat({gate, at::ones({16})}).reshape({1, 32}).to(dtype);
    for (activation::Activation a : kActivations) {
      const at::Tensor out = at::empty({1, 16}, x.options());
      const TorchView xv(x), ov(out);
      ASSERT_TRUE(activation::forward_cpu(a, xv, ov).ok());
      expect_close(out, composite(a, x), dtype,
                   std::string(activation::op_name(a)) + " " + dtype_label(dtype));
    }
  }
}

// The bfloat16 sigmoid is coarser than float32's (activation.cpp): every bfloat16 gate value in
// [-88, 88], up 1, must still land within a bfloat16 step of the exact result, and round to
// nearest: within half a step of it plus the sigmoid's 4e-4 (0.1 of a step at most), where a
// truncation would reach a whole step (the ties go away from zero here, common/simd-inl.h).
// That is checked where the sigmoid is above 2^-120: below, off AVX-512, e^-y is held at 2^125
// (activation_math-inl.h), so the result is gate * 2^-125 instead of smaller. With AVX512-BF16's
// conversion a result below float32's normal range (2^-126) is a zero of its sign instead
// (common/bf16_instruction.hpp; Bf16Instruction.RoundsLikeThePortableSequence pins it).
TEST_P(PerTarget, Bf16SigmoidOverEveryGateValue) {
  const at::Tensor all = at::arange(0, 65536, at::kInt).to(at::kShort).view(at::kBFloat16);
  const at::Tensor gate = all.masked_select(all.to(at::kFloat).abs().le(88));
  ASSERT_GT(gate.numel(), 30000);
  const at::Tensor x = at::cat({gate, at::ones_like(gate)}).unsqueeze(0);
  for (activation::Activation a :
       {activation::Activation::kSilu, activation::Activation::kGeluTanh}) {
    const at::Tensor out = at::empty({1, gate.numel()}, x.options());
    const TorchView xv(x), ov(out);
    ASSERT_TRUE(activation::forward_cpu(a, xv, ov).ok());
    expect_close(out, composite(a, x), at::kBFloat16, activation::op_name(a));
    // In the sigmoid's form, which keeps its digits in the tails (torch's float64 tanh form
    // loses them to 1 + tanh: 28% off at gate -7.125).
    const at::Tensor g = gate.to(at::kDouble);
    const at::Tensor y = a == activation::Activation::kSilu
                             ? g
                             : 2 * 0.7978845608028654 * (g + 0.044715 * g.pow(3));  // sqrt(2/pi)
    const at::Tensor exact = g * at::sigmoid(y);
    const at::Tensor unclamped = exact.abs().gt(g.abs() * std::exp2(-120.0));
    const at::Tensor want = exact.masked_select(unclamped);
    // A bfloat16 step at the result: 8 bits below its leading one, 2^-133 among the subnormals.
    const at::Tensor step = at::exp2(at::clamp_min(at::floor(at::log2(want.abs())), -126) - 7);
    const at::Tensor got = out.to(at::kDouble).masked_select(unclamped);
    at::Tensor steps_off = (got - want).abs() / step;
    if (GetParam().bf16_instruction) {
      const at::Tensor below_normal = want.abs().lt(std::exp2(-126.0));
      ASSERT_GT(below_normal.sum().item<int64_t>(), 0) << "the gate values reach 2^-126";
      steps_off = steps_off.masked_fill(below_normal.logical_and(got.eq(0)), 0);
    }
    ASSERT_GT(want.numel(), 30000);
    const int64_t worst = steps_off.argmax().item<int64_t>();
    EXPECT_LE(steps_off.max().item<double>(), 0.6)
        << activation::op_name(a) << " at gate " << g.masked_select(unclamped)[worst].item<double>()
        << ": " << got[worst].item<double>() << " for " << want[worst].item<double>();
  }
}

// float32 silu to a few ulps, not just within the shared tolerance (2e-5): e^-y to 2e-7 and one
// division (activation_math-inl.h). Gate values every ~1e-4 of the way from -87.3 to 87.3,
// where the result is still a normal float, up 1.
TEST_P(PerTarget, F32SiluToAFewUlps) {
  const at::Tensor gate = at::linspace(-87.3, 87.3, 1 << 21, at::kDouble).to(at::kFloat);
  const at::Tensor x = at::cat({gate, at::ones_like(gate)}).unsqueeze(0);
  const at::Tensor out = at::empty({1, gate.numel()}, x.options());
  const TorchView xv(x), ov(out);
  ASSERT_TRUE(activation::forward_cpu(activation::Activation::kSilu, xv, ov).ok());
  expect_close(out, composite(activation::Activation::kSilu, x), 6e-7, 0.0, "silu_and_mul f32");
}

// ------------------------------------------------------------------ rotary embedding

struct RotaryCase {
  int64_t batch, heads_q, heads_k, seq, head_dim, rotary_dim;
  bool per_batch_table;  // cos [batch, seq, half] instead of [seq, half]
  bool seq_major;        // query and key stored [batch, seq, heads, head_dim]
  bool query_only;
};

const RotaryCase kRotaryCases[] = {
    {1, 1, 1, 1, 2, 2, false, false, false},   {2, 4, 2, 7, 64, 64, false, false, false},
    {1, 3, 1, 5, 24, 16, false, false, false}, {2, 2, 2, 9, 130, 130, true, false, false},
    {3, 2, 1, 6, 40, 40, true, true, false},   {1, 8, 8, 256, 128, 128, false, false, false},
    {2, 4, 4, 33, 96, 64, false, true, true},  {1, 5, 5, 3, 6, 6, false, false, true},
};

at::Tensor make_heads(const RotaryCase& c, int64_t heads, at::ScalarType dtype) {
  if (c.seq_major) return at::randn({c.batch, c.seq, heads, c.head_dim}).to(dtype).transpose(1, 2);
  return at::randn({c.batch, heads, c.seq, c.head_dim}).to(dtype);
}

TEST_P(PerTarget, RotaryMatchesTheComposite) {
  EXPECT_STREQ(rotary::cpu_target(), target_name());
  for (const RotaryCase& c : kRotaryCases) {
    for (rotary::Style style : {rotary::Style::kNeox, rotary::Style::kInterleaved}) {
      for (at::ScalarType dtype : kDTypes) {
        for (bool f32_table : {true, false}) {
          const std::string what =
              std::string(style == rotary::Style::kNeox ? "neox " : "interleaved ") + "b" +
              std::to_string(c.batch) + " hq" + std::to_string(c.heads_q) + " hk" +
              std::to_string(c.heads_k) + " s" + std::to_string(c.seq) + " d" +
              std::to_string(c.head_dim) + " rot" + std::to_string(c.rotary_dim) +
              (c.per_batch_table ? " per-batch" : "") + (c.seq_major ? " seq-major" : "") +
              (c.query_only ? " query-only " : " ") + dtype_label(dtype) +
              (f32_table ? " f32 table" : " table in dtype");
          SCOPED_TRACE(what);
          const int64_t half = c.rotary_dim / 2;
          const at::Tensor pos =
              at::arange(c.seq, at::kFloat).unsqueeze(-1).expand({c.seq, half}).clone();
          at::Tensor angles = pos * at::pow(10000.0, -at::arange(half, at::kFloat) * 2 /
                                                         static_cast<double>(c.rotary_dim));
          if (c.per_batch_table) {  // each batch at its own offset, as with left padding
            angles = at::stack({angles, angles + 3, angles + 11}).narrow(0, 0, c.batch);
          }
          const at::ScalarType table_type = f32_table ? at::kFloat : dtype;
          const at::Tensor cos = angles.cos().to(table_type), sin = angles.sin().to(table_type);
          const at::Tensor q = make_heads(c, c.heads_q, dtype);
          const at::Tensor k = make_heads(c, c.heads_k, dtype);
          const at::Tensor q_ref = rotary_composite(q, cos, sin, style);
          const at::Tensor k_ref = rotary_composite(k, cos, sin, style);
          const at::Tensor k_before = k.clone();
          const TorchView qv(q), kv(k), cv(cos), sv(sin);
          rotary::Tensors t;
          t.query = qv;
          t.key = c.query_only ? nullptr : kv.dl();
          t.cos = cv;
          t.sin = sv;
          const Status s = rotary::forward_cpu(t, style);
          ASSERT_TRUE(s.ok()) << s.message;
          expect_close(q, q_ref, dtype, what + " query");
          if (c.query_only) {
            EXPECT_TRUE(at::equal(k, k_before)) << what << ": key changed without being passed";
          } else {
            expect_close(k, k_ref, dtype, what + " key");
          }
        }
      }
    }
  }
}

// NaN stays NaN in every bfloat16 result: each of the 254 bfloat16 NaNs as an input, and the NaN
// that float32 math makes (inf * 0). Where every operand is bfloat16 the rounding has no NaN
// guard (common/simd-inl.h, NaNs::kFromBf16); a float32 rotary table keeps it, since a float32
// NaN's low payload bits would carry into the exponent (0x7fffffff rounds to -0).
TEST_P(PerTarget, Bf16NaNsStayNaN) {
  const at::Tensor every = at::arange(0, 65536, at::kInt).to(at::kShort).view(at::kBFloat16);
  const at::Tensor nans = every.masked_select(every.isnan());
  ASSERT_EQ(nans.numel(), 254);
  const int64_t n = nans.numel();
  auto same_nans = [](const at::Tensor& ours, const at::Tensor& ref, const std::string& what) {
    const at::Tensor want = ref.isnan();
    ASSERT_GT(want.sum().item<int64_t>(), 0) << what;
    EXPECT_TRUE(at::equal(ours.isnan(), want))
        << what << ": " << at::ne(ours.isnan(), want).sum().item<int64_t>() << " of "
        << ours.numel() << " elements differ in NaN-ness";
  };
  const at::TensorOptions bf16 = at::TensorOptions().dtype(at::kBFloat16);

  // Gated activations: gate NaN, up 1; gate 1, up NaN; gate 0, up +-inf; then finite values.
  const at::Tensor finite = at::randn({2 * n + 2}).to(at::kBFloat16);
  const at::Tensor gate = at::cat({nans, at::ones({n}, bf16), at::zeros({2}, bf16), finite});
  const at::Tensor up = at::cat(
      {at::ones({n}, bf16), nans, at::tensor({INFINITY, -INFINITY}).to(at::kBFloat16), finite});
  const at::Tensor x = at::cat({gate, up}).unsqueeze(0);
  for (activation::Activation a : kActivations) {
    const at::Tensor out = at::empty({1, gate.numel()}, bf16);
    const TorchView xv(x), ov(out);
    ASSERT_TRUE(activation::forward_cpu(a, xv, ov).ok());
    same_nans(out, composite(a, x), activation::op_name(a));
  }

  // rms_norm: a NaN anywhere in a row makes the whole row NaN, the residual's sum too.
  const at::Tensor rows = at::randn({n, 40}).to(at::kBFloat16);
  for (int64_t r = 0; r < n; ++r) rows[r][r % 40] = nans[r];
  const at::Tensor clean = rows.clone(), w = at::ones({40}, bf16);
  for (bool with_residual : {false, true}) {
    const at::Tensor in = with_residual ? at::randn({n, 40}).to(at::kBFloat16) : clean.clone();
    const at::Tensor res = clean.clone(), out = at::empty_like(in);
    const TorchView iv(in), wv(w), ov(out), rv(res);
    ASSERT_TRUE(rmsnorm::forward_cpu({iv, wv, with_residual ? rv.dl() : nullptr, ov}, 1e-6).ok());
    EXPECT_TRUE(out.isnan().all().item<bool>()) << "rms_norm, residual " << with_residual;
    if (with_residual) same_nans(res, clean, "rms_norm residual sum");
  }

  // Rotary: query NaNs; a float32 table with the NaN 0x7fffffff, a bfloat16 one with its own.
  const int64_t seq = 4, half = 64;
  const at::Tensor q0 = at::randn({1, 2, seq, 2 * half}).to(at::kBFloat16);
  q0.flatten().narrow(0, 0, n).copy_(nans);  // heads 0 and 1, rows 0 and 1
  const at::Tensor f32_nan = at::tensor({int32_t{0x7fffffff}}).view(at::kFloat);
  for (at::ScalarType table : {at::kFloat, at::kBFloat16}) {
    for (rotary::Style style : {rotary::Style::kNeox, rotary::Style::kInterleaved}) {
      at::Tensor cos = at::rand({seq, half}), sin = at::rand({seq, half});
      cos[3][5] = f32_nan[0];
      sin[3][40] = f32_nan[0];
      cos = cos.to(table);
      sin = sin.to(table);
      const at::Tensor q = q0.clone();
      const at::Tensor ref = rotary_composite(q, cos, sin, style);
      const TorchView qv(q), cv(cos), sv(sin);
      rotary::Tensors t;
      t.query = qv;
      t.cos = cv;
      t.sin = sv;
      ASSERT_TRUE(rotary::forward_cpu(t, style).ok());
      same_nans(q, ref,
                std::string("rotary ") + (style == rotary::Style::kNeox ? "neox" : "interleaved") +
                    ", table " + dtype_label(table));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, PerTarget, ::testing::ValuesIn(targets_to_test()),
                         TargetParamName);

// The instruction and the portable sequence give the same bits, except that the instruction
// turns a float32 subnormal result into a zero of the same sign (common/bf16_instruction.hpp).
TEST(Bf16Instruction, RoundsLikeThePortableSequence) {
  if (!kernels::cpu_has_bf16_instruction()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  // gelu_and_mul: elementwise, so the conversion is the only difference between the two runs
  // (rms_norm's bfloat16 sum of squares also changes with the instruction), and its ties go to
  // even without the instruction too (silu's go away from zero there, activation.cpp).
  at::manual_seed(11);
  const at::Tensor gate = at::randn({64, 1000}) * 3;
  at::Tensor up = at::randn({64, 1000});
  up.narrow(1, 0, 50).fill_(1e-39f);  // results below float32's normal range
  const at::Tensor x = at::cat({gate, up}, 1).to(at::kBFloat16);
  const at::Tensor with = at::empty({64, 1000}, x.options()), without = at::empty_like(with);
  const TorchView xv(x), a(with), b(without);
  const auto gelu = activation::Activation::kGelu;
  kernels::use_bf16_instruction(true);
  ASSERT_TRUE(activation::forward_cpu(gelu, xv, a).ok());
  kernels::use_bf16_instruction(false);
  ASSERT_TRUE(activation::forward_cpu(gelu, xv, b).ok());
  kernels::use_bf16_instruction(true);

  const at::Tensor portable = without.to(at::kFloat);
  const at::Tensor subnormal = portable.abs().lt(1.1754944e-38f).logical_and(portable.ne(0));
  ASSERT_GT(subnormal.sum().item<int64_t>(), 0) << "the case must reach the subnormal range";
  const at::Tensor same = with.view(at::kShort).eq(without.view(at::kShort));
  EXPECT_TRUE(same.logical_or(subnormal).all().item<bool>()) << "a normal result differs";
  const at::Tensor flushed = with.to(at::kFloat).masked_select(subnormal);
  EXPECT_TRUE(flushed.eq(0).all().item<bool>()) << "a subnormal result was not flushed";
  EXPECT_TRUE(flushed.signbit().eq(portable.masked_select(subnormal).signbit()).all().item<bool>());
}

// The same cases must hold on one thread and on several (the pool splits big inputs). A 16-bit
// row's sum of squares is taken beside the previous row's product, except for the first row of
// each thread's range: both must sum alike. Rows of 1000 also have a part past the last four
// whole vectors.
TEST(Threads, OneThreadGivesTheSameBits) {
  for (at::ScalarType dtype : kDTypes) {
    for (int64_t hidden : {1024, 1000}) {
      SCOPED_TRACE(dtype_label(dtype) + " hidden " + std::to_string(hidden));
      const at::Tensor x = at::randn({512, hidden}).to(dtype);
      const at::Tensor w = at::randn({hidden}).to(dtype);
      const at::Tensor a = at::empty_like(x), b = at::empty_like(x);
      const TorchView xv(x), wv(w), av(a), bv(b);
      const int threads = kernels::num_threads();
      kernels::set_num_threads(1);
      ASSERT_TRUE(rmsnorm::forward_cpu({xv, wv, nullptr, av}, 1e-6).ok());
      kernels::set_num_threads(4);
      ASSERT_TRUE(rmsnorm::forward_cpu({xv, wv, nullptr, bv}, 1e-6).ok());
      kernels::set_num_threads(threads);
      EXPECT_TRUE(at::equal(a, b));
    }
  }
}

}  // namespace
}  // namespace backplane

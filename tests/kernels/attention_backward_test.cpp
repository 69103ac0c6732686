// The attention backward and the forward's logsumexp against the float64 reference of
// attention_testing.hpp, over the case table (the cases small enough for a scalar reference),
// on every SIMD target; thread counts; edge cases; argument validation.
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "attention_testing.hpp"

namespace backplane::attention {
namespace {

using testing::Case;
using testing::Gradients;
using testing::HostTensor;
using testing::Instance;
using testing::MaskType;
using testing::rel_error;
using testing::Training;
using DType = cpu::DType;

// Normwise relative error of the gradients against float64: the forward's tolerances
// (kernels/attention/README.md) hold for them too. The float32 kernels accumulate over seq_k
// and seq_q in float32 (errors up to 2.4e-6 here); bf16 and f16 gradients are rounded, as was
// the forward output that D = rowsum(dO O) reads (up to 5.6e-3 and 3.9e-4).
double backward_tolerance(DType t) {
  return testing::tolerance(t);
}

// |lse - ref| within float32's reach of the row's scores; -inf exactly where no key is seen.
void ExpectLse(const std::vector<float>& got, const std::vector<double>& ref, const char* name) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(ref[i])) {
      EXPECT_EQ(got[i], -INFINITY) << name << " row " << i;
      continue;
    }
    ASSERT_NEAR(got[i], ref[i], 2e-5 * (1.0 + std::fabs(ref[i]))) << name << " row " << i;
  }
}

void ExpectGradients(Training& t, const Gradients& ref, const std::string& where) {
  const double tol = backward_tolerance(t.in.c.dtype);
  EXPECT_LE(rel_error(t.dq.logical(), ref.dq), tol) << where << ": grad_query";
  EXPECT_LE(rel_error(t.dk.logical(), ref.dk), tol) << where << ": grad_key";
  EXPECT_LE(rel_error(t.dv.logical(), ref.dv), tol) << where << ": grad_value";
}

// Cases whose scalar float64 reference takes well under a second (the sanitizer builds run
// these too).
std::vector<Case> small_cases() {
  std::vector<Case> out;
  for (const Case& c : testing::case_table()) {
    const int64_t dv = c.head_dim_v ? c.head_dim_v : c.head_dim;
    if (c.batch * c.heads_q * c.seq_q * c.seq_k * (c.head_dim + dv) <= (int64_t{1} << 26)) {
      out.push_back(c);
    }
  }
  return out;
}

class BackwardTable : public ::testing::TestWithParam<Case> {};

TEST_P(BackwardTable, MatchesTheFloat64Reference) {
  Training t(GetParam());
  RunInfo info;
  const Status s = t.run(Implementation::kSdpa, &info);
  ASSERT_TRUE(s.ok()) << s.message;
  const Gradients ref = testing::reference_backward(t.in, t.dout);
  ExpectLse(t.lse.logical(), ref.lse, "sdpa");
  ExpectGradients(t, ref, GetParam().name);
  EXPECT_STREQ(info.target, dispatch_target());
  std::printf("%-36s rel. errors: grad_query %.2e grad_key %.2e grad_value %.2e\n",
              GetParam().name.c_str(), rel_error(t.dq.logical(), ref.dq),
              rel_error(t.dk.logical(), ref.dk), rel_error(t.dv.logical(), ref.dv));
  // The eager forward's logsumexp is the same.
  ASSERT_TRUE(attention::forward(t.forward_tensors(), t.in.options(Implementation::kEager)).ok());
  ExpectLse(t.lse.logical(), ref.lse, "eager");
}

INSTANTIATE_TEST_SUITE_P(Table, BackwardTable, ::testing::ValuesIn(small_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(AttentionBackward, TheTableHasEnoughSmallCases) {
  EXPECT_GE(small_cases().size(), 15u);  // masks, GQA, MQA, causal, three dtypes, transposed
}

// Each supported target in turn, as the forward's tests do.
class BackwardPerTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam()); }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_P(BackwardPerTarget, MatchesAndRunsOnTheTarget) {
  for (const Case& c : {Case{"gqa_bool_transposed",
                             2,
                             4,
                             2,
                             70,
                             130,
                             80,
                             true,
                             DType::kF32,
                             MaskType::kBool,
                             {},
                             true},
                        Case{"bf16_additive_dv",
                             1,
                             3,
                             1,
                             65,
                             64,
                             64,
                             false,
                             DType::kBF16,
                             MaskType::kAdditive,
                             {1, 65, 64},
                             false,
                             48},
                        Case{"f16_mqa_causal", 1, 4, 1, 33, 97, 128, true, DType::kF16}}) {
    Training t(c);
    RunInfo info;
    ASSERT_TRUE(t.run(Implementation::kSdpa, &info).ok());
    EXPECT_STREQ(info.target, hwy::TargetName(GetParam()));
    ExpectGradients(t, testing::reference_backward(t.in, t.dout),
                    std::string(c.name) + " on " + hwy::TargetName(GetParam()));
  }
}

INSTANTIATE_TEST_SUITE_P(Targets, BackwardPerTarget,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const ::testing::TestParamInfo<int64_t>& i) {
                           return std::string(hwy::TargetName(i.param));
                         });

// bf16 takes the AMX tiles where the CPU and the OS allow them, else the fp32 tiles; both
// paths on this CPU, the same cases.
TEST(AttentionBackward, Bf16OnAmxAndOnTheFp32Tiles) {
  const bool amx_here = has_amx_bf16() && std::string(dispatch_target()).rfind("AVX3", 0) == 0;
  std::printf("bf16 backward tiles here: %s\n", amx_here ? "amx-bf16" : "f32-fma");
  for (const Case& c :
       {Case{"bf16_bool_gqa", 2, 4, 2, 100, 150, 96, true, DType::kBF16, MaskType::kBool},
        Case{"bf16_d80_additive",
             1,
             2,
             2,
             64,
             64,
             80,
             false,
             DType::kBF16,
             MaskType::kAdditive,
             {},
             true}}) {
    for (const bool amx : {true, false}) {
      cpu::set_amx_enabled(amx);
      Training t(c);
      RunInfo info;
      ASSERT_TRUE(t.run(Implementation::kSdpa, &info).ok());
      EXPECT_STREQ(info.tile_kernel, amx && amx_here ? "amx-bf16" : "f32-fma") << c.name;
      ExpectGradients(t, testing::reference_backward(t.in, t.dout),
                      c.name + (amx ? " (amx allowed)" : " (fp32 tiles)"));
    }
  }
  cpu::set_amx_enabled(true);
}

// Also with one kv head (MQA, batch 1): on a machine of more than one core its keys are cut
// into chunks whose dQ parts are summed in chunk order, whatever the thread count.
TEST(AttentionBackward, SameBitsWithOneAndManyThreads) {
  for (const Case& shape :
       {Case{"t", 2, 8, 2, 100, 100, 64, true, DType::kF32, MaskType::kAdditive},
        Case{"mqa", 1, 4, 1, 90, 700, 64, true, DType::kF32, MaskType::kNone}})
    for (const DType dt : {DType::kF32, DType::kBF16}) {
      Case c = shape;
      c.dtype = dt;
      Training t(c);
      set_num_threads(1);
      ASSERT_TRUE(t.run().ok());
      const std::vector<float> dq = t.dq.logical(), dk = t.dk.logical(), dv = t.dv.logical();
      set_num_threads(3);
      ASSERT_TRUE(t.run().ok());
      set_num_threads(0);
      EXPECT_EQ(t.dq.logical(), dq) << c.name << " " << testing::dtype_name(dt);
      EXPECT_EQ(t.dk.logical(), dk) << c.name << " " << testing::dtype_name(dt);
      EXPECT_EQ(t.dv.logical(), dv) << c.name << " " << testing::dtype_name(dt);
    }
}

// ------------------------------------------------------------------ edge cases

TEST(AttentionBackward, RowsThatSeeNoKeyGetZeroGradients) {
  // seq_q 6 > seq_k 4, causal: queries 0 and 1 see nothing; row 2 of the mask is all false.
  Training t(Case{"c", 1, 2, 1, 6, 4, 64, true, DType::kF32, MaskType::kBool, {6, 4}});
  for (int64_t j = 0; j < 4; ++j) t.in.mask.set(t.in.mask.offset({3, j}), 0.0f);
  ASSERT_TRUE(t.run().ok());
  const std::vector<float> lse = t.lse.logical(), dq = t.dq.logical();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i : {0, 1, 3}) {
      EXPECT_EQ(lse[static_cast<size_t>(h * 6 + i)], -INFINITY) << "row " << i;
      for (int64_t c = 0; c < 64; ++c)
        EXPECT_EQ(dq[static_cast<size_t>((h * 6 + i) * 64 + c)], 0.0f);
    }
  ExpectGradients(t, testing::reference_backward(t.in, t.dout), "no-key rows");
}

TEST(AttentionBackward, NoQueriesZeroTheKeyGradients) {
  Training t(Case{"q0", 1, 2, 2, 0, 9, 64, false, DType::kBF16});
  for (int64_t i = 0; i < t.dk.numel(); ++i) t.dk.set(i, 7.0f);
  for (int64_t i = 0; i < t.dv.numel(); ++i) t.dv.set(i, 7.0f);
  ASSERT_TRUE(t.run().ok());
  for (float x : t.dk.logical()) EXPECT_EQ(x, 0.0f);
  for (float x : t.dv.logical()) EXPECT_EQ(x, 0.0f);
}

TEST(AttentionBackward, NoKeysZeroTheQueryGradient) {
  Training t(Case{"k0", 1, 2, 2, 3, 0, 64, false, DType::kF32});
  for (int64_t i = 0; i < t.dq.numel(); ++i) t.dq.set(i, 7.0f);
  ASSERT_TRUE(t.run().ok());
  for (float x : t.dq.logical()) EXPECT_EQ(x, 0.0f);
  for (float x : t.lse.logical()) EXPECT_EQ(x, -INFINITY);
}

TEST(AttentionBackward, ZeroValueDimStillWritesTheLogsumexp) {
  const Case with_values{"dv16", 1, 2, 2, 5, 7, 16, false, DType::kF32};
  Training ref(with_values);  // the same q and k (same seed), values of 16 dims
  ASSERT_TRUE(ref.run().ok());
  Training t(with_values);
  t.in.v = HostTensor({1, 2, 7, 0}, {kDLFloat, 32, 1});
  t.in.out = HostTensor({1, 2, 5, 0}, {kDLFloat, 32, 1});
  t.dout = HostTensor({1, 2, 5, 0}, {kDLFloat, 32, 1});
  t.dv = HostTensor({1, 2, 7, 0}, {kDLFloat, 32, 1});
  for (int64_t i = 0; i < t.dq.numel(); ++i) t.dq.set(i, 7.0f);
  ASSERT_TRUE(t.run().ok());
  const std::vector<float> want = ref.lse.logical();
  ExpectLse(t.lse.logical(), std::vector<double>(want.begin(), want.end()), "dv0");
  for (float x : t.dq.logical()) EXPECT_EQ(x, 0.0f);  // the output does not depend on q
}

// ------------------------------------------------------------------ validation

struct BadBackward {
  const char* name;
  void (*mutate)(Training&, BackwardTensors&);
  const char* message;  // a substring of the expected error
};

void PrintTo(const BadBackward& c, std::ostream* os) {
  *os << c.name;
}

HostTensor& keep(HostTensor t) {
  static std::vector<HostTensor>* kept = new std::vector<HostTensor>();
  kept->reserve(64);
  kept->push_back(std::move(t));
  return kept->back();
}

const BadBackward kBadBackward[] = {
    {"no_logsumexp", [](Training&, BackwardTensors& t) { t.logsumexp = nullptr; },
     "attention_backward: logsumexp is NULL; pass the logsumexp the forward wrote"},
    {"logsumexp_shape",
     [](Training&, BackwardTensors& t) {
       t.logsumexp = keep(HostTensor({1, 4, 7}, {kDLFloat, 32, 1})).dl();
     },
     "attention_backward: logsumexp shape [1, 4, 7] must be [batch, heads_q, seq_q] = [1, 4, 8]"},
    {"logsumexp_dims",
     [](Training&, BackwardTensors& t) {
       t.logsumexp = keep(HostTensor({4, 8}, {kDLFloat, 32, 1})).dl();
     },
     "logsumexp must have 3 dims [batch, heads_q, seq_q] = [1, 4, 8], got 2 dims"},
    {"logsumexp_bf16",
     [](Training&, BackwardTensors& t) {
       t.logsumexp = keep(HostTensor({1, 4, 8}, {kDLBfloat, 16, 1})).dl();
     },
     "logsumexp has dtype bfloat16; it must be float32 whatever the query's dtype"},
    {"no_grad_output", [](Training&, BackwardTensors& t) { t.grad_output = nullptr; },
     "attention_backward: grad_output is NULL"},
    {"grad_query_shape",
     [](Training&, BackwardTensors& t) {
       t.grad_query = keep(HostTensor({1, 4, 8, 15}, {kDLFloat, 32, 1})).dl();
     },
     "attention_backward: grad_query shape [1, 4, 8, 15] must equal query's [1, 4, 8, 16]"},
    {"grad_key_dtype",
     [](Training&, BackwardTensors& t) {
       t.grad_key = keep(HostTensor({1, 2, 8, 16}, {kDLBfloat, 16, 1})).dl();
     },
     "grad_key has dtype bfloat16 but key has float32; a gradient has its operand's dtype"},
    {"grad_value_is_value", [](Training&, BackwardTensors& t) { t.grad_value = t.value; },
     "attention_backward: grad_value overlaps value in memory"},
    {"grad_key_is_grad_query",
     [](Training& tr, BackwardTensors& t) {
       t.grad_key = keep(HostTensor({1, 2, 8, 16}, {kDLFloat, 32, 1})).dl();
       const_cast<DLTensor*>(t.grad_key)->data = tr.dq.data();
     },
     "attention_backward: grad_key overlaps grad_query in memory"},
    {"grad_query_is_grad_output",
     [](Training&, BackwardTensors& t) { t.grad_query = t.grad_output; },
     "grad_query overlaps grad_output"},
    {"forward_rule", [](Training&, BackwardTensors& t) { t.output = t.query; },
     "attention_backward: output overlaps query"},
    {"grad_stride_zero",
     [](Training& tr, BackwardTensors&) {
       static int64_t strides[4] = {0, 0, 0, 1};
       tr.dq.dl()->strides = strides;
     },
     "grad_query has stride 0"},
};

class BackwardRejects : public ::testing::TestWithParam<BadBackward> {};

TEST_P(BackwardRejects, WithAClearMessage) {
  Training t(Case{"v", 1, 4, 2, 8, 8, 16, true, DType::kF32});
  ASSERT_TRUE(attention::forward(t.forward_tensors(), t.in.options(Implementation::kSdpa)).ok());
  for (int64_t i = 0; i < t.dq.numel(); ++i) t.dq.set(i, 7.0f);
  BackwardTensors bt = t.backward_tensors();
  GetParam().mutate(t, bt);
  const Status s = attention::backward(bt, t.in.options(Implementation::kSdpa));
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
  EXPECT_NE(s.message.find(GetParam().message), std::string::npos) << s.message;
  for (int64_t i = 0; i < t.dq.numel(); ++i) ASSERT_EQ(t.dq.get(i), 7.0f);  // nothing written
}

INSTANTIATE_TEST_SUITE_P(Validation, BackwardRejects, ::testing::ValuesIn(kBadBackward),
                         [](const ::testing::TestParamInfo<BadBackward>& i) {
                           return std::string(i.param.name);
                         });

TEST(AttentionForward, RefusesABadLogsumexp) {
  Training t(Case{"f", 1, 4, 2, 8, 8, 16, false, DType::kF32});
  Tensors ft = t.forward_tensors();
  ft.logsumexp = keep(HostTensor({1, 4, 9}, {kDLFloat, 32, 1})).dl();
  Status s = attention::forward(ft, t.in.options(Implementation::kSdpa));
  EXPECT_NE(s.message.find("attention: logsumexp shape [1, 4, 9] must be [batch, heads_q, "
                           "seq_q] = [1, 4, 8]"),
            std::string::npos)
      << s.message;
  ft.logsumexp = t.in.q.dl();
  s = attention::forward(ft, t.in.options(Implementation::kSdpa));
  EXPECT_NE(s.message.find("logsumexp must have 3 dims"), std::string::npos) << s.message;
  HostTensor& over = keep(HostTensor({1, 4, 8}, {kDLFloat, 32, 1}));
  over.dl()->data = t.in.out.data();
  ft.logsumexp = over.dl();
  s = attention::forward(ft, t.in.options(Implementation::kSdpa));
  EXPECT_NE(s.message.find("attention: logsumexp overlaps output in memory"), std::string::npos)
      << s.message;
}

}  // namespace
}  // namespace backplane::attention

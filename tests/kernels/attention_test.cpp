// The sdpa kernel against the eager reference over the case table, on every SIMD target this
// CPU supports; edge cases; argument validation.
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cmath>
#include <string>
#include <thread>
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

std::vector<float> run(Instance& in, Implementation impl, RunInfo* info = nullptr) {
  const Status s = forward(in.tensors(), in.options(impl), info);
  EXPECT_TRUE(s.ok()) << s.message;
  return in.out.logical();
}

// ------------------------------------------------------------------ dispatch

TEST(AttentionDispatch, PicksTheBestSupportedTarget) {
  const int64_t best = hwy::SupportedTargets() & HWY_TARGETS;
  const int64_t expected = best & -best;  // lowest bit = best target
  EXPECT_STREQ(dispatch_target(), hwy::TargetName(expected));
  Instance in(Case{"small", 1, 2, 2, 7, 7, 64, true, DType::kF32});
  RunInfo info;
  run(in, Implementation::kSdpa, &info);
  EXPECT_STREQ(info.target, hwy::TargetName(expected));
  std::printf("sdpa dispatches to %s here; bf16 tiles: %s\n", info.target, bf16_tile_kernel());
}

// Each supported target in turn (hwy::SetSupportedTargetsForTest), as Highway's own tests do:
// the dispatcher must really land on it, and the result must match eager.
class PerTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam()); }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_P(PerTarget, MatchesEagerAndRunsOnTheTarget) {
  const std::vector<Case> cases = {
      {"gqa_causal", 1, 4, 2, 127, 127, 80, true, DType::kF32, MaskType::kBool},
      {"decode_split", 1, 4, 1, 1, 1024, 64, false, DType::kF32},
      {"bf16", 1, 2, 1, 64, 100, 128, true, DType::kBF16},
      {"f16", 1, 2, 2, 33, 33, 96, false, DType::kF16, MaskType::kAdditive},
      // Q^T and K's panel tiles by squares of a vector's lanes, with columns left over and a
      // last tile of fewer keys than a tile holds.
      {"f32_d20_tails", 1, 4, 2, 37, 41, 20, true, DType::kF32},
      // Decoding's dot-product tiles for 1, 2, 4 and 8 rows, with block tails that leave every
      // narrower tile some keys (TreeKeys, then one tree, then single keys).
      {"decode_gqa8_bf16", 1, 8, 1, 1, 301, 128, false, DType::kBF16},
      {"decode_gqa2_bf16", 1, 4, 2, 1, 203, 64, false, DType::kBF16},
      {"decode_mha_f32", 1, 2, 2, 1, 77, 96, false, DType::kF32},
      // Rows that fill at most half a vector take two keys a vector of scores (SoftmaxMax's
      // kKeys): the second key's causal limit, a mask, and odd tails of keys.
      {"decode_q2_causal_mask", 1, 4, 2, 2, 204, 64, true, DType::kF32, MaskType::kBool},
      {"decode_q3_causal_tail", 1, 2, 2, 3, 193, 64, true, DType::kF32},
      {"decode_mha_q2_additive_bf16", 1, 3, 3, 2, 97, 64, true, DType::kBF16, MaskType::kAdditive},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Instance in(c);
    const std::vector<float> ref = run(in, Implementation::kEager);
    RunInfo info;
    const std::vector<float> got = run(in, Implementation::kSdpa, &info);
    EXPECT_STREQ(info.target, hwy::TargetName(GetParam()));
    EXPECT_LE(rel_error(got, ref), tolerance(c.dtype));
  }
}

// Keys per kv block (DefaultBlockKeys): the tiles' 8 tiles of key rows (12 keys a tile on
// AVX-512, 6 elsewhere), and for decoding as many as keep a block's V rows within 48 KiB on
// AVX-512, 12 KiB elsewhere, a multiple of a tile and at most the tiles' block.
TEST_P(PerTarget, BlockKeysFollowTheRule) {
  struct Row {
    Case c;
    int64_t narrow, avx512;  // expected keys per block elsewhere, on AVX-512
  };
  const std::vector<Row> rows = {
      {{"prefill_f32", 1, 4, 2, 64, 64, 128, true, DType::kF32}, 48, 96},
      {{"decode_gqa4_f32_d128", 1, 8, 2, 1, 300, 128, false, DType::kF32}, 24, 96},
      {{"decode_gqa4_bf16_d128", 1, 8, 2, 1, 300, 128, false, DType::kBF16}, 48, 96},
      {{"decode_f16_d64", 1, 2, 2, 1, 300, 64, false, DType::kF16}, 48, 96},
      {{"decode_f32_d256", 1, 2, 2, 1, 300, 256, false, DType::kF32}, 12, 48},
      {{"decode_f32_d1024", 1, 1, 1, 1, 300, 1024, false, DType::kF32}, 6, 12},
  };
  // As sdpa_tiles-inl.h decides: x86 targets at or above AVX3.
  const bool avx512 = HWY_ARCH_X86 && GetParam() <= HWY_AVX3;
  for (const Row& row : rows) {
    SCOPED_TRACE(row.c.name);
    Instance in(row.c);
    const std::vector<float> ref = run(in, Implementation::kEager);
    RunInfo info;
    const std::vector<float> got = run(in, Implementation::kSdpa, &info);
    EXPECT_EQ(info.block_keys, avx512 ? row.avx512 : row.narrow);
    EXPECT_LE(rel_error(got, ref), tolerance(row.c.dtype));
  }
}

std::string TargetParamName(const ::testing::TestParamInfo<int64_t>& info) {
  return hwy::TargetName(info.param);
}
INSTANTIATE_TEST_SUITE_P(Targets, PerTarget,
                         ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()), TargetParamName);

// bf16 runs on AMX tiles where the CPU and OS allow it, else on AVX512-BF16 tiles where those
// beat fp32 (bf16_tile_kernel()); every path this CPU has must agree with eager.
TEST(AttentionBf16, EveryTilePathMatchesEager) {
  const std::vector<Case> cases = {
      {"causal_gqa", 1, 8, 2, 200, 200, 128, true, DType::kBF16},
      {"odd_dims_mask", 1, 4, 4, 45, 77, 80, false, DType::kBF16, MaskType::kBool},
      {"d96_rows_split", 1, 2, 1, 17, 300, 96, true, DType::kBF16, MaskType::kAdditive},
      {"strided_d64", 2, 4, 2, 64, 64, 64, true, DType::kBF16, MaskType::kNone, {}, true},
      {"mqa16_split_kv", 1, 16, 1, 1, 4097, 128, false, DType::kBF16},
      {"no_keys", 1, 16, 1, 3, 0, 64, false, DType::kBF16},
      {"long_head_window_split", 1, 32, 1, 1, 8200, 256, false, DType::kBF16},
      {"d3_dv40", 1, 12, 2, 9, 33, 3, true, DType::kBF16, MaskType::kNone, {}, false, 40},
      // Decoding (at most 8 rows per kv head): Q.K as dot products, on vdpbf16ps where the
      // tiles would be and head_dim is whole pairs of vectors; 1, 4 and 8 rows, a mask, a
      // head_dim of half-vectors, and keys that leave a partial block.
      {"decode_gqa4", 1, 32, 8, 1, 1000, 128, false, DType::kBF16},
      {"decode_mha_d64", 2, 4, 4, 1, 333, 64, false, DType::kBF16},
      {"decode_gqa8_mask", 1, 16, 2, 1, 517, 128, false, DType::kBF16, MaskType::kBool},
      {"decode_gqa2_d80", 1, 4, 2, 1, 250, 80, false, DType::kBF16},
  };
  struct Path {
    bool amx, dpbf16;
  };
  for (const Path path : {Path{true, true}, Path{false, true}, Path{false, false}}) {
    cpu::set_amx_enabled(path.amx);
    cpu::set_dpbf16_enabled(path.dpbf16);
    const std::string expected = bf16_tile_kernel();
    EXPECT_EQ(expected, path.amx && cpu::amx_bf16_available()          ? "amx-bf16"
                        : path.dpbf16 && cpu::dpbf16_tiles_available() ? "avx512-bf16"
                                                                       : "f32-fma");
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name + " " + expected);
      Instance in(c);
      const std::vector<float> ref = run(in, Implementation::kEager);
      RunInfo info;
      const std::vector<float> got = run(in, Implementation::kSdpa, &info);
      // Decoding rows (at most 8 per kv head) take dot products: on vdpbf16ps where the tiles
      // would be and head_dim is a multiple of 32, else in fp32.
      const bool decode = c.heads_q / c.heads_kv * c.seq_q <= 8;
      const bool pairs = expected == "avx512-bf16" && c.head_dim % 32 == 0;
      EXPECT_EQ(std::string(info.tile_kernel), !decode ? expected
                                               : pairs ? "avx512-bf16"
                                                       : "f32-fma");
      EXPECT_LE(rel_error(got, ref), tolerance(c.dtype));
    }
  }
  cpu::set_amx_enabled(true);
  cpu::set_dpbf16_enabled(true);
  std::printf("bf16 prefill tiles here: %s\n", bf16_tile_kernel());
}

// ------------------------------------------------------------------ the table against eager

class AgainstEager : public ::testing::TestWithParam<Case> {};

TEST_P(AgainstEager, SdpaMatches) {
  const Case& c = GetParam();
  Instance in(c);
  const std::vector<float> ref = run(in, Implementation::kEager);
  const std::vector<float> got = run(in, Implementation::kSdpa);
  const double err = rel_error(got, ref);
  EXPECT_LE(err, tolerance(c.dtype)) << c.name;
  RecordProperty("rel_error", std::to_string(err));
}

INSTANTIATE_TEST_SUITE_P(Table, AgainstEager, ::testing::ValuesIn(testing::case_table()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(AttentionThreads, SameResultWithOneAndManyThreads) {
  Instance in(Case{"t", 1, 8, 1, 1, 4097, 128, false, DType::kF32});
  set_num_threads(1);
  const std::vector<float> one = run(in, Implementation::kSdpa);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  const std::vector<float> many = run(in, Implementation::kSdpa);  // split-KV path
  set_num_threads(0);
  EXPECT_LE(rel_error(many, one), tolerance(DType::kF32));  // split-KV sums in another order
}

TEST(AttentionThreads, ConcurrentCallsFromHostThreads) {
  Instance a(Case{"a", 1, 8, 2, 130, 130, 64, true, DType::kF32});
  Instance b(Case{"b", 1, 8, 2, 70, 300, 96, false, DType::kBF16, MaskType::kBool});
  const std::vector<float> ref_a = run(a, Implementation::kSdpa);
  const std::vector<float> ref_b = run(b, Implementation::kSdpa);
  std::vector<std::thread> host;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    host.emplace_back([&, t] {
      Instance& in = t % 2 ? b : a;
      Instance mine(in.c);  // same inputs (same seed), own output
      for (int rep = 0; rep < 5; ++rep) {
        if (!forward(mine.tensors(), mine.options(Implementation::kSdpa)).ok()) return;
      }
      ok[t] = mine.out.logical() == (t % 2 ? ref_b : ref_a);
    });
  }
  for (auto& th : host) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_TRUE(ok[t]) << "host thread " << t;
}

// ------------------------------------------------------------------ edge cases

TEST(AttentionEdges, FullyMaskedRowsAreZero) {
  for (Implementation impl : {Implementation::kEager, Implementation::kSdpa}) {
    Instance in(Case{"m", 1, 2, 2, 5, 40, 64, false, DType::kF32, MaskType::kBool, {5, 40}});
    for (int64_t j = 0; j < 40; ++j) in.mask.set(in.mask.offset({2, j}), 0.0f);  // row 2: none
    std::vector<float> out = run(in, impl);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < 64; ++c) {
        EXPECT_EQ(out[static_cast<size_t>(((h * 5) + 2) * 64 + c)], 0.0f);
        EXPECT_NE(out[static_cast<size_t>(((h * 5) + 1) * 64 + c)], 0.0f);
      }
  }
}

TEST(AttentionEdges, CausalBottomRightLeavesEarlyQueriesEmpty) {
  // seq_q 6 > seq_k 4: query i sees keys j <= i - 2, so queries 0 and 1 see nothing.
  for (Implementation impl : {Implementation::kEager, Implementation::kSdpa}) {
    Instance in(Case{"c", 1, 1, 1, 6, 4, 64, true, DType::kF32});
    std::vector<float> out = run(in, impl);
    for (int64_t c = 0; c < 64; ++c) {
      EXPECT_EQ(out[static_cast<size_t>(0 * 64 + c)], 0.0f);
      EXPECT_EQ(out[static_cast<size_t>(1 * 64 + c)], 0.0f);
    }
    // Query 2 sees key 0 only: its output is v[0].
    const std::vector<float> v = in.v.logical();
    for (int64_t c = 0; c < 64; ++c) EXPECT_FLOAT_EQ(out[static_cast<size_t>(2 * 64 + c)], v[c]);
  }
}

TEST(AttentionEdges, EmptyInputsAreNoOps) {
  for (Implementation impl : {Implementation::kEager, Implementation::kSdpa}) {
    for (const Case& c : {Case{"b0", 0, 4, 2, 7, 7, 64, true, DType::kF32},
                          Case{"q0", 2, 4, 2, 0, 7, 64, false, DType::kBF16}}) {
      Instance in(c);
      in.q.dl()->data = nullptr;  // no elements: a NULL pointer is fine
      in.out.dl()->data = nullptr;
      const Status s = forward(in.tensors(), in.options(impl));
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.message;
    }
    // seq_k == 0: every row is fully masked, so zeros.
    Instance in(Case{"k0", 1, 2, 2, 3, 0, 64, false, DType::kF32});
    for (int64_t i = 0; i < in.out.numel(); ++i) in.out.set(i, 7.0f);
    for (float x : run(in, impl)) EXPECT_EQ(x, 0.0f);
  }
}

TEST(AttentionEdges, ScaleOption) {
  Instance in(Case{"s", 1, 2, 2, 17, 33, 64, false, DType::kF32});
  Options o;
  o.scale = 0.3;
  o.implementation = Implementation::kEager;
  ASSERT_TRUE(forward(in.tensors(), o).ok());
  const std::vector<float> ref = in.out.logical();
  o.implementation = Implementation::kSdpa;
  ASSERT_TRUE(forward(in.tensors(), o).ok());
  EXPECT_LE(rel_error(in.out.logical(), ref), 1e-5);
  o.scale = -0.2;  // negative scales are legal
  o.implementation = Implementation::kEager;
  ASSERT_TRUE(forward(in.tensors(), o).ok());
  const std::vector<float> ref2 = in.out.logical();
  o.implementation = Implementation::kSdpa;
  ASSERT_TRUE(forward(in.tensors(), o).ok());
  EXPECT_LE(rel_error(in.out.logical(), ref2), 1e-5);
}

// ------------------------------------------------------------------ validation

struct BadCase {
  const char* name;
  void (*mutate)(Instance&, Tensors&, Options&);
  const char* message;  // a substring of the expected error
};

void PrintTo(const BadCase& c, std::ostream* os) {
  *os << c.name;
}

HostTensor& keep(HostTensor t) {
  static std::vector<HostTensor>* kept = new std::vector<HostTensor>();
  kept->reserve(64);
  kept->push_back(std::move(t));
  return kept->back();
}

const BadCase kBadCases[] = {
    {"null_query", [](Instance&, Tensors& t, Options&) { t.query = nullptr; }, "query is NULL"},
    {"three_dims", [](Instance& in, Tensors&, Options&) { in.q.dl()->ndim = 3; },
     "query must have 4 dims [batch, heads_q, seq_q, head_dim], got 3 dims [1, 4, 8]"},
    {"int_dtype",
     [](Instance& in, Tensors&, Options&) {
       in.q.dl()->dtype = {kDLInt, 32, 1};
     },
     "query has dtype int32; supported: float32, bfloat16, float16"},
    {"mixed_dtypes",
     [](Instance&, Tensors& t, Options&) {
       t.key = keep(HostTensor({1, 2, 8, 16}, {kDLBfloat, 16, 1})).dl();
     },
     "key has dtype bfloat16 but query has float32; query, key, value and output must share "
     "one dtype"},
    {"cuda_device",
     [](Instance& in, Tensors&, Options&) {
       in.v.dl()->device = {kDLCUDA, 0};
     },
     "value is on device kDLCUDA; the CPU kernels need kDLCPU memory"},
    {"null_data", [](Instance& in, Tensors&, Options&) { in.k.dl()->data = nullptr; },
     "key data is NULL"},
    {"head_dim_mismatch",
     [](Instance&, Tensors& t, Options&) {
       t.key = keep(HostTensor({1, 2, 8, 32}, {kDLFloat, 32, 1})).dl();
     },
     "key head_dim 32 differs from query head_dim 16"},
    {"heads_not_multiple",
     [](Instance&, Tensors& t, Options&) {
       t.key = keep(HostTensor({1, 3, 8, 16}, {kDLFloat, 32, 1})).dl();
       t.value = keep(HostTensor({1, 3, 8, 16}, {kDLFloat, 32, 1})).dl();
     },
     "heads_q (4) must be a multiple of heads_kv (3)"},
    {"value_seq_mismatch",
     [](Instance&, Tensors& t, Options&) {
       t.value = keep(HostTensor({1, 2, 9, 16}, {kDLFloat, 32, 1})).dl();
     },
     "value [1, 2, 9, 16] must have key's heads_kv and seq_k (key [1, 2, 8, 16])"},
    {"batch_mismatch",
     [](Instance&, Tensors& t, Options&) {
       t.key = keep(HostTensor({2, 2, 8, 16}, {kDLFloat, 32, 1})).dl();
     },
     "batch sizes differ"},
    {"output_shape",
     [](Instance&, Tensors& t, Options&) {
       t.output = keep(HostTensor({1, 4, 8, 8}, {kDLFloat, 32, 1})).dl();
     },
     "output shape [1, 4, 8, 8] must be [batch, heads_q, seq_q, head_dim_v] = [1, 4, 8, 16]"},
    {"misaligned_output", [](Instance& in, Tensors&, Options&) { in.out.dl()->byte_offset = 2; },
     "output data (data + byte_offset) is not aligned to its 4-byte elements"},
    {"output_overlaps_query",
     [](Instance& in, Tensors& t, Options&) {
       in.out.dl()->data = const_cast<void*>(t.query->data);
     },
     "output overlaps query in memory"},
    {"output_stride_zero",
     [](Instance& in, Tensors&, Options&) { const_cast<int64_t*>(in.out.strides().data())[2] = 0; },
     "output has stride 0 on dim 2 of size > 1"},
    {"mask_not_broadcastable",
     [](Instance&, Tensors& t, Options&) {
       t.mask = keep(HostTensor({8, 5}, {6, 8, 1})).dl();
     },
     "mask shape [8, 5] does not broadcast to [batch, heads_q, seq_q, seq_k] = [1, 4, 8, 8]: "
     "mask dim 1 is 5, expected 8 or 1"},
    {"mask_dtype",
     [](Instance&, Tensors& t, Options&) {
       t.mask = keep(HostTensor({8, 8}, {kDLInt, 32, 1})).dl();
     },
     "mask has dtype int32; expected bool (keep where true), or an additive float32 or float32"},
    {"mask_five_dims",
     [](Instance&, Tensors& t, Options&) {
       t.mask = keep(HostTensor({1, 1, 1, 8, 8}, {6, 8, 1})).dl();
     },
     "mask has 5 dims"},
    {"nan_scale", [](Instance&, Tensors&, Options& o) { o.scale = std::nan(""); },
     "scale must be finite"},
};

class Rejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(Rejects, WithAClearMessage) {
  const BadCase& bad = GetParam();
  Instance in(Case{"base", 1, 4, 2, 8, 8, 16, false, DType::kF32});
  Tensors t = in.tensors();
  Options o;
  bad.mutate(in, t, o);
  for (Implementation impl : {Implementation::kEager, Implementation::kSdpa}) {
    o.implementation = impl;
    const Status s = forward(t, o);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument);
    EXPECT_NE(s.message.find(bad.message), std::string::npos)
        << "got: " << s.message << "\nwant: " << bad.message;
    EXPECT_EQ(s.message.rfind("attention: ", 0), 0u) << s.message;
    EXPECT_EQ(validate(t, o).message, s.message);
  }
}

INSTANTIATE_TEST_SUITE_P(Validation, Rejects, ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& i) { return i.param.name; });

TEST(AttentionValidation, AcceptsMaskForms) {
  Instance in(Case{"base", 2, 4, 2, 8, 8, 16, false, DType::kBF16});
  Tensors t = in.tensors();
  const std::vector<std::vector<int64_t>> shapes = {{8},          {8, 8},       {1, 8}, {4, 1, 8},
                                                    {2, 1, 8, 8}, {2, 4, 8, 8}, {}};
  for (const auto& shape : shapes) {
    for (DLDataType dt : {DLDataType{6, 8, 1}, DLDataType{kDLUInt, 8, 1},
                          DLDataType{kDLFloat, 32, 1}, DLDataType{kDLBfloat, 16, 1}}) {
      HostTensor m(shape, dt);
      t.mask = m.dl();
      EXPECT_TRUE(validate(t).ok()) << validate(t).message;
    }
  }
  HostTensor f16mask({8, 8}, {kDLFloat, 16, 1});  // additive, but neither f32 nor bf16
  t.mask = f16mask.dl();
  EXPECT_EQ(validate(t).code, StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace backplane::attention

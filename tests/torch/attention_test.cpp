// Attention through the bridge on CPU against LibTorch's math attention (2.x:
// at::_scaled_dot_product_attention_math; 1.13, which has no such op: the same computation
// written with matmul and softmax), and the errors for inputs the bridge refuses.
#include <backplane/error.hpp>
#include <backplane/torch/attention.hpp>
#include <backplane/torch/dlpack.hpp>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <ATen/ops/_scaled_dot_product_attention_math.h>
#endif

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "torch_testing.hpp"

namespace {

using backplane::InvalidArgument;
using backplane::torch::Attention;
using backplane::torch::AttentionArgs;
using backplane::torch::AttentionOptions;
using backplane::torch::testing::open_runtime;
using backplane::torch::testing::relative_error;

enum class Mask { kNone, kBool, kAdditive };

struct Case {
  const char* name;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim;
  bool causal;
  Mask mask;
  at::ScalarType dtype;
  bool strided;  // q, k, v as transposes of [batch, seq, heads, head_dim]
  double tolerance;
};

const Case kCases[] = {
    {"mha_f32", 2, 4, 4, 7, 7, 64, false, Mask::kNone, at::kFloat, false, 1e-5},
    {"gqa_causal_sq5_sk9_f32", 1, 8, 2, 5, 9, 32, true, Mask::kNone, at::kFloat, false, 1e-5},
    {"mqa_decode_f32", 2, 4, 1, 1, 33, 64, false, Mask::kNone, at::kFloat, false, 1e-5},
    {"bool_mask_f32", 2, 2, 2, 6, 10, 16, false, Mask::kBool, at::kFloat, false, 1e-5},
    {"additive_mask_causal_f32", 1, 4, 2, 8, 8, 16, true, Mask::kAdditive, at::kFloat, false, 1e-5},
    {"strided_gqa_f32", 2, 8, 4, 9, 9, 64, true, Mask::kNone, at::kFloat, true, 1e-5},
    {"gqa_causal_bf16", 1, 8, 2, 16, 40, 128, true, Mask::kNone, at::kBFloat16, false, 1e-2},
    {"bool_mask_strided_f16", 1, 4, 4, 5, 12, 64, false, Mask::kBool, at::kHalf, true, 1e-2},
    {"empty_batch_f32", 0, 4, 2, 3, 5, 16, false, Mask::kNone, at::kFloat, false, 0},
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

struct Inputs {
  at::Tensor q, k, v;
  std::optional<at::Tensor> mask;
};

at::Tensor make(const Case& c, int64_t heads, int64_t seq) {
  const auto opts = at::TensorOptions(at::kFloat);
  if (c.strided) {
    return at::randn({c.batch, seq, heads, c.head_dim}, opts).to(c.dtype).transpose(1, 2);
  }
  return at::randn({c.batch, heads, seq, c.head_dim}, opts).to(c.dtype);
}

Inputs inputs(const Case& c) {
  Inputs in{make(c, c.heads_q, c.seq_q), make(c, c.heads_kv, c.seq_k), make(c, c.heads_kv, c.seq_k),
            std::nullopt};
  if (c.mask == Mask::kBool) {
    // Broadcast over heads; every row keeps its last key, so no row is fully masked.
    at::Tensor keep = at::rand({c.batch, 1, c.seq_q, c.seq_k}) > 0.4;
    keep.select(3, c.seq_k - 1).fill_(true);
    in.mask = keep;
  } else if (c.mask == Mask::kAdditive) {
    in.mask = at::randn({c.seq_q, c.seq_k}, at::TensorOptions(at::kFloat));
  }
  return in;
}

// The bridge's semantics as one additive float mask [.., seq_q, seq_k]: the user's mask (bool:
// 0 / -inf) plus the bottom-right causal mask. PyTorch's is_causal is top-left, so the causal
// part always reaches the reference as an explicit mask.
std::optional<at::Tensor> dense_mask(const Case& c, const Inputs& in) {
  std::optional<at::Tensor> mask;
  const auto f32 = at::TensorOptions(at::kFloat);
  const float inf = std::numeric_limits<float>::infinity();
  if (in.mask && in.mask->scalar_type() == at::kBool) {
    mask = at::zeros(in.mask->sizes(), f32).masked_fill(in.mask->logical_not(), -inf);
  } else if (in.mask) {
    mask = *in.mask;
  }
  if (c.causal) {
    const at::Tensor i = at::arange(c.seq_q, at::TensorOptions(at::kLong)).unsqueeze(1);
    const at::Tensor j = at::arange(c.seq_k, at::TensorOptions(at::kLong)).unsqueeze(0);
    const at::Tensor causal =
        at::zeros({c.seq_q, c.seq_k}, f32).masked_fill(j > i + (c.seq_k - c.seq_q), -inf);
    mask = mask ? *mask + causal : causal;
  }
  return mask;
}

// LibTorch's math attention in float32 on the same (rounded) inputs.
at::Tensor reference(const Case& c, const Inputs& in) {
  const at::Tensor q = in.q.to(at::kFloat), k = in.k.to(at::kFloat), v = in.v.to(at::kFloat);
  const std::optional<at::Tensor> mask = dense_mask(c, in);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
#if TORCH_VERSION_MAJOR >= 2
  return std::get<0>(at::_scaled_dot_product_attention_math(q, k, v, mask, 0.0, false, std::nullopt,
                                                            scale, c.heads_q != c.heads_kv));
#else
  const int64_t group = c.heads_q / c.heads_kv;
  at::Tensor scores = q.matmul(k.repeat_interleave(group, 1).transpose(-2, -1)) * scale;
  if (mask) scores = scores + *mask;
  return scores.softmax(-1).matmul(v.repeat_interleave(group, 1));
#endif
}

class BridgeAttention : public ::testing::TestWithParam<Case> {};

TEST_P(BridgeAttention, MatchesLibTorchsMathAttention) {
  const Case& c = GetParam();
  const backplane::Runtime runtime = open_runtime();
  const Inputs in = inputs(c);
  AttentionOptions options;
  options.mask = in.mask;
  options.causal = c.causal;
  for (const char* impl : {"sdpa", "eager"}) {
    SCOPED_TRACE(impl);
    options.attn_implementation = impl;
    const at::Tensor out = backplane::torch::attention(runtime, in.q, in.k, in.v, options);
    ASSERT_EQ(out.sizes(), at::IntArrayRef({c.batch, c.heads_q, c.seq_q, c.head_dim}));
    EXPECT_EQ(out.scalar_type(), c.dtype);
    if (out.numel() == 0) continue;
    const at::Tensor expected = reference(c, in);
    EXPECT_GT(expected.abs().max().item<double>(), 0.0);
    EXPECT_LE(relative_error(out, expected), c.tolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BridgeAttention, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           return std::string(param.param.name);
                         });

TEST(BridgeAttentionObject, ResolvesOnceAndWritesIntoAGivenOutput) {
  const backplane::Runtime runtime = open_runtime();
  const Attention attn(runtime, c10::Device(c10::DeviceType::CPU));
  EXPECT_EQ(attn.device(), backplane::Device("cpu", 0));
  EXPECT_EQ(attn.implementation(), "sdpa");  // the default
  EXPECT_EQ(attn.kernel_info().plugin, "cpu");
  EXPECT_TRUE(attn.warnings().empty());

  const Case& c = kCases[1];  // GQA, causal, seq_q != seq_k
  const Inputs in = inputs(c);
  AttentionArgs args;
  args.causal = true;
  args.out = at::empty({c.batch, c.heads_q, c.seq_q, c.head_dim}, at::TensorOptions(at::kFloat));
  const at::Tensor out = attn(in.q, in.k, in.v, args);
  EXPECT_EQ(out.data_ptr(), args.out->data_ptr());
  EXPECT_LE(relative_error(out, reference(c, in)), 1e-5);

  args.scale = 0.5;  // against the reference with q scaled so that 1/sqrt(d) becomes 0.5
  const double rescale = 0.5 * std::sqrt(static_cast<double>(c.head_dim));
  Inputs scaled = in;
  scaled.q = in.q * rescale;
  EXPECT_LE(relative_error(attn(in.q, in.k, in.v, args), reference(c, scaled)), 1e-5);
}

TEST(BridgeAttentionObject, AnExplicitImplementationIsUsedOrIsAnError) {
  const backplane::Runtime runtime = open_runtime();
  EXPECT_EQ(Attention(runtime, backplane::Device("cpu"), "eager").implementation(), "eager");
  try {
    Attention(runtime, backplane::Device("cpu"), "flash_attention_2");
    FAIL();
  } catch (const backplane::Unavailable& e) {  // transformers' message, from resolution
    EXPECT_EQ(std::string(e.what()).rfind("FlashAttention2 has been toggled on, but it cannot be "
                                          "used due to the following error: ",
                                          0),
              0u)
        << e.what();
  }
}

// A simulated H100 with no native FlashAttention-2 kernel, and a local store that has every
// Hub kernel: transformers' warning about the Hub fallback, before backplane says it cannot load
// Hub kernels yet.
TEST(BridgeAttentionObject, ResolutionWarningsReachTheHandlerOrStderrOnce) {
  setenv("BACKPLANE_SIM_TOPOLOGY", TOPOLOGY_DIR "/h100x8.json", 1);
  const backplane::Runtime runtime = open_runtime({"sim"});
  unsetenv("BACKPLANE_SIM_TOPOLOGY");
  backplane::AttentionQuery query;
  query.hub_installed = [](const backplane::HubKernelId&) { return true; };
  const std::string warning =
      "You do not have `flash_attn` installed, using `kernels-community/flash-attn2` from the "
      "`kernels` library instead!";
  std::vector<std::string> told;
  const auto resolve = [&](const backplane::torch::WarningHandler& handler) {
    try {
      Attention(runtime, backplane::Device("cuda", 0), "flash_attention_2", handler, query);
      ADD_FAILURE() << "a Hub kernel loaded";
    } catch (const backplane::Unavailable& e) {
      EXPECT_NE(std::string(e.what()).find("kernels-community/flash-attn2"), std::string::npos)
          << e.what();
    }
  };
  resolve([&](const std::string& w) { told.push_back(w); });
  EXPECT_EQ(told, std::vector<std::string>{warning});

  ::testing::internal::CaptureStderr();
  resolve({});
  resolve({});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "backplane: warn: " + warning + "\n");
}

TEST(BridgeAttentionObject, TheDefaultRuntimeServesTheOneShotCall) {
  // ctest sets BACKPLANE_PLUGIN_PATH to this build's plugins.
  const Case& c = kCases[0];
  const Inputs in = inputs(c);
  const at::Tensor out = backplane::torch::attention(in.q, in.k, in.v);
  EXPECT_LE(relative_error(out, reference(c, in)), 1e-5);
}

void expect_error(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const backplane::Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST(BridgeAttentionErrors, NameTheArgumentAndWhatIsAccepted) {
  const backplane::Runtime runtime = open_runtime();
  const Attention attn(runtime, backplane::Device("cpu"));
  const auto f32 = at::TensorOptions(at::kFloat);
  const at::Tensor q = at::randn({1, 4, 3, 8}, f32), kv = at::randn({1, 2, 5, 8}, f32);
  const std::string who = "backplane::torch::attention: ";

  expect_error([&] { attn(q.select(0, 0), kv, kv); },
               who +
                   "query must be 4-D [batch, heads_q, seq_q, head_dim], got a 3-D tensor "
                   "[4, 3, 8]");
  expect_error([&] { attn(q, kv.to(at::kHalf), kv); },
               who +
                   "key has dtype float16 but query has float32; query, key and value must share "
                   "one dtype");
  expect_error([&] { attn(q.to(at::kDouble), kv.to(at::kDouble), kv.to(at::kDouble)); },
               who +
                   "query has dtype float64; attention_forward/sdpa on cpu:0 takes float32, "
                   "bfloat16, float16");
  AttentionArgs bad_out;
  bad_out.out = at::empty({1, 4, 3, 4}, f32);
  expect_error([&] { attn(q, kv, kv, bad_out); },
               who +
                   "out is float32 [1, 4, 3, 4]; expected float32 [1, 4, 3, 8] (query's dtype, "
                   "value's head_dim)");
  AttentionArgs bad_scale;
  bad_scale.scale = 0.0;
  expect_error([&] { attn(q, kv, kv, bad_scale); },
               who +
                   "scale must be a positive finite number, got 0.000000; leave it unset for "
                   "1 / sqrt(head_dim)");
  // What only the kernel checks arrives with the kernel's name.
  try {
    attn(at::randn({1, 3, 3, 8}, f32), kv, kv);
    ADD_FAILURE() << "3 query heads over 2 kv heads accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("attention_forward/sdpa on cpu: ", 0), 0u) << e.what();
  }
}

// A tensor that claims a CUDA device (its memory is never touched): what a CUDA tensor looks
// like to the bridge on a machine whose LibTorch and backplane have no usable GPU.
at::Tensor claims_cuda(std::vector<float>& memory, std::vector<int64_t> shape) {
  DLTensor dl{};
  dl.data = memory.data();
  dl.device = {kDLCUDA, 0};
  dl.ndim = static_cast<int32_t>(shape.size());
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = shape.data();
  return backplane::torch::from_dlpack(dl);
}

TEST(BridgeAttentionErrors, ACudaTensorOnAMachineWithoutAGpu) {
  const backplane::Runtime runtime = open_runtime({"cpu", "cuda"});
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  if (cuda->available) GTEST_SKIP() << "this machine has a usable CUDA GPU";
  std::vector<float> memory(64);
  at::Tensor q;
  try {
    q = claims_cuda(memory, {1, 2, 4, 8});
  } catch (const c10::Error& e) {
    GTEST_SKIP() << "this LibTorch cannot even describe a CUDA tensor: "
                 << e.what_without_backtrace();
  }
  // The one-shot call resolves for q's device: the backend's reason.
  try {
    backplane::torch::attention(runtime, q, q, q);
    FAIL();
  } catch (const backplane::Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(cuda->unavailable_reason), std::string::npos) << e.what();
  }
  // An attention resolved for the CPU refuses it before anything runs.
  const Attention attn(runtime, backplane::Device("cpu"));
  const at::Tensor on_cpu = at::randn({1, 2, 4, 8}, at::TensorOptions(at::kFloat));
  try {
    attn(on_cpu, q, on_cpu);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "backplane::torch::attention: key is on cuda:0 but this attention runs on cpu:0 "
              "(cpu plugin)");
  }
}

}  // namespace

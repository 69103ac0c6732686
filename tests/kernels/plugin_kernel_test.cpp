// The CPU attention kernels through the plugin ABI: the cpu plugin registers them, the runtime
// resolves them against a device, and a call goes straight into the plugin.
#include <backplane/backplane.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attention/attention.hpp"
#include "owned_tensor.hpp"

namespace {

using backplane::Runtime;

Runtime open_cpu() {
  backplane::RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"cpu", "sim"};
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  return Runtime::open(options);
}

using Tensor = backplane::testing::OwnedTensor;

// Random in [-1, 1) from a seed of its element count, or zeros.
Tensor tensor(std::vector<int64_t> dims, bool random = true) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return Tensor(std::move(dims), random ? static_cast<unsigned>(n) : 0u);
}

bp_attention_args args_for(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                           bool causal) {
  bp_attention_args args{};
  args.struct_size = sizeof args;
  args.query = &q.dl;
  args.key = &k.dl;
  args.value = &v.dl;
  args.output = &out.dl;
  args.causal = causal ? 1 : 0;
  return args;
}

TEST(PluginKernels, CpuRegistersSdpaAndEager) {
  const Runtime runtime = open_cpu();
  std::vector<std::string> implementations;
  for (const backplane::KernelInfo& k : runtime.kernels()) {
    if (k.op != backplane::kAttentionForward) continue;
    EXPECT_EQ(k.device_type, "cpu");
    EXPECT_EQ(k.plugin, "cpu");
    EXPECT_EQ(k.dtypes, (std::vector<std::string>{"float32", "bfloat16", "float16"}));
    implementations.push_back(k.implementation);
  }
  EXPECT_EQ(implementations, (std::vector<std::string>{"sdpa", "eager"}));
}

TEST(PluginKernels, SdpaThroughTheAbiMatchesEager) {
  const Runtime runtime = open_cpu();
  const backplane::AttentionKernel sdpa =
      runtime.attention_kernel(backplane::Device("cpu"), "sdpa");
  const backplane::AttentionKernel eager =
      runtime.attention_kernel(backplane::Device("cpu"), "eager");
  // GQA 4/2, seq_q 5 against a KV cache of 9, causal (bottom-right), head_dim 16.
  const auto q = tensor({1, 4, 5, 16}), k = tensor({1, 2, 9, 16}), v = tensor({1, 2, 9, 16});
  auto fused = tensor({1, 4, 5, 16}, false), reference = tensor({1, 4, 5, 16}, false);
  sdpa(args_for(q, k, v, fused, true));
  eager(args_for(q, k, v, reference, true));
  double worst = 0, largest = 0;
  for (size_t i = 0; i < fused.data.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(fused.data[i] - reference.data[i])));
    largest = std::max(largest, std::fabs(static_cast<double>(reference.data[i])));
  }
  EXPECT_GT(largest, 0.0);
  EXPECT_LE(worst, 1e-5 * largest);
}

TEST(PluginKernels, AttentionArgumentsFillTheAbiStruct) {
  const Runtime runtime = open_cpu();
  const backplane::AttentionKernel sdpa =
      runtime.attention_kernel(backplane::Device("cpu"), "sdpa");
  const auto q = tensor({1, 4, 5, 16}), k = tensor({1, 2, 9, 16}), v = tensor({1, 2, 9, 16});
  auto cpp = tensor({1, 4, 5, 16}, false), raw = tensor({1, 4, 5, 16}, false);
  backplane::AttentionArguments arguments;
  arguments.query = &q.dl;
  arguments.key = &k.dl;
  arguments.value = &v.dl;
  arguments.output = &cpp.dl;
  arguments.causal = true;
  arguments.scale = 0.3;
  sdpa(arguments);
  bp_attention_args args = args_for(q, k, v, raw, true);
  args.scale = 0.3;
  sdpa(args);
  EXPECT_EQ(cpp.data, raw.data);
  EXPECT_NE(cpp.data, tensor({1, 4, 5, 16}, false).data);  // something was written
  // The raw struct left at struct_size 0 is refused with the size to set.
  bp_attention_args empty{};
  try {
    sdpa(empty);
    FAIL() << "accepted";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "attention_forward/sdpa on cpu: attention_forward: args.struct_size is 0, smaller "
              "than ABI 1.3's " +
                  std::to_string(BP_ATTENTION_ARGS_SIZE_1_3) +
                  "; set it to sizeof(bp_attention_args)");
  }
}

TEST(PluginKernels, ARefusedCallIsAnErrorWithTheKernelsMessage) {
  const Runtime runtime = open_cpu();
  const backplane::AttentionKernel sdpa =
      runtime.attention_kernel(backplane::Device("cpu"), "sdpa");
  const auto q = tensor({1, 4, 5, 16}), k = tensor({1, 2, 9, 16}), v = tensor({1, 2, 9, 8});
  auto out = tensor({1, 4, 5, 16}, false);
  try {
    sdpa(args_for(q, k, v, out, false));
    FAIL() << "a mismatched value head size was accepted";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("attention_forward/sdpa on cpu: "), std::string::npos)
        << e.what();
  }
  bp_attention_args null_args = args_for(q, k, v, out, false);
  null_args.query = nullptr;
  EXPECT_THROW(sdpa(null_args), backplane::InvalidArgument);
}

TEST(PluginKernels, UnknownImplementationNamesWhatTheBackendOffers) {
  const Runtime runtime = open_cpu();
  try {
    runtime.attention_kernel(backplane::Device("cpu"), "flash_attention_2");
    FAIL();
  } catch (const backplane::NotFound& e) {
    EXPECT_EQ(std::string(e.what()),
              "no attention_forward kernel 'flash_attention_2' for cpu:0; its backend offers "
              "sdpa, eager");
  }
}

TEST(PluginKernels, ComputeCapabilityRequirement) {
  backplane::KernelInfo fa2{"attention_forward",
                            "flash_attention_2",
                            "cuda",
                            "cuda",
                            backplane::ComputeCapability{8, 0},
                            {"float16", "bfloat16"},
                            256};
  backplane::DeviceInfo t4;
  t4.device = backplane::Device("cuda", 0);
  t4.compute_capability = backplane::ComputeCapability{7, 5};
  EXPECT_EQ(backplane::kernel_mismatch(fa2, t4),
            "attention_forward/flash_attention_2 requires compute capability >= 8.0, but cuda:0 "
            "has 7.5");
  t4.compute_capability = backplane::ComputeCapability{9, 0};
  EXPECT_EQ(backplane::kernel_mismatch(fa2, t4), "");
  t4.device = backplane::Device("xpu", 0);
  EXPECT_EQ(backplane::kernel_mismatch(fa2, t4),
            "attention_forward/flash_attention_2 runs on cuda, not on xpu");
}

// Training through the ABI (1.6): the forward writes the logsumexp, the same plugin's backward
// reads it, and both give the library's own bits.
TEST(PluginKernels, SdpaAndEagerTrainThroughTheAbi) {
  const Runtime runtime = open_cpu();
  for (const char* implementation : {"sdpa", "eager"}) {
    SCOPED_TRACE(implementation);
    const backplane::AttentionKernel kernel =
        runtime.attention_kernel(backplane::Device("cpu"), implementation);
    ASSERT_TRUE(kernel.has_backward());
    const auto q = tensor({1, 4, 5, 16}), k = tensor({1, 2, 9, 16}), v = tensor({1, 2, 9, 16});
    const auto g = tensor({1, 4, 5, 16});
    auto out = tensor({1, 4, 5, 16}, false), lse = tensor({1, 4, 5}, false);
    auto dq = tensor({1, 4, 5, 16}, false), dk = tensor({1, 2, 9, 16}, false),
         dv = tensor({1, 2, 9, 16}, false);
    backplane::AttentionArguments fwd;
    fwd.query = &q.dl, fwd.key = &k.dl, fwd.value = &v.dl, fwd.output = &out.dl;
    fwd.logsumexp = &lse.dl, fwd.causal = true;
    kernel(fwd);
    backplane::AttentionBackwardArguments bwd;
    bwd.query = &q.dl, bwd.key = &k.dl, bwd.value = &v.dl, bwd.output = &out.dl;
    bwd.logsumexp = &lse.dl, bwd.grad_output = &g.dl, bwd.grad_query = &dq.dl;
    bwd.grad_key = &dk.dl, bwd.grad_value = &dv.dl, bwd.causal = true;
    kernel.backward(bwd);

    namespace attn = backplane::attention;
    auto out2 = tensor({1, 4, 5, 16}, false), lse2 = tensor({1, 4, 5}, false);
    auto dq2 = tensor({1, 4, 5, 16}, false), dk2 = tensor({1, 2, 9, 16}, false),
         dv2 = tensor({1, 2, 9, 16}, false);
    attn::Options options;
    options.causal = true;
    options.implementation = std::string(implementation) == "sdpa" ? attn::Implementation::kSdpa
                                                                   : attn::Implementation::kEager;
    attn::Tensors t;
    t.query = &q.dl, t.key = &k.dl, t.value = &v.dl, t.output = &out2.dl, t.logsumexp = &lse2.dl;
    ASSERT_TRUE(attn::forward(t, options).ok());
    attn::BackwardTensors b;
    b.query = &q.dl, b.key = &k.dl, b.value = &v.dl, b.output = &out2.dl, b.logsumexp = &lse2.dl;
    b.grad_output = &g.dl, b.grad_query = &dq2.dl, b.grad_key = &dk2.dl, b.grad_value = &dv2.dl;
    ASSERT_TRUE(attn::backward(b, options).ok());
    EXPECT_EQ(lse.data, lse2.data);
    EXPECT_EQ(dq.data, dq2.data);
    EXPECT_EQ(dk.data, dk2.data);
    EXPECT_EQ(dv.data, dv2.data);
    EXPECT_NE(dq.data, std::vector<float>(dq.data.size(), 0.0f));

    // The kernel's refusal comes back naming the backward.
    bwd.logsumexp = nullptr;
    try {
      kernel.backward(bwd);
      ADD_FAILURE() << "no error";
    } catch (const backplane::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("attention_backward: logsumexp is NULL"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace

// Runtime::resolve_attention and attention_kernel(resolution) over the plugins built here: the
// cpu plugin's kernels serve the CPU, simulated GPUs get transformers' answers, and a Hub
// resolution cannot be called yet.
#include <backplane/backplane.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

using backplane::AttentionResolution;
using backplane::Runtime;

Runtime open(const char* topology = nullptr) {
  if (topology != nullptr) {
    ::setenv("BACKPLANE_SIM_TOPOLOGY", topology, 1);
  } else {
    ::unsetenv("BACKPLANE_SIM_TOPOLOGY");
  }
  backplane::RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"cpu", "sim"};
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  return Runtime::open(options);
}

TEST(RuntimeAttention, TheDefaultOnTheCpuIsItsSdpaKernelReadyToCall) {
  const Runtime runtime = open();
  const AttentionResolution r = runtime.resolve_attention(backplane::Device("cpu"));
  EXPECT_EQ(r.requested, "");
  EXPECT_EQ(r.implementation, "sdpa");
  ASSERT_TRUE(r.kernel.has_value());
  EXPECT_EQ(r.kernel->plugin, "cpu");
  const backplane::AttentionKernel kernel = runtime.attention_kernel(r);
  EXPECT_EQ(kernel.info().implementation, "sdpa");
  EXPECT_EQ(kernel.info().plugin, "cpu");

  const AttentionResolution eager = runtime.resolve_attention(backplane::Device("cpu"), "eager");
  EXPECT_EQ(runtime.attention_kernel(eager).info().implementation, "eager");
}

TEST(RuntimeAttention, TheMachineHasTheSimulatedGpus) {
  const Runtime runtime = open(H100_TOPOLOGY);
  backplane::AttentionQuery query;
  query.hub_installed = [](const backplane::HubKernelId& id) {
    return id.repo == "kernels-community/flash-attn4";
  };
  const AttentionResolution r =
      runtime.resolve_attention(backplane::Device("cuda", 5), "flash_attention_4", query);
  EXPECT_EQ(r.device, backplane::Device("cuda", 5));
  EXPECT_EQ(r.source, AttentionResolution::Source::kHub);
  EXPECT_EQ(r.implementation, "kernels-community/flash-attn4");
  try {
    runtime.attention_kernel(r);
    ADD_FAILURE() << "a Hub kernel was handed out";
  } catch (const backplane::Unavailable& e) {
    EXPECT_EQ(std::string(e.what()),
              "attn_implementation \"kernels-community/flash-attn4\" is served by the Hub kernel "
              "kernels-community/flash-attn4, and backplane cannot load Hub kernels yet");
  }
  // The cpu of the same machine: FlashAttention's supported devices are there, but not on it.
  EXPECT_THROW(runtime.resolve_attention(backplane::Device("cpu"), "flash_attention_4", query),
               backplane::Unavailable);
}

TEST(RuntimeAttention, AnAbsentDeviceIsNotFound) {
  const Runtime runtime = open();
  EXPECT_THROW(runtime.resolve_attention(backplane::Device("cpu", 3)), backplane::NotFound);
}

}  // namespace

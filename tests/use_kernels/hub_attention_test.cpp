// attn_implementation served from the local kernel store: a Hub id resolves only when the
// store holds it, and its kernel loads and computes what the cpu plugin's sdpa computes.
#include <backplane/backplane.hpp>
#include <backplane/hub/attention.hpp>
#include <backplane/hub/errors.hpp>

#include <gtest/gtest.h>

#include <vector>

#include "loader/temp_folder.hpp"
#include "support/owned_tensor.hpp"

namespace {

using backplane::AttentionResolution;
using backplane::Device;
using backplane::Runtime;
using backplane::hub::Store;

Runtime open_cpu() {
  backplane::RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"cpu"};
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  return Runtime::open(options);
}

using Tensor = backplane::testing::OwnedTensor;

constexpr const char* kHubId = "tests-org/cpu-attention:sdpa_tiled";

TEST(HubAttention, AHubIdResolvesOnlyWhenTheStoreHasIt) {
  backplane::testing::TempFolder folder;
  const Store store(folder.path() / "store");
  const Runtime runtime = open_cpu();
  EXPECT_THROW(backplane::hub::resolve_attention(runtime, store, Device("cpu"), kHubId),
               backplane::Error);
  store.install(ATTENTION_PACKAGE);
  const AttentionResolution r =
      backplane::hub::resolve_attention(runtime, store, Device("cpu"), kHubId);
  EXPECT_EQ(r.source, AttentionResolution::Source::kHub);
  ASSERT_TRUE(r.hub.has_value());
  EXPECT_EQ(r.hub->repo, "tests-org/cpu-attention");
  // The plain Runtime cannot call a Hub kernel; the hub can.
  EXPECT_THROW(runtime.attention_kernel(r), backplane::Unavailable);
  // Unlocked and not from a trusted publisher: refused until the user trusts it.
  EXPECT_THROW(backplane::hub::attention_kernel(runtime, store, r), backplane::hub::PackageError);
  backplane::hub::LoadOptions trusted;
  trusted.trust.add("tests-org", "test");
  const backplane::AttentionKernel hub_kernel =
      backplane::hub::attention_kernel(runtime, store, r, trusted);
  EXPECT_EQ(hub_kernel.info().implementation, "sdpa_tiled");

  // Native resolutions pass through to the plugin's kernel.
  const AttentionResolution native =
      backplane::hub::resolve_attention(runtime, store, Device("cpu"));
  EXPECT_EQ(native.source, AttentionResolution::Source::kNative);
  const backplane::AttentionKernel sdpa = backplane::hub::attention_kernel(runtime, store, native);
  EXPECT_EQ(sdpa.info().plugin, "cpu");

  const Tensor q({1, 4, 5, 16}, 1), k({1, 2, 9, 16}, 2), v({1, 2, 9, 16}, 3);
  Tensor from_hub({1, 4, 5, 16}, 4), from_plugin({1, 4, 5, 16}, 5);
  bp_attention_args args{};
  args.struct_size = sizeof args;
  args.query = &q.dl;
  args.key = &k.dl;
  args.value = &v.dl;
  args.causal = 1;
  args.output = &from_hub.dl;
  hub_kernel(args);
  args.output = &from_plugin.dl;
  sdpa(args);
  EXPECT_EQ(from_hub.data, from_plugin.data);

  // A function the package does not have.
  backplane::AttentionResolution wrong = r;
  wrong.hub->function = "flash_fwd";
  try {
    backplane::hub::attention_kernel(runtime, store, wrong, trusted);
    ADD_FAILURE() << "no error";
  } catch (const backplane::hub::PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("has no attention_forward kernel named flash_fwd; it "
                                         "has: sdpa_tiled"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

// resolve_attention: every rule and message, over machines written as tables.
#include <backplane/error.hpp>
#include <backplane/rules/attention.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace {

using backplane::AttentionEnvironment;
using backplane::AttentionResolution;
using backplane::ComputeCapability;
using backplane::DeviceInfo;
using backplane::HubKernelId;
using backplane::KernelInfo;
using Strings = std::vector<std::string>;
using Source = AttentionResolution::Source;

KernelInfo kernel(std::string implementation, std::string device_type, std::string plugin,
                  std::optional<ComputeCapability> min = std::nullopt, Strings dtypes = {},
                  int max_head_dim = 0) {
  KernelInfo k;
  k.op = backplane::kAttentionForward;
  k.implementation = std::move(implementation);
  k.device_type = std::move(device_type);
  k.plugin = std::move(plugin);
  k.min_compute_capability = min;
  k.dtypes = std::move(dtypes);
  k.max_head_dim = max_head_dim;
  return k;
}

// A machine: the device resolved for, every kernel registered, what the environment adds.
struct Machine {
  DeviceInfo device;
  std::vector<KernelInfo> kernels;
  AttentionEnvironment env;

  Machine& on(std::string type, std::string plugin,
              std::optional<ComputeCapability> capability = std::nullopt) {
    device.device = backplane::Device(type, 0);
    device.plugin = std::move(plugin);
    device.compute_capability = capability;
    return *this;
  }
  Machine& available(Strings types) {
    env.available_device_types = std::move(types);
    return *this;
  }
  Machine& with(KernelInfo k) {
    kernels.push_back(std::move(k));
    return *this;
  }
  Machine& hub(Strings repos) {
    env.hub_installed = [repos](const HubKernelId& id) {
      return std::find(repos.begin(), repos.end(), id.repo) != repos.end();
    };
    return *this;
  }
  Machine& dtype(std::string d) {
    env.dtype = std::move(d);
    return *this;
  }
  Machine& head_dim(int h) {
    env.head_dim = h;
    return *this;
  }
};

Machine cpu_box() {
  return Machine()
      .on("cpu", "cpu")
      .available({"cpu"})
      .with(kernel("sdpa", "cpu", "cpu"))
      .with(kernel("eager", "cpu", "cpu"));
}

// A CUDA machine whose plugin registers sdpa, eager and the given flash kernels.
Machine cuda_box(ComputeCapability capability, std::vector<int> flash = {}) {
  Machine m = cpu_box();
  m.on("cuda", "cuda", capability).available({"cpu", "cuda"});
  m.with(kernel("sdpa", "cuda", "cuda")).with(kernel("eager", "cuda", "cuda"));
  for (int v : flash) {
    m.with(kernel("flash_attention_" + std::to_string(v), "cuda", "cuda",
                  ComputeCapability{v == 4 ? 9 : 8, 0}, {"float16", "bfloat16"}, 256));
  }
  return m;
}

const std::string kPreface2 =
    "FlashAttention2 has been toggled on, but it cannot be used due to the following error: ";
const std::string kPreface3 =
    "FlashAttention3 has been toggled on, but it cannot be used due to the following error: ";
const std::string kPreface4 =
    "FlashAttention4 has been toggled on, but it cannot be used due to the following error: ";
const std::string kUnsupportedTail =
    "\"` is not supported. The only possible arguments are `attn_implementation=\"eager\"`, "
    "`\"paged|eager\"`, `\"attn_implementation=flash_attention_2\"`, "
    "`\"attn_implementation=flash_attention_3\"`, `\"attn_implementation=flash_attention_4\"`, "
    "`\"attn_implementation=sdpa\"`, `\"attn_implementation=flex_attention\"`.";
const std::string kPagedWarning =
    "The `paged|` prefix is no longer needed, except for `paged|eager`. Support for paged|sdpa "
    "and paged|*flash* implementations will be removed in v5.23. Please remove the `paged|` "
    "prefix.";

std::string hub_warning(const std::string& repo) {
  return "You do not have `flash_attn` installed, using `" + repo +
         "` from the `kernels` library instead!";
}

// ---- resolutions that succeed ---------------------------------------------------------------

struct Resolves {
  const char* name;
  Machine machine;
  std::optional<std::string> requested;
  std::string implementation;
  Source source;
  std::string served_by;  // native: the kernel's plugin; hub: the repo
  Strings warnings;
  std::string note;  // a substring of the notes; empty: no notes
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Resolves& x, std::ostream* os) {
  *os << x.name;
}

class Resolution : public testing::TestWithParam<Resolves> {};

TEST_P(Resolution, RunsWhatTheRulesPick) {
  const Resolves& row = GetParam();
  const Machine& m = row.machine;
  const AttentionResolution r =
      backplane::resolve_attention(m.device, m.kernels, row.requested, m.env);
  EXPECT_EQ(r.device, m.device.device);
  EXPECT_EQ(r.requested, row.requested.value_or(""));
  EXPECT_EQ(r.implementation, row.implementation);
  EXPECT_EQ(r.source, row.source);
  if (row.source == Source::kNative) {
    ASSERT_TRUE(r.kernel.has_value());
    EXPECT_FALSE(r.hub.has_value());
    EXPECT_EQ(r.kernel->plugin, row.served_by);
    EXPECT_EQ(r.kernel->device_type, m.device.device.type());
  } else {
    ASSERT_TRUE(r.hub.has_value());
    EXPECT_FALSE(r.kernel.has_value());
    EXPECT_EQ(r.hub->repo, row.served_by);
  }
  EXPECT_EQ(r.warnings, row.warnings);
  if (row.note.empty()) {
    EXPECT_TRUE(r.notes.empty());
  } else {
    ASSERT_EQ(r.notes.size(), 1u);
    EXPECT_NE(r.notes[0].find(row.note), std::string::npos) << r.notes[0];
  }
}

const Strings kNone;
const std::string kFloat32Warning =
    "Flash Attention 2 only supports torch.float16 and torch.bfloat16 dtypes, but the current "
    "dype in the model is torch.float32. You should run training or inference using Automatic "
    "Mixed-Precision via the `with torch.autocast(device_type='torch_device'):` decorator, or "
    "load the model with the `dtype` argument. Example: `model = "
    "AutoModel.from_pretrained(\"meta-llama/Llama-3.2-1B\", "
    "attn_implementation=\"flash_attention_2\", dtype=torch.float16)`";

INSTANTIATE_TEST_SUITE_P(
    Rules, Resolution,
    testing::Values(
        Resolves{"default_is_sdpa", cpu_box(), std::nullopt, "sdpa", Source::kNative, "cpu", kNone,
                 ""},
        Resolves{"explicit_sdpa", cpu_box(), "sdpa", "sdpa", Source::kNative, "cpu", kNone, ""},
        Resolves{"eager", cpu_box(), "eager", "eager", Source::kNative, "cpu", kNone, ""},
        Resolves{"paged_eager_runs_eager", cpu_box(), "paged|eager", "paged|eager", Source::kNative,
                 "cpu", kNone, ""},
        Resolves{"paged_sdpa_warns_and_drops_the_prefix",
                 cpu_box(),
                 "paged|sdpa",
                 "sdpa",
                 Source::kNative,
                 "cpu",
                 {kPagedWarning},
                 ""},
        Resolves{"default_falls_back_to_eager_with_a_note",
                 Machine().on("cpu", "cpu").available({"cpu"}).with(kernel("eager", "cpu", "cpu")),
                 std::nullopt, "eager", Source::kNative, "cpu", kNone,
                 "the default sdpa fell back to eager: no plugin registers an attention_forward "
                 "kernel 'sdpa' for cpu"},
        Resolves{"default_falls_back_when_sdpa_refuses_the_dtype",
                 Machine()
                     .on("cpu", "cpu")
                     .available({"cpu"})
                     .with(kernel("sdpa", "cpu", "cpu", std::nullopt, {"float32"}))
                     .with(kernel("eager", "cpu", "cpu"))
                     .dtype("float16"),
                 std::nullopt, "eager", Source::kNative, "cpu", kNone,
                 "the default sdpa fell back to eager: attention_forward/sdpa on cpu takes "
                 "float32, not float16"},
        Resolves{"a_later_kernel_of_the_same_name_that_fits",
                 Machine()
                     .on("cpu", "cpu")
                     .available({"cpu"})
                     .with(kernel("sdpa", "cpu", "cpu", std::nullopt, {"float32"}))
                     .with(kernel("sdpa", "cpu", "cpu", std::nullopt, {"float16"}))
                     .dtype("float16"),
                 "sdpa", "sdpa", Source::kNative, "cpu", kNone, ""},
        Resolves{"the_native_flash_kernel", cuda_box({8, 0}, {2}), "flash_attention_2",
                 "flash_attention_2", Source::kNative, "cuda", kNone, ""},
        Resolves{"native_flash_with_float32_warns_as_transformers",
                 [] {
                   Machine m = cuda_box({8, 0});
                   m.with(kernel("flash_attention_2", "cuda", "cuda", ComputeCapability{8, 0}));
                   return m.dtype("float32");
                 }(),
                 "flash_attention_2",
                 "flash_attention_2",
                 Source::kNative,
                 "cuda",
                 {kFloat32Warning},
                 ""},
        Resolves{"fa3_native_on_ampere", cuda_box({8, 6}, {3}), "flash_attention_3",
                 "flash_attention_3", Source::kNative, "cuda", kNone, ""},
        Resolves{"fa4_native_on_hopper", cuda_box({9, 0}, {4}), "flash_attention_4",
                 "flash_attention_4", Source::kNative, "cuda", kNone, ""},
        Resolves{"paged_fa2_native",
                 cuda_box({8, 0}, {2}),
                 "paged|flash_attention_2",
                 "flash_attention_2",
                 Source::kNative,
                 "cuda",
                 {kPagedWarning},
                 ""},
        Resolves{"fa2_hub_fallback",
                 cuda_box({8, 0}).hub({"kernels-community/flash-attn2"}),
                 "flash_attention_2",
                 "kernels-community/flash-attn2",
                 Source::kHub,
                 "kernels-community/flash-attn2",
                 {hub_warning("kernels-community/flash-attn2")},
                 "no native flash_attention_2 kernel can run on cuda:0"},
        Resolves{"fa3_hub_fallback",
                 cuda_box({9, 0}).hub({"kernels-community/vllm-flash-attn3"}),
                 "flash_attention_3",
                 "kernels-community/vllm-flash-attn3",
                 Source::kHub,
                 "kernels-community/vllm-flash-attn3",
                 {hub_warning("kernels-community/vllm-flash-attn3")},
                 "replaces it"},
        Resolves{"fa4_hub_fallback_on_hopper",
                 cuda_box({9, 0}).hub({"kernels-community/flash-attn4"}),
                 "flash_attention_4",
                 "kernels-community/flash-attn4",
                 Source::kHub,
                 "kernels-community/flash-attn4",
                 {hub_warning("kernels-community/flash-attn4")},
                 "replaces it"},
        Resolves{"fa2_hub_when_the_native_kernel_refuses_the_head_dim",
                 cuda_box({8, 0}, {2}).hub({"kernels-community/flash-attn2"}).head_dim(512),
                 "flash_attention_2",
                 "kernels-community/flash-attn2",
                 Source::kHub,
                 "kernels-community/flash-attn2",
                 {hub_warning("kernels-community/flash-attn2")},
                 "takes head dims up to 256, not 512"},
        Resolves{"fa2_on_rocm_is_aiter",
                 Machine()
                     .on("rocm", "rocm")
                     .available({"cpu", "rocm"})
                     .hub({"kernels-community/aiter-flash-attn"}),
                 "flash_attention_2",
                 "kernels-community/aiter-flash-attn",
                 Source::kHub,
                 "kernels-community/aiter-flash-attn",
                 {hub_warning("kernels-community/aiter-flash-attn")},
                 "replaces it"},
        Resolves{"fa2_on_xpu_is_the_hub_kernel_without_a_warning",
                 Machine()
                     .on("xpu", "xpu")
                     .available({"cpu", "xpu"})
                     .hub({"kernels-community/flash-attn2"}),
                 "flash_attention_2", "kernels-community/flash-attn2", Source::kHub,
                 "kernels-community/flash-attn2", kNone, "replaces it"},
        Resolves{"hub_id_installed", cpu_box().hub({"acme/attn"}), "acme/attn@v2:fwd",
                 "acme/attn@v2:fwd", Source::kHub, "acme/attn", kNone, ""},
        Resolves{"paged_hub_id",
                 cpu_box().hub({"acme/attn"}),
                 "paged|acme/attn",
                 "acme/attn",
                 Source::kHub,
                 "acme/attn",
                 {kPagedWarning},
                 ""}),
    [](const testing::TestParamInfo<Resolves>& row) { return std::string(row.param.name); });

// ---- resolutions that fail --------------------------------------------------------------------

enum class Kind { kInvalidArgument, kUnavailable };

struct Fails {
  const char* name;
  Machine machine;
  std::optional<std::string> requested;
  Kind kind;
  std::string message;  // exact
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Fails& x, std::ostream* os) {
  *os << x.name;
}

class Failure : public testing::TestWithParam<Fails> {};

TEST_P(Failure, SaysWhy) {
  const Fails& row = GetParam();
  const Machine& m = row.machine;
  std::string message;
  bool right_kind = false;
  try {
    backplane::resolve_attention(m.device, m.kernels, row.requested, m.env);
  } catch (const backplane::InvalidArgument& e) {
    right_kind = row.kind == Kind::kInvalidArgument;
    message = e.what();
  } catch (const backplane::Unavailable& e) {
    right_kind = row.kind == Kind::kUnavailable;
    message = e.what();
  }
  EXPECT_TRUE(right_kind) << "threw: " << message;
  EXPECT_EQ(message, row.message);
}

const std::string kFa2Devices = "('cuda', 'mlu', 'musa', 'npu', 'xpu')";

INSTANTIATE_TEST_SUITE_P(
    Rules, Failure,
    testing::Values(
        Fails{"unsupported_name", cpu_box(), "foo", Kind::kInvalidArgument,
              "Specified `attn_implementation=\"foo" + kUnsupportedTail},
        Fails{"empty_name", cpu_box(), "", Kind::kInvalidArgument,
              "Specified `attn_implementation=\"" + kUnsupportedTail},
        Fails{"flash_attention_5", cpu_box(), "flash_attention_5", Kind::kInvalidArgument,
              "Specified `attn_implementation=\"flash_attention_5" + kUnsupportedTail},
        Fails{"paged_unknown_names_the_stripped_value", cpu_box(), "paged|foo",
              Kind::kInvalidArgument, "Specified `attn_implementation=\"foo" + kUnsupportedTail},
        Fails{"malformed_hub_like_id", cpu_box(), "org/repo@", Kind::kInvalidArgument,
              "'org/repo@' is not a Hub kernel id; expected org/repo[@revision][:function] "
              "(\"kernels-community/flash-attn2\", "
              "\"kernels-community/vllm-flash-attn3@v1:flash_attn_func\")"},
        Fails{"explicit_sdpa_does_not_fall_back",
              Machine().on("cpu", "cpu").available({"cpu"}).with(kernel("eager", "cpu", "cpu")),
              "sdpa", Kind::kUnavailable,
              "attn_implementation \"sdpa\" cannot run on cpu:0: no plugin registers an "
              "attention_forward kernel 'sdpa' for cpu"},
        Fails{"default_without_eager_either", Machine().on("cpu", "cpu").available({"cpu"}),
              std::nullopt, Kind::kUnavailable,
              "neither the default sdpa nor its fallback eager can run on cpu:0: no plugin "
              "registers an attention_forward kernel 'sdpa' for cpu; no plugin registers an "
              "attention_forward kernel 'eager' for cpu"},
        Fails{"eager_of_another_device_type", cuda_box({8, 0}).on("mps", "mps"), "eager",
              Kind::kUnavailable,
              "attn_implementation \"eager\" cannot run on mps:0: no plugin registers an "
              "attention_forward kernel 'eager' for mps (it runs on cpu (plugin cpu), cuda "
              "(plugin cuda))"},
        Fails{"sdpa_refusing_the_dtype",
              Machine()
                  .on("cpu", "cpu")
                  .available({"cpu"})
                  .with(kernel("sdpa", "cpu", "cpu", std::nullopt, {"float32"}))
                  .dtype("float16"),
              "sdpa", Kind::kUnavailable,
              "attn_implementation \"sdpa\" cannot run on cpu:0: attention_forward/sdpa on cpu "
              "takes float32, not float16"},
        Fails{"flex_without_a_kernel", cpu_box(), "flex_attention", Kind::kUnavailable,
              "attn_implementation \"flex_attention\" cannot run on cpu:0: no plugin registers "
              "an attention_forward kernel 'flex_attention' for cpu"},
        Fails{"fa2_no_package_no_hub", cpu_box(), "flash_attention_2", Kind::kUnavailable,
              kPreface2 + "the package for FlashAttention2 doesn't seem to be installed."},
        Fails{"fa4_no_package_hub_not_installed", cuda_box({9, 0}).hub({}), "flash_attention_4",
              Kind::kUnavailable,
              kPreface4 + "the package for FlashAttention4 doesn't seem to be installed."},
        Fails{"fa2_hub_has_no_cpu_build", cpu_box().hub({"kernels-community/flash-attn2"}),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 + "the package for FlashAttention2 doesn't seem to be installed."},
        Fails{"fa2_package_but_no_gpu_on_the_machine",
              cpu_box().with(kernel("flash_attention_2", "cuda", "cuda", ComputeCapability{8, 0})),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 +
                  "FlashAttention2 is not available on CPU. Please make sure you are on any of "
                  "the supported devices: " +
                  kFa2Devices + "."},
        Fails{"fa3_package_but_no_gpu_on_the_machine",
              cpu_box().with(kernel("flash_attention_3", "cuda", "cuda", ComputeCapability{8, 0})),
              "flash_attention_3", Kind::kUnavailable,
              kPreface3 +
                  "FlashAttention3 is not available on CPU. Please make sure you are on any of "
                  "the supported devices: ('cuda',)."},
        Fails{"fa2_on_the_cpu_of_a_cuda_machine", cuda_box({8, 0}, {2}).on("cpu", "cpu"),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 +
                  "FlashAttention2 is not available on cpu:0. Please make sure you are on any "
                  "of the supported devices: " +
                  kFa2Devices + "."},
        Fails{"fa2_native_below_ampere", cuda_box({7, 5}, {2}), "flash_attention_2",
              Kind::kUnavailable,
              kPreface2 + "FlashAttention2 requires compute capability >= 8, but found (7, 5) with "
                          "compute capability 7.x"},
        Fails{"fa4_native_below_hopper", cuda_box({8, 0}, {4}), "flash_attention_4",
              Kind::kUnavailable,
              kPreface4 + "FlashAttention4 requires compute capability >= 9, but found (8, 0) with "
                          "compute capability 8.x"},
        Fails{"fa3_native_below_ampere", cuda_box({7, 0}, {3}), "flash_attention_3",
              Kind::kUnavailable,
              kPreface3 + "FlashAttention3 requires compute capability >= 8, but found (7, 0) with "
                          "compute capability 7.x"},
        Fails{"fa4_hub_below_hopper", cuda_box({8, 9}).hub({"kernels-community/flash-attn4"}),
              "flash_attention_4", Kind::kUnavailable,
              kPreface4 + "FlashAttention4 requires compute capability >= 9, but found (8, 9) with "
                          "compute capability 8.x"},
        Fails{"fa2_kernel_requiring_8_6",
              [] {
                Machine m = cuda_box({8, 0});
                m.with(kernel("flash_attention_2", "cuda", "cuda", ComputeCapability{8, 6}));
                return m;
              }(),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 +
                  "FlashAttention2 requires compute capability >= 8.6, but found (8, 0) with "
                  "compute capability 8.x"},
        Fails{"fa2_native_refuses_float32", cuda_box({8, 0}, {2}).dtype("float32"),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 +
                  "attention_forward/flash_attention_2 on cuda takes float16, bfloat16, not "
                  "float32"},
        Fails{"fa2_kernel_of_a_plugin_that_does_not_serve_the_device",
              cuda_box({8, 0}, {2}).on("cuda", "sim", ComputeCapability{9, 0}), "flash_attention_2",
              Kind::kUnavailable,
              kPreface2 +
                  "attention_forward/flash_attention_2 of plugin cuda does not serve cuda:0, "
                  "whose devices come from plugin sim"},
        Fails{"fa2_package_for_cuda_only_on_rocm",
              cuda_box({8, 0}, {2}).on("rocm", "rocm").available({"cpu", "rocm"}),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 +
                  "no plugin registers an attention_forward kernel 'flash_attention_2' for rocm "
                  "(it runs on cuda (plugin cuda))"},
        Fails{"fa3_on_mps_of_a_mac",
              Machine()
                  .on("mps", "mps")
                  .available({"cpu", "mps"})
                  .with(kernel("flash_attention_3", "cuda", "cuda", ComputeCapability{8, 0})),
              "flash_attention_3", Kind::kUnavailable,
              // transformers says "CPU" here too; the device it was asked for is named.
              kPreface3 +
                  "FlashAttention3 is not available on mps:0. Please make sure you are on any of "
                  "the supported devices: ('cuda',)."},
        Fails{"fa2_on_a_plugins_own_device_type",
              Machine()
                  .on("zpu", "zpu")
                  .available({"cpu", "zpu"})
                  .with(kernel("flash_attention_2", "cuda", "cuda", ComputeCapability{8, 0})),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 +
                  "FlashAttention2 is not available on zpu:0. Please make sure you are on any of "
                  "the supported devices: " +
                  kFa2Devices + "."},
        Fails{"no_hub_fallback_where_npus_are",
              Machine()
                  .on("cuda", "cuda", ComputeCapability{8, 0})
                  .available({"cpu", "cuda", "npu"})
                  .hub({"kernels-community/flash-attn2"}),
              "flash_attention_2", Kind::kUnavailable,
              kPreface2 + "the package for FlashAttention2 doesn't seem to be installed."},
        Fails{"hub_id_not_installed", cpu_box(), "acme/attn@v2", Kind::kUnavailable,
              "the Hub kernel acme/attn@v2 is not in the local kernel store; install it with "
              "`kernel-hub install acme/attn@v2`"},
        Fails{"hub_id_without_a_build_for_the_device",
              cpu_box().hub({"kernels-community/flash-attn4"}), "kernels-community/flash-attn4",
              Kind::kUnavailable,
              "the Hub kernel kernels-community/flash-attn4 ships builds for cuda only, not for "
              "cpu:0"}),
    [](const testing::TestParamInfo<Fails>& row) { return std::string(row.param.name); });

// ---- tables -----------------------------------------------------------------------------------

struct FallbackRow {
  const char* implementation;
  const char* device_type;
  std::optional<std::string> repo;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const FallbackRow& x, std::ostream* os) {
  *os << std::string(x.implementation) + " on " + x.device_type;
}

class HubFallback : public testing::TestWithParam<FallbackRow> {};

TEST_P(HubFallback, IsTransformersRepo) {
  const FallbackRow& row = GetParam();
  const std::optional<HubKernelId> id =
      backplane::flash_attention_hub_fallback(row.implementation, row.device_type);
  ASSERT_EQ(id.has_value(), row.repo.has_value());
  if (id) {
    EXPECT_EQ(id->str(), *row.repo);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Repos, HubFallback,
    testing::Values(FallbackRow{"flash_attention_2", "cuda", "kernels-community/flash-attn2"},
                    FallbackRow{"flash_attention_2", "xpu", "kernels-community/flash-attn2"},
                    FallbackRow{"flash_attention_2", "rocm", "kernels-community/aiter-flash-attn"},
                    FallbackRow{"flash_attention_3", "cuda", "kernels-community/vllm-flash-attn3"},
                    FallbackRow{"flash_attention_3", "rocm", "kernels-community/aiter-flash-attn"},
                    FallbackRow{"flash_attention_4", "cuda", "kernels-community/flash-attn4"},
                    FallbackRow{"flash_attention_4", "rocm", "kernels-community/flash-attn4"},
                    FallbackRow{"sdpa", "cuda", std::nullopt},
                    FallbackRow{"flash_attention_5", "cuda", std::nullopt}));

TEST(AttentionNames, EveryNameResolvesOrFailsWithAReasonButNeverAsUnsupported) {
  const Machine m = cuda_box({9, 0}, {2, 3, 4});
  for (const std::string& name : backplane::attention_implementation_names()) {
    SCOPED_TRACE(name);
    try {
      backplane::resolve_attention(m.device, m.kernels, name, m.env);
    } catch (const backplane::Unavailable&) {
      EXPECT_EQ(name, "flex_attention");  // no plugin registers one
    }
  }
  EXPECT_EQ(backplane::attention_implementation_names().size(), 11u);
}

TEST(AttentionSource, PrintsItsName) {
  EXPECT_STREQ(backplane::to_string(Source::kNative), "native");
  EXPECT_STREQ(backplane::to_string(Source::kHub), "hub");
}

}  // namespace

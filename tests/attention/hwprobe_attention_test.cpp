// hwprobe attention as a process: the JSON shape, resolutions over simulated topologies (the
// sim plugin registers no kernels, so its CUDA devices show the Hub fallback and transformers'
// errors), and exit code 2 for bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "process.hpp"

namespace {

using nlohmann::json;
using testing_support::ProcessResult;
using Args = std::vector<std::string>;

const std::string kFa2Preface =
    "FlashAttention2 has been toggled on, but it cannot be used due to the following error: ";
const std::string kFa4Preface =
    "FlashAttention4 has been toggled on, but it cannot be used due to the following error: ";

// hwprobe attention with the given plugins only.
ProcessResult attention(Args args, const std::string& plugins = "cpu,sim") {
  args.insert(args.begin(), {HWPROBE_PATH, "attention"});
  return testing_support::run_process(args, {{"BACKPLANE_PLUGIN_PATH", PLUGIN_BUILD_DIR},
                                             {"BACKPLANE_PLUGINS", plugins},
                                             {"BACKPLANE_LOG", "error"},
                                             {"BACKPLANE_SIM_TOPOLOGY", ""},
                                             {"CUDA_VISIBLE_DEVICES", ""}});
}

json attention_json(Args args, const std::string& plugins = "cpu,sim") {
  args.push_back("--json");
  const ProcessResult r = attention(args, plugins);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

// The one resolution of `device` in a --impl run.
json only(const json& j, const std::string& device) {
  for (const json& d : j.at("devices")) {
    if (d.at("device") == device) {
      EXPECT_EQ(d.at("resolutions").size(), 1u);
      return d.at("resolutions").at(0);
    }
  }
  ADD_FAILURE() << "no " << device << " in " << j.dump();
  return json();
}

TEST(HwprobeAttention, JsonHasEveryResolutionOfEveryDevice) {
  const json j = attention_json({"--sim", "h100x8"});
  EXPECT_TRUE(j.at("dtype").is_null());
  EXPECT_TRUE(j.at("hub_kernels").empty());
  ASSERT_EQ(j.at("devices").size(), 9u);  // cpu and 8 H100s
  for (const json& d : j["devices"]) {
    ASSERT_EQ(d.at("resolutions").size(), 12u) << d["device"];  // the default and 11 names
    EXPECT_TRUE(d.at("resolutions")[0].at("requested").is_null());
    for (const json& r : d["resolutions"]) {
      for (const char* key : {"requested", "implementation", "source", "error"}) {
        EXPECT_TRUE(r.contains(key)) << key;
      }
      EXPECT_NE(r["implementation"].is_null(), r["error"].is_null()) << r.dump();
    }
  }
  EXPECT_EQ(j["devices"][1].at("compute_capability"), "9.0");
}

TEST(HwprobeAttention, TheDefaultOnTheCpuIsTheNativeSdpa) {
  const json r = only(attention_json({"--device", "cpu", "--impl", "sdpa"}), "cpu:0");
  EXPECT_EQ(r.at("implementation"), "sdpa");
  EXPECT_EQ(r.at("source"), "native");
  EXPECT_EQ(r.at("kernel").at("plugin"), "cpu");
  EXPECT_TRUE(r.at("hub").is_null());

  const ProcessResult text = attention({"--device", "cpu"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("  (default)                sdpa (native, plugin cpu"), std::string::npos)
      << text.out;
}

struct Row {
  const char* name;
  Args args;
  const char* device;
  std::string implementation;  // empty: an error
  std::string text;            // the error, or the first warning ("" for none)
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Row& x, std::ostream* os) {
  *os << x.name;
}

class HwprobeAttentionRows : public testing::TestWithParam<Row> {};

TEST_P(HwprobeAttentionRows, Resolve) {
  const Row& row = GetParam();
  const json r = only(attention_json(row.args), row.device);
  if (row.implementation.empty()) {
    EXPECT_TRUE(r.at("implementation").is_null());
    EXPECT_EQ(r.at("error"), row.text);
    return;
  }
  EXPECT_EQ(r.at("implementation"), row.implementation);
  EXPECT_TRUE(r.at("error").is_null());
  if (row.text.empty()) {
    EXPECT_TRUE(r.at("warnings").empty()) << r.dump();
  } else {
    ASSERT_FALSE(r.at("warnings").empty());
    EXPECT_EQ(r["warnings"][0], row.text);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sim, HwprobeAttentionRows,
    testing::Values(
        Row{"fa2_on_an_h100_without_the_package",
            {"--sim", "h100x8", "--device", "cuda:0", "--impl", "flash_attention_2"},
            "cuda:0",
            "",
            kFa2Preface + "the package for FlashAttention2 doesn't seem to be installed."},
        Row{"fa4_hub_kernel_on_an_h100",
            {"--sim", "h100x8", "--device", "cuda:7", "--impl", "flash_attention_4",
             "--with-hub-kernel", "kernels-community/flash-attn4"},
            "cuda:7",
            "kernels-community/flash-attn4",
            "You do not have `flash_attn` installed, using `kernels-community/flash-attn4` from "
            "the `kernels` library instead!"},
        Row{"fa4_hub_kernel_below_hopper",
            {"--sim", "mixed", "--device", "cuda:1", "--impl", "flash_attention_4",
             "--with-hub-kernel", "kernels-community/flash-attn4"},
            "cuda:1",
            "",
            kFa4Preface + "FlashAttention4 requires compute capability >= 9, but found (8, 6) "
                          "with compute capability 8.x"},
        Row{"fa2_hub_kernel_below_ampere",
            {"--sim", T4_TOPOLOGY, "--device", "cuda:0", "--impl", "flash_attention_2",
             "--with-hub-kernel", "kernels-community/flash-attn2"},
            "cuda:0",
            "",
            kFa2Preface + "FlashAttention2 requires compute capability >= 8, but found (7, 5) "
                          "with compute capability 7.x"},
        Row{"fa2_on_rocm_is_aiter",
            {"--sim", "mi300x8", "--device", "rocm:0", "--impl", "flash_attention_2",
             "--with-hub-kernel", "kernels-community/aiter-flash-attn"},
            "rocm:0",
            "kernels-community/aiter-flash-attn",
            "You do not have `flash_attn` installed, using `kernels-community/aiter-flash-attn` "
            "from the `kernels` library instead!"},
        Row{"no_kernel_at_all_on_a_simulated_gpu",
            {"--sim", "h100x8", "--device", "cuda:0", "--impl", "sdpa"},
            "cuda:0",
            "",
            "attn_implementation \"sdpa\" cannot run on cuda:0: no plugin registers an "
            "attention_forward kernel 'sdpa' for cuda (it runs on cpu (plugin cpu))"},
        Row{"hub_id_not_in_the_store",
            {"--device", "cpu", "--impl", "acme/attn@v2"},
            "cpu:0",
            "",
            "the Hub kernel acme/attn@v2 is not in the local kernel store; install it with "
            "`kernel-hub install acme/attn@v2`"},
        Row{"hub_id_in_the_store",
            {"--device", "cpu", "--impl", "acme/attn:fwd", "--with-hub-kernel", "acme/attn"},
            "cpu:0",
            "acme/attn:fwd",
            ""},
        Row{"paged_sdpa_warns",
            {"--device", "cpu", "--impl", "paged|sdpa"},
            "cpu:0",
            "sdpa",
            "The `paged|` prefix is no longer needed, except for `paged|eager`. Support for "
            "paged|sdpa and paged|*flash* implementations will be removed in v5.23. Please "
            "remove the `paged|` prefix."}),
    [](const testing::TestParamInfo<Row>& p) { return std::string(p.param.name); });

// The cuda plugin registers flash_attention_2 when it was built with nvcc: that is "the package
// installed", so the device checks decide, and its kernels do not serve simulated devices.
TEST(HwprobeAttention, TheCudaPluginsFlashKernelAgainstSimulatedDevices) {
  const std::string plugins = "cpu,sim,cuda";
  const json report = [&] {
    const ProcessResult r = testing_support::run_process(
        {HWPROBE_PATH, "--json"}, {{"BACKPLANE_PLUGIN_PATH", PLUGIN_BUILD_DIR},
                                   {"BACKPLANE_PLUGINS", plugins},
                                   {"BACKPLANE_LOG", "error"},
                                   {"BACKPLANE_SIM_TOPOLOGY", ""}});
    return json::parse(r.out);
  }();
  bool flash_registered = false;
  for (const json& k : report.value("kernels", json::array())) {
    flash_registered |= k.at("implementation") == "flash_attention_2" && k["device_type"] == "cuda";
  }
  const json turing = only(
      attention_json({"--sim", T4_TOPOLOGY, "--device", "cuda:0", "--impl", "flash_attention_2"},
                     plugins),
      "cuda:0");
  const json ampere =
      only(attention_json({"--sim", "mixed", "--device", "cuda:0", "--impl", "flash_attention_2"},
                          plugins),
           "cuda:0");
  if (!flash_registered) {
    const std::string missing =
        kFa2Preface + "the package for FlashAttention2 doesn't seem to be installed.";
    EXPECT_EQ(turing.at("error"), missing);
    EXPECT_EQ(ampere.at("error"), missing);
    return;
  }
  EXPECT_EQ(turing.at("error"), kFa2Preface +
                                    "FlashAttention2 requires compute capability >= 8, but "
                                    "found (7, 5) with compute capability 7.x");
  EXPECT_EQ(ampere.at("error"), kFa2Preface +
                                    "attention_forward/flash_attention_2 of plugin cuda does not "
                                    "serve cuda:0, whose devices come from plugin sim");
}

struct BadInput {
  const char* name;
  Args args;
  std::string message;  // a substring of stderr
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const BadInput& x, std::ostream* os) {
  *os << x.name;
}

class HwprobeAttentionRefuses : public testing::TestWithParam<BadInput> {};

TEST_P(HwprobeAttentionRefuses, WithExitCode2) {
  const ProcessResult r = attention(GetParam().args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Input, HwprobeAttentionRefuses,
    testing::Values(
        BadInput{"unsupported_impl",
                 {"--impl", "flash"},
                 "hwprobe attention: Specified `attn_implementation=\"flash\"` is not supported."},
        BadInput{"malformed_hub_id", {"--impl", "org/repo@"}, "'org/repo@' is not a Hub kernel id"},
        BadInput{"absent_device", {"--sim", "h100x8", "--device", "cuda:8"}, "cuda:8"},
        BadInput{"malformed_device", {"--device", "cuda:x"}, "cuda:x"},
        BadInput{"bad_dtype", {"--dtype", "float64"}, "--dtype 'float64' is not one of"},
        BadInput{"bad_head_dim", {"--head-dim", "0"}, "--head-dim must be positive"},
        BadInput{"bad_hub_kernel",
                 {"--with-hub-kernel", "flash-attn2"},
                 "--with-hub-kernel: 'flash-attn2' is not a Hub kernel id"},
        BadInput{"unknown_option", {"--impls", "sdpa"}, "unrecognised option '--impls'"}),
    [](const testing::TestParamInfo<BadInput>& p) { return std::string(p.param.name); });

}  // namespace

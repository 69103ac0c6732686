// use_kernels on the cpu: the defaults the cpu plugin registers, served by the in-tree packages
// installed into a temporary store; training mode, a missing package, user mappings.
#include <backplane/backplane.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/use_kernels.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "loader/temp_folder.hpp"

namespace {

using backplane::Device;
using backplane::InvalidArgument;
using backplane::KernelMode;
using backplane::NotFound;
using backplane::Runtime;
using backplane::hub::LayerKernels;
using backplane::hub::Store;
using backplane::hub::UseKernelsOptions;
using backplane::testing::TempFolder;

const char* const kLayers[] = {"RMSNorm", "SiluAndMul", "GeluAndMul", "GeluTanhAndMul",
                               "RotaryEmbedding"};

Runtime open_cpu() {
  backplane::RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"cpu"};
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  return Runtime::open(options);
}

std::string package(const char* name) {
  return std::string(PACKAGES_DIR) + "/backplane/" + name;
}

class UseKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"rmsnorm", "activation", "rotary"}) store.install(package(name));
  }
  TempFolder folder;
  Store store{folder.path() / "store"};
  Runtime runtime = open_cpu();
};

// RMSNorm of one row through the bound kernel, against the formula.
void expect_rms_norm_works(const backplane::hub::BoundLayerKernel& bound) {
  ASSERT_EQ(bound.kernel.info.op, "rms_norm");
  std::vector<float> x = {1, -2, 3, -4, 5}, w = {1, 0.5f, 2, 1, 1}, out(5);
  int64_t shape[] = {1, 5}, wshape[] = {5};
  DLTensor xt{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor wt{w.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, wshape, nullptr, 0};
  DLTensor ot{out.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  bp_rms_norm_args args{};
  args.struct_size = sizeof args;
  args.input = &xt;
  args.weight = &wt;
  args.output = &ot;
  args.epsilon = 1e-6;
  const auto fn = reinterpret_cast<bp_rms_norm_fn>(bound.kernel.function);
  ASSERT_EQ(backplane::hub::LoadedPackage::take_status(fn(bound.kernel.context, &args)), "");
  const float rms = std::sqrt((1 + 4 + 9 + 16 + 25) / 5.0f + 1e-6f);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], x[i] / rms * w[i], 1e-5f) << i;
}

TEST_F(UseKernelsTest, InferenceBindsTheDefaultsAndTheyRun) {
  const LayerKernels kernels = LayerKernels::use_kernels(runtime, Device("cpu"), store);
  EXPECT_EQ(kernels.mode(), KernelMode::inference());
  EXPECT_TRUE(kernels.warnings().empty());
  for (const char* layer : kLayers) {
    SCOPED_TRACE(layer);
    const auto* bound = kernels.find(layer);
    ASSERT_NE(bound, nullptr) << kernels.reason(layer);
    EXPECT_EQ(bound->entry.source, "cpu");
    EXPECT_EQ(bound->kernel.info.device_type, "cpu");
    EXPECT_EQ(bound->variant, backplane::hub::resolve_variants({bound->variant},
                                                               backplane::hub::SystemFacts::host())
                                  .chosen()
                                  ->variant);
    EXPECT_TRUE(kernels.reason(layer).empty());
  }
  EXPECT_EQ(kernels.find("SiluAndMul")->kernel.info.op, "silu_and_mul");
  EXPECT_EQ(kernels.find("RotaryEmbedding")->kernel.info.op, "rotary_embedding");
  expect_rms_norm_works(*kernels.find("RMSNorm"));
}

TEST_F(UseKernelsTest, TrainingBindsTheBackwardsAndSwitchingBackRebinds) {
  LayerKernels kernels = LayerKernels::use_kernels(runtime, Device("cpu"), store);
  for (const char* layer : kLayers) {  // inference: the forward only
    ASSERT_NE(kernels.find(layer), nullptr) << layer;
    EXPECT_EQ(kernels.find(layer)->backward.function, nullptr) << layer;
  }
  kernels.set_mode(KernelMode::training());
  for (const char* layer : kLayers) {
    SCOPED_TRACE(layer);
    const auto* bound = kernels.find(layer);
    ASSERT_NE(bound, nullptr) << kernels.reason(layer);
    EXPECT_TRUE(bound->matched_mode.is_training());
    EXPECT_EQ(bound->entry.source, "cpu");
    ASSERT_NE(bound->backward.function, nullptr);
    EXPECT_EQ(bound->backward.info.op, bound->kernel.info.op + "_backward");
  }
  expect_rms_norm_works(*kernels.find("RMSNorm"));  // the same forward
  kernels.set_mode(KernelMode::inference());
  ASSERT_NE(kernels.find("RMSNorm"), nullptr);
  EXPECT_EQ(kernels.find("RMSNorm")->backward.function, nullptr);
  expect_rms_norm_works(*kernels.find("RMSNorm"));
  // fallback is a mapping mode, not one to run in: refused, and nothing changes.
  EXPECT_THROW(kernels.set_mode(KernelMode::fallback()), InvalidArgument);
  EXPECT_EQ(kernels.mode(), KernelMode::inference());
  EXPECT_NE(kernels.find("RMSNorm"), nullptr);
}

TEST_F(UseKernelsTest, AMissingPackageKeepsTheLayerWithAWarningOrFails) {
  store.remove(backplane::hub::RepoId::parse("backplane/rotary", "test"), std::nullopt);
  // By default the warning goes to stderr, once per process.
  ::testing::internal::CaptureStderr();
  const LayerKernels kernels = LayerKernels::use_kernels(runtime, Device("cpu"), store);
  LayerKernels::use_kernels(runtime, Device("cpu"), store);
  const std::string told = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(told, "backplane: warn: " + kernels.warnings().at(0) + "\n");
  // A handler receives it instead, at every binding.
  std::vector<std::string> handled;
  UseKernelsOptions handler;
  handler.on_warning = [&](const std::string& w) { handled.push_back(w); };
  LayerKernels handled_kernels = LayerKernels::use_kernels(runtime, Device("cpu"), store, handler);
  EXPECT_EQ(handled, kernels.warnings());
  handled_kernels.set_mode(KernelMode::training());  // the missing package is told again
  EXPECT_EQ(handled.size(), 2u);
  EXPECT_EQ(handled.back(), handled.front());
  EXPECT_NE(handled_kernels.find("RMSNorm"), nullptr);
  EXPECT_EQ(kernels.find("RotaryEmbedding"), nullptr);
  EXPECT_NE(kernels.find("RMSNorm"), nullptr);
  ASSERT_EQ(kernels.warnings().size(), 1u);
  EXPECT_NE(kernels.warnings()[0].find("Kernel for layer `RotaryEmbedding` on cpu:0 "
                                       "(backplane/rotary:RotaryEmbedding) could not be loaded"),
            std::string::npos)
      << kernels.warnings()[0];

  UseKernelsOptions strict;
  strict.fallback_cannot_load = false;
  EXPECT_THROW(LayerKernels::use_kernels(runtime, Device("cpu"), store, strict), NotFound);
}

TEST_F(UseKernelsTest, UserMappingReplacesADefaultAndCanStandAlone) {
  // RMSNorm from a local folder (the package as built), every mode.
  UseKernelsOptions options;
  options.user_mapping = backplane::parse_kernel_config(
      nlohmann::json{{"RMSNorm", package("rmsnorm") + ":RMSNorm"}}, {"cpu"});
  LayerKernels kernels = LayerKernels::use_kernels(runtime, Device("cpu"), store, options);
  const auto* bound = kernels.find("RMSNorm");
  ASSERT_NE(bound, nullptr) << kernels.reason("RMSNorm");
  EXPECT_EQ(bound->entry.source, "user");
  EXPECT_TRUE(bound->matched_mode.is_fallback());
  EXPECT_TRUE(bound->entry.kernel.is_local_path());
  expect_rms_norm_works(*bound);
  EXPECT_NE(kernels.find("SiluAndMul"), nullptr);  // the defaults are still there

  options.inherit_mapping = false;
  const LayerKernels only = LayerKernels::use_kernels(runtime, Device("cpu"), store, options);
  EXPECT_NE(only.find("RMSNorm"), nullptr);
  EXPECT_EQ(only.find("SiluAndMul"), nullptr);
  EXPECT_NE(only.reason("SiluAndMul").find("No kernel mapping found for layer `SiluAndMul`"),
            std::string::npos);
}

TEST_F(UseKernelsTest, ALayerTheMappingDoesNotKnow) {
  const LayerKernels kernels = LayerKernels::use_kernels(runtime, Device("cpu"), store);
  EXPECT_EQ(kernels.find("LayerNorm"), nullptr);
  EXPECT_NE(kernels.reason("LayerNorm").find("Defaulting to original forward implementation."),
            std::string::npos);
  // Training with a policy that forbids keeping a layer for want of a mode: a layer mapped for
  // inference only is an error there, as in the kernels library.
  backplane::KernelFallbackPolicy strict;
  strict.no_compatible_mode = false;
  UseKernelsOptions options;
  options.fallback = strict;
  options.mode = KernelMode::training();
  options.user_mapping = backplane::parse_kernel_config(
      nlohmann::json{{"RMSNorm", {{"inference", package("rmsnorm") + ":RMSNorm"}}}}, {"cpu"});
  options.inherit_mapping = false;
  EXPECT_THROW(LayerKernels::use_kernels(runtime, Device("cpu"), store, options), InvalidArgument);
  options.fallback = backplane::KernelFallbackPolicy{};  // the default: the layer keeps its own
  const LayerKernels kept = LayerKernels::use_kernels(runtime, Device("cpu"), store, options);
  EXPECT_EQ(kept.find("RMSNorm"), nullptr);
  EXPECT_FALSE(kept.reason("RMSNorm").empty());
}

TEST_F(UseKernelsTest, UnknownDeviceIsNotFound) {
  EXPECT_THROW(LayerKernels::use_kernels(runtime, Device("cuda", 0), store), NotFound);
}

TEST_F(UseKernelsTest, APackageWithoutTheMappedLayerIsAPackageError) {
  UseKernelsOptions options;
  options.user_mapping = backplane::parse_kernel_config(
      nlohmann::json{{"RMSNorm", "backplane/activation:RMSNorm"}}, {"cpu"});
  try {
    LayerKernels::use_kernels(runtime, Device("cpu"), store, options);
    ADD_FAILURE() << "no error";
  } catch (const backplane::hub::PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel package backplane/activation has no layer "
                                         "`RMSNorm`"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

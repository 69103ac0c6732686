// The xpu plugin as the core loads it. On a machine without an Intel GPU it loads and reports
// xpu unavailable with the specific reason; the expected reason is worked out here from what
// this machine has (the Level Zero loader or not, Intel GPUs on the PCI bus or not).
#include <gtest/gtest.h>

#include <backplane/conformance.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pci_scan.hpp"
#include "plugin_alone.hpp"

namespace {

using backplane::LogLevel;

// A runtime that loads only the xpu plugin from the build tree.
std::unique_ptr<backplane::testing::PluginAlone> open_xpu() {
  return backplane::testing::open_plugin_alone(XPU_MANIFEST);
}

// The reason this machine should give, or "" when it may have a usable Intel GPU.
std::string expected_reason(const std::string& visibility_note) {
  const std::string on_bus =
      backplane::backends::pci_presence_note(backplane::backends::kPciVendorIntel, "Intel");
  void* loader = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
  if (loader == nullptr) {
    return std::string("the Level Zero loader libze_loader.so.1 was not found (") + dlerror() +
           ")" + on_bus;
  }
  dlclose(loader);
  if (!on_bus.empty()) return "";
  return "zeInit failed: ZE_RESULT_ERROR_UNINITIALIZED (no Level Zero driver is installed, or "
         "none of the installed drivers found a GPU: Intel GPUs need Intel's compute runtime "
         "(libze_intel_gpu.so.1) and the i915 or xe kernel driver)" +
         visibility_note;
}

class XpuPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* value = getenv("ZE_AFFINITY_MASK")) saved_ = value;
    unsetenv("ZE_AFFINITY_MASK");
  }
  void TearDown() override {
    unsetenv("ZE_AFFINITY_MASK");
    if (saved_) setenv("ZE_AFFINITY_MASK", saved_->c_str(), 1);
  }

 private:
  std::optional<std::string> saved_;
};

TEST_F(XpuPlugin, Loads) {
  auto opened = open_xpu();
  const auto& plugins = opened->runtime.plugins();
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].name, "xpu");
  EXPECT_EQ(plugins[0].status, backplane::PluginStatus::kLoaded) << plugins[0].error;
  EXPECT_EQ(plugins[0].device_types, (std::vector<std::string>{"xpu"}));
}

TEST_F(XpuPlugin, UnavailableWithTheSpecificReason) {
  const std::string expected = expected_reason("");
  if (expected.empty()) GTEST_SKIP() << "this machine may have a usable Intel GPU";
  auto opened = open_xpu();
  const backplane::BackendInfo* xpu = opened->runtime.backend("xpu");
  ASSERT_NE(xpu, nullptr);
  EXPECT_FALSE(xpu->available);
  EXPECT_EQ(xpu->unavailable_reason, expected);
  EXPECT_EQ(xpu->hub_key, "xpu");
  EXPECT_EQ(xpu->collective_backend, "xccl");
  EXPECT_EQ(xpu->training_priority, 20);
  EXPECT_TRUE(xpu->accelerator);
  EXPECT_TRUE(xpu->automatic_placement);
  EXPECT_TRUE(opened->runtime.devices().empty());
}

TEST_F(XpuPlugin, MissingGpusAreInfoNotWarnings) {
  const std::string expected = expected_reason("");
  if (expected.empty()) GTEST_SKIP() << "this machine may have a usable Intel GPU";
  auto opened = open_xpu();
  bool logged = false;
  for (const auto& [level, line] : opened->lines) {
    EXPECT_GT(level, LogLevel::kWarn) << line;
    if (line.find("xpu unavailable: " + expected) != std::string::npos) {
      EXPECT_EQ(level, LogLevel::kInfo);
      logged = true;
    }
  }
  EXPECT_TRUE(logged);
}

TEST_F(XpuPlugin, NamesZeAffinityMaskWhenSet) {
  setenv("ZE_AFFINITY_MASK", "0.1", 1);
  const std::string expected = expected_reason(" (ZE_AFFINITY_MASK=\"0.1\" is set)");
  if (expected.empty() || expected.rfind("the Level Zero loader", 0) == 0) {
    GTEST_SKIP() << "needs the Level Zero loader and no usable Intel GPU";
  }
  auto opened = open_xpu();
  const backplane::BackendInfo* xpu = opened->runtime.backend("xpu");
  ASSERT_NE(xpu, nullptr);
  EXPECT_EQ(xpu->unavailable_reason, expected);
}

TEST_F(XpuPlugin, SeveralRuntimesInOneProcess) {
  auto first = open_xpu();
  auto second = open_xpu();
  ASSERT_NE(first->runtime.backend("xpu"), nullptr);
  ASSERT_NE(second->runtime.backend("xpu"), nullptr);
  EXPECT_EQ(first->runtime.backend("xpu")->unavailable_reason,
            second->runtime.backend("xpu")->unavailable_reason);
  first.reset();
  auto third = open_xpu();
  ASSERT_NE(third->runtime.backend("xpu"), nullptr);
  EXPECT_EQ(third->runtime.backend("xpu")->unavailable_reason,
            second->runtime.backend("xpu")->unavailable_reason);
}

}  // namespace

BACKPLANE_CONFORMANCE_SUITE(xpu, XPU_MANIFEST);

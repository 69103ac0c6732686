// The rocm plugin as the core loads it. On a machine without an AMD GPU it loads and reports
// rocm unavailable with the specific reason; the expected reason is worked out here from what
// this machine has (the HIP runtime or not, /dev/kfd or not, AMD devices on the PCI bus or not).
#include <gtest/gtest.h>

#include <backplane/conformance.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pci_scan.hpp"
#include "plugin_alone.hpp"

namespace {

using backplane::LogLevel;

constexpr const char* kKfdNote =
    "; /dev/kfd does not exist (the amdgpu kernel driver is not loaded, or this container was "
    "started without it)";

// A runtime that loads only the rocm plugin from the build tree.
std::unique_ptr<backplane::testing::PluginAlone> open_rocm() {
  return backplane::testing::open_plugin_alone(ROCM_MANIFEST);
}

// The reason this machine should give, or "" when it may have a usable AMD GPU.
std::string expected_reason(const std::string& visibility_note) {
  const std::string on_bus =
      backplane::backends::pci_presence_note(backplane::backends::kPciVendorAmd, "AMD");
  void* hip = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (hip == nullptr) {
    const std::string error = dlerror();
    hip = dlopen("/opt/rocm/lib/libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
    if (hip == nullptr) {
      return "the HIP runtime libamdhip64.so.5 was not found (" + error + ")" + on_bus;
    }
  }
  dlclose(hip);
  if (access("/dev/kfd", F_OK) == 0 || !on_bus.empty()) return "";
  // HIP 5.2 (Debian's) answers hipInit with hipErrorInvalidDevice when it finds no GPU.
  return "hipInit failed: hipErrorInvalidDevice: invalid device ordinal" + std::string(kKfdNote) +
         visibility_note;
}

class RocmPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
      if (const char* value = getenv(name)) saved_.emplace_back(name, value);
      unsetenv(name);
    }
  }
  void TearDown() override {
    unsetenv("HIP_VISIBLE_DEVICES");
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(RocmPlugin, LoadsAndNamesBothDeviceTypesInItsManifest) {
  auto opened = open_rocm();
  const auto& plugins = opened->runtime.plugins();
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].name, "rocm");
  EXPECT_EQ(plugins[0].status, backplane::PluginStatus::kLoaded) << plugins[0].error;
  EXPECT_EQ(plugins[0].device_types, (std::vector<std::string>{"rocm", "cuda"}));
}

TEST_F(RocmPlugin, UnavailableWithTheSpecificReason) {
  const std::string expected = expected_reason("");
  if (expected.empty()) GTEST_SKIP() << "this machine may have a usable AMD GPU";
  auto opened = open_rocm();
  const backplane::BackendInfo* rocm = opened->runtime.backend("rocm");
  ASSERT_NE(rocm, nullptr);
  EXPECT_FALSE(rocm->available);
  EXPECT_EQ(rocm->unavailable_reason, expected);
  EXPECT_EQ(rocm->hub_key, "rocm");
  EXPECT_EQ(rocm->collective_backend, "nccl");
  EXPECT_EQ(rocm->training_priority, 80);
  EXPECT_TRUE(rocm->accelerator);
  EXPECT_TRUE(rocm->automatic_placement);
  // Without AMD GPUs `cuda` is left alone, so NVIDIA's plugin can take it.
  EXPECT_EQ(opened->runtime.backend("cuda"), nullptr);
  EXPECT_EQ(opened->runtime.backends().size(), 1u);
  EXPECT_TRUE(opened->runtime.devices().empty());
}

TEST_F(RocmPlugin, MissingGpusAreInfoNotWarnings) {
  const std::string expected = expected_reason("");
  if (expected.empty()) GTEST_SKIP() << "this machine may have a usable AMD GPU";
  auto opened = open_rocm();
  bool logged = false;
  for (const auto& [level, line] : opened->lines) {
    EXPECT_GT(level, LogLevel::kWarn) << line;
    if (line.find("rocm unavailable: " + expected) != std::string::npos) {
      EXPECT_EQ(level, LogLevel::kInfo);
      logged = true;
    }
  }
  EXPECT_TRUE(logged);
}

TEST_F(RocmPlugin, NamesAVisibilityVariableThatIsSet) {
  setenv("HIP_VISIBLE_DEVICES", "", 1);
  const std::string expected = expected_reason(" (HIP_VISIBLE_DEVICES=\"\" is set)");
  if (expected.empty() || expected.rfind("the HIP runtime", 0) == 0) {
    GTEST_SKIP() << "needs the HIP runtime and no usable AMD GPU";
  }
  auto opened = open_rocm();
  const backplane::BackendInfo* rocm = opened->runtime.backend("rocm");
  ASSERT_NE(rocm, nullptr);
  EXPECT_EQ(rocm->unavailable_reason, expected);
}

TEST_F(RocmPlugin, SeveralRuntimesInOneProcess) {
  auto first = open_rocm();
  auto second = open_rocm();
  ASSERT_NE(first->runtime.backend("rocm"), nullptr);
  ASSERT_NE(second->runtime.backend("rocm"), nullptr);
  EXPECT_EQ(first->runtime.backend("rocm")->unavailable_reason,
            second->runtime.backend("rocm")->unavailable_reason);
  first.reset();
  auto third = open_rocm();
  ASSERT_NE(third->runtime.backend("rocm"), nullptr);
  EXPECT_EQ(third->runtime.backend("rocm")->unavailable_reason,
            second->runtime.backend("rocm")->unavailable_reason);
  EXPECT_EQ(third->runtime.plugins()[0].status, backplane::PluginStatus::kLoaded);
}

}  // namespace

BACKPLANE_CONFORMANCE_SUITE(rocm, ROCM_MANIFEST);

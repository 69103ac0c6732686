// The xpu plugin with a GPU: it loads a fake Level Zero loader (fake_ze/, first on
// LD_LIBRARY_PATH under ctest) that shows a two-tile Data Center GPU Max 1550 and a VPU.
#include <gtest/gtest.h>

#include <backplane/conformance.hpp>
#include <backplane/runtime/runtime.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fake_runtime_test.hpp"
#include "pci_scan.hpp"
#include "plugin_alone.hpp"

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

backplane::Runtime open_xpu() {
  return backplane::testing::open_plugin_quietly(XPU_MANIFEST);
}

int64_t int_property(const backplane::DeviceInfo& device, const std::string& name) {
  if (const backplane::Property* p = device.property(name)) return std::get<int64_t>(p->value);
  ADD_FAILURE() << "no property " << name;
  return -1;
}

class XpuFakeLoader : public backplane::testing::FakeRuntimeTest {
 protected:
  XpuFakeLoader() : FakeRuntimeTest(FAKE_ZE_DIR, {"ZE_AFFINITY_MASK", "FAKE_ZE_MODE"}) {}
};

TEST_F(XpuFakeLoader, RegistersTheGpuButNotTheVpu) {
  const backplane::Runtime runtime = open_xpu();
  ASSERT_EQ(runtime.plugins().at(0).status, backplane::PluginStatus::kLoaded)
      << runtime.plugins().at(0).error;
  const backplane::BackendInfo* xpu = runtime.backend("xpu");
  ASSERT_NE(xpu, nullptr);
  EXPECT_TRUE(xpu->available);
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("xpu");
  ASSERT_EQ(devices.size(), 1u);
  const backplane::DeviceInfo& gpu = devices[0];
  EXPECT_EQ(gpu.device.str(), "xpu:0");
  EXPECT_EQ(gpu.name, "Intel(R) Data Center GPU Max 1550");
  EXPECT_EQ(gpu.vendor, "Intel");
  EXPECT_EQ(gpu.uuid, "a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  EXPECT_EQ(gpu.pci_bus_id, "0000:3a:00.0");
  EXPECT_EQ(gpu.arch, "");
  EXPECT_FALSE(gpu.compute_capability.has_value());
  EXPECT_EQ(gpu.memory_total, 128 * kGiB);  // two ordinals of 64 GiB
  EXPECT_EQ(gpu.capabilities, backplane::kCapFp16 | backplane::kCapBf16 | backplane::kCapFp64);
  EXPECT_EQ(gpu.physical_index, 0);
  EXPECT_EQ(gpu.visibility_variable, "");
  EXPECT_EQ(int_property(gpu, "sub_devices"), 2);
  EXPECT_EQ(int_property(gpu, "subslices"), 128);
  EXPECT_EQ(int_property(gpu, "eu_count"), 1024);
  EXPECT_EQ(int_property(gpu, "threads_per_eu"), 8);
  EXPECT_EQ(int_property(gpu, "simd_width"), 16);
  EXPECT_EQ(int_property(gpu, "clock_mhz"), 1600);
  EXPECT_EQ(int_property(gpu, "pci_device_id"), 0x0bd5);
  // No memory_info: Sysman would need ZES_ENABLE_SYSMAN before zeInit.
  EXPECT_FALSE(runtime.memory_info(backplane::Device("xpu", 0)).has_value());
}

TEST_F(XpuFakeLoader, NoPciIdWithoutThePciExtension) {
  setenv("FAKE_ZE_MODE", "no_pci", 1);
  const backplane::Runtime runtime = open_xpu();
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("xpu");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].pci_bus_id, "");
}

TEST_F(XpuFakeLoader, AffinityMaskMakesThePhysicalIndexUnknown) {
  setenv("ZE_AFFINITY_MASK", "0", 1);
  const backplane::Runtime runtime = open_xpu();
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("xpu");
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].visibility_variable, "ZE_AFFINITY_MASK");
  EXPECT_EQ(devices[0].physical_index, -1);
}

TEST_F(XpuFakeLoader, ZeroGpuDevices) {
  setenv("FAKE_ZE_MODE", "no_devices", 1);
  setenv("ZE_AFFINITY_MASK", "3", 1);
  const backplane::Runtime runtime = open_xpu();
  const backplane::BackendInfo* xpu = runtime.backend("xpu");
  ASSERT_NE(xpu, nullptr);
  EXPECT_FALSE(xpu->available);
  EXPECT_EQ(
      xpu->unavailable_reason,
      "the Level Zero drivers (1) report 0 GPU devices (ZE_AFFINITY_MASK=\"3\" is set)" +
          backplane::backends::pci_presence_note(backplane::backends::kPciVendorIntel, "Intel"));
}

}  // namespace

BACKPLANE_CONFORMANCE_SUITE(xpu_with_fake_gpu, XPU_MANIFEST);

// The rocm plugin with GPUs: it loads a fake HIP runtime (fake_hip/, first on LD_LIBRARY_PATH
// under ctest) that shows an MI250X and an MI300X.
#include <gtest/gtest.h>

#include <backplane/conformance.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "fake_runtime_test.hpp"
#include "pci_scan.hpp"
#include "plugin_alone.hpp"

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

backplane::Runtime open_rocm() {
  return backplane::testing::open_plugin_quietly(ROCM_MANIFEST);
}

bool nvidia_on_bus() {
  return !backplane::backends::pci_devices_of(backplane::backends::kPciVendorNvidia).empty();
}

std::string kfd_note() {
  return access("/dev/kfd", F_OK) == 0
             ? ""
             : "; /dev/kfd does not exist (the amdgpu kernel driver is not loaded, or this "
               "container was started without it)";
}

class RocmFakeRuntime : public backplane::testing::FakeRuntimeTest {
 protected:
  RocmFakeRuntime()
      : FakeRuntimeTest(FAKE_HIP_DIR, {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                                       "CUDA_VISIBLE_DEVICES", "FAKE_HIP_MODE"}) {}
};

TEST_F(RocmFakeRuntime, RegistersRocmAndCudaUnlessNvidiaOwnsIt) {
  const backplane::Runtime runtime = open_rocm();
  ASSERT_EQ(runtime.plugins().at(0).status, backplane::PluginStatus::kLoaded)
      << runtime.plugins().at(0).error;
  const backplane::BackendInfo* rocm = runtime.backend("rocm");
  ASSERT_NE(rocm, nullptr);
  EXPECT_TRUE(rocm->available);
  EXPECT_EQ(runtime.devices("rocm").size(), 2u);
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  if (nvidia_on_bus()) {
    EXPECT_EQ(cuda, nullptr);
    EXPECT_TRUE(runtime.devices("cuda").empty());
  } else {
    ASSERT_NE(cuda, nullptr);
    EXPECT_TRUE(cuda->available);
    EXPECT_EQ(cuda->hub_key, "rocm");
    EXPECT_EQ(cuda->collective_backend, "nccl");
    EXPECT_EQ(cuda->training_priority, 80);
    ASSERT_EQ(runtime.devices("cuda").size(), 2u);
    EXPECT_EQ(runtime.devices("cuda")[1].name, "AMD Instinct MI300X");
    EXPECT_EQ(runtime.devices("cuda")[1].uuid, runtime.devices("rocm")[1].uuid);
  }
}

TEST_F(RocmFakeRuntime, DescribesEachGpu) {
  const backplane::Runtime runtime = open_rocm();
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("rocm");
  ASSERT_EQ(devices.size(), 2u);
  const backplane::DeviceInfo& mi250 = devices[0];
  EXPECT_EQ(mi250.device.str(), "rocm:0");
  EXPECT_EQ(mi250.name, "AMD Instinct MI250X");
  EXPECT_EQ(mi250.vendor, "AMD");
  EXPECT_EQ(mi250.uuid, "GPU-ab83d2ffef0d3cdf");
  EXPECT_EQ(mi250.pci_bus_id, "0000:c1:00.0");
  EXPECT_EQ(mi250.arch, "gfx90a");
  EXPECT_FALSE(mi250.compute_capability.has_value());
  EXPECT_EQ(mi250.memory_total, 64 * kGiB);
  EXPECT_EQ(mi250.capabilities, backplane::kCapFp16 | backplane::kCapBf16 | backplane::kCapFp64);
  EXPECT_EQ(mi250.physical_index, 0);
  EXPECT_EQ(mi250.visibility_variable, "");
  ASSERT_NE(mi250.property("gcn_arch_name"), nullptr);
  EXPECT_EQ(std::get<std::string>(mi250.property("gcn_arch_name")->value),
            "gfx90a:sramecc+:xnack-");
  ASSERT_NE(mi250.property("multiprocessor_count"), nullptr);
  EXPECT_EQ(std::get<int64_t>(mi250.property("multiprocessor_count")->value), 110);
  ASSERT_NE(mi250.property("clock_mhz"), nullptr);
  EXPECT_EQ(std::get<int64_t>(mi250.property("clock_mhz")->value), 1700);
  ASSERT_NE(mi250.property("warp_size"), nullptr);
  EXPECT_EQ(std::get<int64_t>(mi250.property("warp_size")->value), 64);
  ASSERT_NE(mi250.property("runtime_version"), nullptr);
  EXPECT_EQ(std::get<std::string>(mi250.property("runtime_version")->value), "5.2");

  const backplane::DeviceInfo& mi300 = devices[1];
  EXPECT_EQ(mi300.arch, "gfx942");
  EXPECT_EQ(mi300.pci_bus_id, "0000:0c:00.0");
  EXPECT_EQ(mi300.memory_total, 192 * kGiB);
  EXPECT_EQ(mi300.capabilities,
            backplane::kCapFp16 | backplane::kCapBf16 | backplane::kCapFp8 | backplane::kCapFp64);
}

TEST_F(RocmFakeRuntime, MemoryInfoAsksTheRightDeviceAndRestoresTheCurrentOne) {
  const backplane::Runtime runtime = open_rocm();
  const auto second = runtime.memory_info(backplane::Device("rocm", 1));
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->free_bytes, 2 * kGiB);
  EXPECT_EQ(second->total_bytes, 192 * kGiB);
  const auto first = runtime.memory_info(backplane::Device("rocm", 0));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->free_bytes, 1 * kGiB);

  // The fake is loaded once per process; ask it which device this thread has now.
  void* hip = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(hip, nullptr);
  auto set_device = reinterpret_cast<int (*)(int)>(dlsym(hip, "hipSetDevice"));
  auto get_device = reinterpret_cast<int (*)(int*)>(dlsym(hip, "hipGetDevice"));
  ASSERT_EQ(set_device(1), 0);
  ASSERT_TRUE(runtime.memory_info(backplane::Device("rocm", 0)).has_value());
  int current = -1;
  ASSERT_EQ(get_device(&current), 0);
  EXPECT_EQ(current, 1);
  dlclose(hip);
}

TEST_F(RocmFakeRuntime, VisibilityVariableMakesThePhysicalIndexUnknown) {
  setenv("HIP_VISIBLE_DEVICES", "1,0", 1);
  const backplane::Runtime runtime = open_rocm();
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("rocm");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].visibility_variable, "HIP_VISIBLE_DEVICES");
  EXPECT_EQ(devices[0].physical_index, -1);
}

TEST_F(RocmFakeRuntime, HipInitFailure) {
  setenv("FAKE_HIP_MODE", "no_device", 1);
  const backplane::Runtime runtime = open_rocm();
  const backplane::BackendInfo* rocm = runtime.backend("rocm");
  ASSERT_NE(rocm, nullptr);
  EXPECT_FALSE(rocm->available);
  EXPECT_EQ(rocm->unavailable_reason,
            "hipInit failed: hipErrorNoDevice: no ROCm-capable device is detected" + kfd_note() +
                backplane::backends::pci_presence_note(backplane::backends::kPciVendorAmd, "AMD"));
  EXPECT_EQ(runtime.backend("cuda"), nullptr);
}

TEST_F(RocmFakeRuntime, ZeroDevices) {
  setenv("FAKE_HIP_MODE", "zero", 1);
  const backplane::Runtime runtime = open_rocm();
  const backplane::BackendInfo* rocm = runtime.backend("rocm");
  ASSERT_NE(rocm, nullptr);
  EXPECT_FALSE(rocm->available);
  EXPECT_EQ(rocm->unavailable_reason,
            "the HIP runtime reports 0 devices" + kfd_note() +
                backplane::backends::pci_presence_note(backplane::backends::kPciVendorAmd, "AMD"));
  EXPECT_EQ(runtime.backend("cuda"), nullptr);
}

}  // namespace

BACKPLANE_CONFORMANCE_SUITE(rocm_with_fake_gpus, ROCM_MANIFEST);

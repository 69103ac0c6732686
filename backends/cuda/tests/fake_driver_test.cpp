// The plugin's driver path, against the fake libcuda.so.1 and libnvidia-ml.so.1 of
// fake_driver/: discovery, NVML's index and free memory, the primary-context fallback, the
// reasons for each failure, and that every init is undone. ctest puts the fakes first on
// LD_LIBRARY_PATH; run by hand without that, the tests skip.
#include <gtest/gtest.h>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "fake_runtime_test.hpp"
#include "pci_scan.hpp"
#include "plugin_alone.hpp"

namespace {

// A function the fakes export, or null when the real library (or none) would be loaded.
template <class Fn>
Fn fake_symbol(const char* library, const char* symbol) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  auto fn = reinterpret_cast<Fn>(dlsym(handle, symbol));
  dlclose(handle);  // the fake libcuda stays loaded once the plugin has called cuInit
  return fn;
}

class FakeDriver : public backplane::testing::FakeRuntimeTest {
 protected:
  // No folder: the fake libcuda is recognised by a symbol only it exports.
  FakeDriver()
      : FakeRuntimeTest(nullptr, {"FAKE_CUDA_INIT_RESULT", "FAKE_CUDA_DEVICES", "FAKE_CUDA_MIG",
                                  "FAKE_NVML_INIT_RESULT", "CUDA_VISIBLE_DEVICES"}) {}

  void SetUp() override {
    FakeRuntimeTest::SetUp();
    if (fake_symbol<int (*)(int)>("libcuda.so.1", "fake_cuda_primary_refs") == nullptr)
      GTEST_SKIP() << "the fake libcuda.so.1 is not on LD_LIBRARY_PATH";
  }

  static backplane::Runtime open() {
    return backplane::testing::open_plugin_quietly(CUDA_PLUGIN_MANIFEST);
  }

  static std::string pci_note() {
    return backplane::backends::pci_presence_note(backplane::backends::kPciVendorNvidia, "NVIDIA");
  }

  // The fake's count of primary-context references to `device`. Looked up at each call, with
  // the library held open for it: an address kept from an earlier lookup dangles if the library
  // was unloaded and mapped again elsewhere in between.
  static int primary_refs(int device) {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return -1;
    auto fn = reinterpret_cast<int (*)(int)>(dlsym(handle, "fake_cuda_primary_refs"));
    const int refs = fn != nullptr ? fn(device) : -1;
    dlclose(handle);
    return refs;
  }
};

TEST_F(FakeDriver, DescribesEachDevice) {
  const backplane::Runtime runtime = open();
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  ASSERT_TRUE(cuda->available) << cuda->unavailable_reason;
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("cuda");
  ASSERT_EQ(devices.size(), 2u);

  const backplane::DeviceInfo& h = devices[0];
  EXPECT_EQ(h.device.str(), "cuda:0");
  EXPECT_EQ(h.name, "Fake GPU 0");
  EXPECT_EQ(h.vendor, "NVIDIA");
  EXPECT_EQ(h.uuid, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
  EXPECT_EQ(h.pci_bus_id, "0000:1b:00.0");
  EXPECT_EQ(h.arch, "sm_90");
  ASSERT_TRUE(h.compute_capability.has_value());
  EXPECT_EQ(h.compute_capability->str(), "9.0");
  EXPECT_EQ(h.memory_total, 16ull << 30);
  EXPECT_EQ(h.capabilities, backplane::kCapFp16 | backplane::kCapBf16 | backplane::kCapTf32 |
                                backplane::kCapFp8 | backplane::kCapFp64);
  EXPECT_EQ(h.physical_index, 1);  // NVML's order is the reverse of the fake driver's
  EXPECT_EQ(h.visibility_variable, "");
  ASSERT_NE(h.property("multiprocessors"), nullptr);
  EXPECT_EQ(std::get<int64_t>(h.property("multiprocessors")->value), 132);
  EXPECT_EQ(std::get<int64_t>(h.property("clock_mhz")->value), 1980);
  EXPECT_EQ(std::get<int64_t>(h.property("memory_bus_width")->value), 5120);
  EXPECT_EQ(std::get<bool>(h.property("ecc_enabled")->value), true);
  EXPECT_EQ(std::get<std::string>(h.property("driver_version")->value), "12.4");
  EXPECT_EQ(h.property("shared_memory_per_block_optin_bytes"), nullptr);  // not reported
  EXPECT_EQ(h.property("parent_uuid"), nullptr);

  const backplane::DeviceInfo& a = devices[1];
  EXPECT_EQ(a.device.str(), "cuda:1");
  EXPECT_EQ(a.uuid, "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f");
  EXPECT_EQ(a.pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(a.arch, "sm_86");
  EXPECT_EQ(a.capabilities,
            backplane::kCapFp16 | backplane::kCapBf16 | backplane::kCapTf32 | backplane::kCapFp64);
  EXPECT_EQ(a.physical_index, 0);
}

TEST_F(FakeDriver, NamesTheVisibilityVariableWhenSet) {
  setenv("CUDA_VISIBLE_DEVICES", "1,0", 1);
  const backplane::Runtime runtime = open();
  for (const backplane::DeviceInfo& d : runtime.devices("cuda")) {
    EXPECT_EQ(d.visibility_variable, "CUDA_VISIBLE_DEVICES");
  }
}

TEST_F(FakeDriver, FreeMemoryComesFromNvmlWithoutAContext) {
  const backplane::Runtime runtime = open();
  const std::optional<backplane::MemoryInfo> m0 = runtime.memory_info(backplane::Device("cuda", 0));
  ASSERT_TRUE(m0.has_value());
  EXPECT_EQ(m0->free_bytes, 3ull << 30);
  EXPECT_EQ(m0->total_bytes, 16ull << 30);  // the registered total, not NVML's
  EXPECT_EQ(primary_refs(0), 0);
}

TEST_F(FakeDriver, WithoutNvmlFreeMemoryComesFromThePrimaryContext) {
  setenv("FAKE_NVML_INIT_RESULT", "9", 1);  // NVML_ERROR_DRIVER_NOT_LOADED
  const backplane::Runtime runtime = open();
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("cuda");
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0].physical_index, -1);
  EXPECT_EQ(devices[1].physical_index, -1);
  const std::optional<backplane::MemoryInfo> m1 = runtime.memory_info(backplane::Device("cuda", 1));
  ASSERT_TRUE(m1.has_value());
  EXPECT_EQ(m1->total_bytes, 32ull << 30);
  EXPECT_EQ(m1->free_bytes, 8ull << 30);
  // Retained and released; pushed and popped.
  EXPECT_EQ(primary_refs(1), 0);
  auto depth = fake_symbol<int (*)()>("libcuda.so.1", "fake_cuda_context_depth");
  ASSERT_NE(depth, nullptr);
  EXPECT_EQ(depth(), 0);
}

TEST_F(FakeDriver, MigInstanceGetsItsOwnUuidAndItsGpusIndex) {
  setenv("FAKE_CUDA_MIG", "1", 1);
  const backplane::Runtime runtime = open();
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("cuda");
  ASSERT_EQ(devices.size(), 2u);
  const backplane::DeviceInfo& mig = devices[1];
  EXPECT_EQ(mig.uuid, "MIG-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  ASSERT_NE(mig.property("parent_uuid"), nullptr);
  EXPECT_EQ(std::get<std::string>(mig.property("parent_uuid")->value),
            "GPU-20212223-2425-2627-2829-2a2b2c2d2e2f");
  EXPECT_EQ(mig.physical_index, 0);
  const std::optional<backplane::MemoryInfo> m = runtime.memory_info(mig.device);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->free_bytes, 1ull << 30);  // the instance's own, from its MIG handle
}

TEST_F(FakeDriver, NoDeviceReasonNamesTheEmptyVisibilityVariable) {
  setenv("FAKE_CUDA_INIT_RESULT", "100", 1);
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const backplane::Runtime runtime = open();
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  EXPECT_FALSE(cuda->available);
  EXPECT_EQ(cuda->unavailable_reason,
            "cuInit failed: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected "
            "(CUDA_VISIBLE_DEVICES is set but empty, which hides every device; NVML sees 2 GPUs)" +
                pci_note());
}

TEST_F(FakeDriver, OtherInitFailuresNameTheLoadedLibrary) {
  setenv("FAKE_CUDA_INIT_RESULT", "803", 1);
  const backplane::Runtime runtime = open();
  const std::string& reason = runtime.backend("cuda")->unavailable_reason;
  EXPECT_EQ(reason.rfind("cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: system has "
                         "unsupported display driver / cuda driver combination (driver library: ",
                         0),
            0u)
      << reason;
  EXPECT_NE(reason.find("fake_driver/libcuda.so.1)"), std::string::npos) << reason;
}

TEST_F(FakeDriver, UnknownErrorCodesShowTheirNumber) {
  setenv("FAKE_CUDA_INIT_RESULT", "4242", 1);
  const backplane::Runtime runtime = open();
  const std::string& reason = runtime.backend("cuda")->unavailable_reason;
  EXPECT_EQ(reason.rfind("cuInit failed: CUDA error 4242 (driver library: ", 0), 0u) << reason;
}

TEST_F(FakeDriver, ZeroDevicesIsUnavailable) {
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  setenv("CUDA_VISIBLE_DEVICES", "7", 1);
  const backplane::Runtime runtime = open();
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  EXPECT_FALSE(cuda->available);
  EXPECT_EQ(cuda->unavailable_reason,
            "the driver reports 0 devices (CUDA_VISIBLE_DEVICES=\"7\" may name no device that "
            "exists; unset it to see them all; NVML sees 0 GPUs)" +
                pci_note());
}

// Every nvmlInit is matched by nvmlShutdown and NVML is unloaded once the last runtime goes;
// libcuda stays (pinned after cuInit), with no primary context left retained.
TEST_F(FakeDriver, ClosingRuntimesUndoesEveryInit) {
  // The test's own reference keeps NVML loaded while its counter is read.
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(nvml, nullptr);
  auto nvml_inits = reinterpret_cast<int (*)()>(dlsym(nvml, "fake_nvml_init_count"));
  ASSERT_NE(nvml_inits, nullptr);
  EXPECT_EQ(nvml_inits(), 0);
  {
    const backplane::Runtime first = open();
    {
      const backplane::Runtime second = open();
      EXPECT_EQ(second.devices("cuda").size(), 2u);
      EXPECT_EQ(nvml_inits(), 2);
      (void)second.memory_info(backplane::Device("cuda", 0));
    }
    EXPECT_EQ(nvml_inits(), 1);
    EXPECT_EQ(first.devices("cuda").size(), 2u);
  }
  EXPECT_EQ(nvml_inits(), 0);
  EXPECT_EQ(primary_refs(0), 0);
  EXPECT_EQ(primary_refs(1), 0);
  dlclose(nvml);
  EXPECT_EQ(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(cuda, nullptr);
  if (cuda != nullptr) dlclose(cuda);
}

}  // namespace

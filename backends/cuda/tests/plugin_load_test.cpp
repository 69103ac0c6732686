// The built plugin, loaded alone by a host runtime through its manifest, as hwprobe loads it.
// Where there is no driver (the usual build machine) it must load and register `cuda` as
// unavailable with the driver's dlopen error; where there is one, the backend must be
// available or say which driver call failed.
#include <backplane/plugin.h>
#include <gtest/gtest.h>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "driver_api.hpp"
#include "pci_scan.hpp"

namespace {

struct LogLine {
  backplane::LogLevel level;
  std::string text;
};

// A runtime that sees only the cuda plugin and records the lines it logs at info and above.
backplane::Runtime open_cuda_only(std::vector<LogLine>* log) {
  backplane::RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{CUDA_PLUGIN_MANIFEST};
  options.log_level = backplane::LogLevel::kInfo;
  auto mutex = std::make_shared<std::mutex>();
  options.log_sink = [log, mutex](backplane::LogLevel level, const std::string& line) {
    const std::lock_guard<std::mutex> lock(*mutex);
    if (log != nullptr) log->push_back(LogLine{level, line});
  };
  return backplane::Runtime::open(options);
}

// What the plugin must say when dlopen("libcuda.so.1") fails here, or "" when it succeeds.
std::string expected_missing_driver_reason() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);
    return "";
  }
  const std::string why = dlerror();  // before anything else can call dl* functions
  return backplane::cuda::driver_load_failure_reason(why) +
         backplane::backends::pci_presence_note(backplane::backends::kPciVendorNvidia, "NVIDIA");
}

TEST(CudaPlugin, LoadsAndRegistersTheCudaType) {
  const backplane::Runtime runtime = open_cuda_only(nullptr);
  ASSERT_EQ(runtime.plugins().size(), 1u);
  const backplane::PluginInfo& plugin = runtime.plugins()[0];
  EXPECT_EQ(plugin.name, "cuda");
  EXPECT_EQ(plugin.status, backplane::PluginStatus::kLoaded) << plugin.error;
  EXPECT_EQ(plugin.abi_version, "1." + std::to_string(BP_ABI_VERSION_MINOR));
  EXPECT_EQ(plugin.version, "0.1.0");

  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->plugin, "cuda");
  EXPECT_EQ(cuda->hub_key, "cuda");
  EXPECT_EQ(cuda->collective_backend, "nccl");
  EXPECT_EQ(cuda->training_priority, 80);
  EXPECT_TRUE(cuda->accelerator);
  EXPECT_TRUE(cuda->automatic_placement);
  EXPECT_EQ(runtime.backends().size(), 1u);
}

TEST(CudaPlugin, WithoutADriverIsUnavailableWithTheDlopenError) {
  const std::string expected = expected_missing_driver_reason();
  if (expected.empty()) GTEST_SKIP() << "libcuda.so.1 opens here";
  std::vector<LogLine> log;
  const backplane::Runtime runtime = open_cuda_only(&log);
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  EXPECT_FALSE(cuda->available);
  EXPECT_EQ(
      cuda->unavailable_reason.rfind("the NVIDIA driver library libcuda.so.1 was not found", 0), 0u)
      << cuda->unavailable_reason;
  EXPECT_EQ(cuda->unavailable_reason, expected);
  EXPECT_TRUE(runtime.devices("cuda").empty());

  // Reported at INFO: a missing driver is no error, nor worth a warning.
  bool logged = false;
  for (const LogLine& line : log) {
    EXPECT_GE(static_cast<int>(line.level), static_cast<int>(backplane::LogLevel::kInfo))
        << line.text;
    if (line.text.find(cuda->unavailable_reason) != std::string::npos) logged = true;
  }
  EXPECT_TRUE(logged) << "no log line carries the reason";
}

TEST(CudaPlugin, WithADriverIsAvailableOrNamesTheFailingCall) {
  if (!expected_missing_driver_reason().empty()) GTEST_SKIP() << "no libcuda.so.1 here";
  const backplane::Runtime runtime = open_cuda_only(nullptr);
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  if (!cuda->available) {
    EXPECT_NE(cuda->unavailable_reason.find("failed"), std::string::npos)
        << cuda->unavailable_reason;
    return;
  }
  const std::vector<backplane::DeviceInfo> devices = runtime.devices("cuda");
  ASSERT_FALSE(devices.empty());
  for (size_t i = 0; i < devices.size(); ++i) {
    const backplane::DeviceInfo& d = devices[i];
    EXPECT_EQ(*d.device.index(), static_cast<int>(i));
    EXPECT_EQ(d.uuid.size(), 40u) << d.uuid;
    EXPECT_EQ(d.arch.rfind("sm_", 0), 0u) << d.arch;
    EXPECT_TRUE(d.has(backplane::kCapFp64));
    EXPECT_GT(d.memory_total, 0u);
    const std::optional<backplane::MemoryInfo> memory = runtime.memory_info(d.device);
    ASSERT_TRUE(memory.has_value());
    EXPECT_LE(memory->free_bytes, memory->total_bytes);
  }
}

// The host may open several runtimes, each with its own plugin init; they must not disturb
// each other, whichever closes first.
TEST(CudaPlugin, SeveralRuntimesAtOnceAgree) {
  for (int round = 0; round < 3; ++round) {
    auto first = std::make_unique<backplane::Runtime>(open_cuda_only(nullptr));
    auto second = std::make_unique<backplane::Runtime>(open_cuda_only(nullptr));
    const backplane::BackendInfo* a = first->backend("cuda");
    const backplane::BackendInfo* b = second->backend("cuda");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(a->available, b->available);
    EXPECT_EQ(a->unavailable_reason, b->unavailable_reason);
    EXPECT_EQ(first->devices("cuda").size(), second->devices("cuda").size());
    const std::string reason = a->unavailable_reason;
    if (round % 2 == 0) {
      first.reset();
    } else {
      second.reset();
    }
    const backplane::Runtime third = open_cuda_only(nullptr);
    ASSERT_NE(third.backend("cuda"), nullptr);
    EXPECT_EQ(third.backend("cuda")->unavailable_reason, reason);
  }
}

}  // namespace

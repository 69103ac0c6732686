// Error formatting, and opening the driver libraries where there may be no driver at all.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <string>

#include "driver_api.hpp"
#include "nvml_api.hpp"

namespace backplane::cuda {
namespace {

// Whether this process can open libcuda.so.1 at all: decides which outcome is expected.
bool driver_library_present() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  dlclose(handle);
  return true;
}

TEST(FormatCudaError, JoinsNameAndText) {
  EXPECT_EQ(format_cuda_error(100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"),
            "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected");
  EXPECT_EQ(format_cuda_error(34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"),
            "CUDA_ERROR_STUB_LIBRARY: CUDA driver is a stub library");
}

TEST(FormatCudaError, FallsBackToTheNumber) {
  EXPECT_EQ(format_cuda_error(12345, nullptr, nullptr), "CUDA error 12345");
  EXPECT_EQ(format_cuda_error(999, nullptr, "unknown error"), "CUDA error 999: unknown error");
  EXPECT_EQ(format_cuda_error(3, "CUDA_ERROR_NOT_INITIALIZED", ""), "CUDA_ERROR_NOT_INITIALIZED");
}

TEST(DriverLoadFailureReason, SaysNotFoundOnlyWhenTheFileIsMissing) {
  EXPECT_EQ(driver_load_failure_reason(
                "libcuda.so.1: cannot open shared object file: No such file or directory"),
            "the NVIDIA driver library libcuda.so.1 was not found (libcuda.so.1: cannot open "
            "shared object file: No such file or directory)");
  EXPECT_EQ(driver_load_failure_reason("/usr/lib/libcuda.so.1: wrong ELF class: ELFCLASS32"),
            "the NVIDIA driver library libcuda.so.1 could not be loaded (/usr/lib/libcuda.so.1: "
            "wrong ELF class: ELFCLASS32)");
}

TEST(DriverLibrary, ReportsAMissingDriverWithDlerrorText) {
  if (driver_library_present()) GTEST_SKIP() << "libcuda.so.1 is present here";
  const DriverLibrary driver;
  EXPECT_FALSE(driver.usable());
  EXPECT_EQ(driver.error().rfind("the NVIDIA driver library libcuda.so.1 was not found (", 0), 0u)
      << driver.error();
  EXPECT_NE(driver.error().find("libcuda.so.1: cannot open shared object file"), std::string::npos)
      << driver.error();
  EXPECT_EQ(driver.path(), "");
}

TEST(DriverLibrary, OpensAndClosesRepeatedly) {
  for (int i = 0; i < 3; ++i) {
    const DriverLibrary a;
    const DriverLibrary b;
    EXPECT_EQ(a.usable(), b.usable());
    EXPECT_EQ(a.error(), b.error());
    if (a.usable()) {
      EXPECT_NE(a.api().cuInit, nullptr);
      EXPECT_NE(a.api().cuMemGetInfo_v2, nullptr);
      EXPECT_NE(a.api().cuDeviceGetUuid_v2, nullptr);
      EXPECT_FALSE(a.path().empty());
    }
  }
}

TEST(NvmlLibrary, IsOptionalAndSaysWhyItIsUnusable) {
  const NvmlLibrary nvml;
  if (nvml.usable()) {
    EXPECT_TRUE(nvml.device_count().has_value());
    EXPECT_FALSE(nvml.device_by_uuid("GPU-00000000-0000-0000-0000-000000000000").has_value());
  } else {
    EXPECT_NE(nvml.error().find("libnvidia-ml.so.1"), std::string::npos) << nvml.error();
    EXPECT_FALSE(nvml.device_count().has_value());
  }
}

}  // namespace
}  // namespace backplane::cuda

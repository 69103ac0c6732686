// Level Zero result names and zeInit hints.
#include <gtest/gtest.h>

#include "ze_result.hpp"

namespace backplane::xpu {
namespace {

TEST(ZeResultName, Table) {
  struct Case {
    ze_result_t result;
    const char* name;
  };
  const Case cases[] = {
      {ZE_RESULT_SUCCESS, "ZE_RESULT_SUCCESS"},
      {ZE_RESULT_NOT_READY, "ZE_RESULT_NOT_READY"},
      {ZE_RESULT_ERROR_DEVICE_LOST, "ZE_RESULT_ERROR_DEVICE_LOST"},
      {ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY, "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"},
      {ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS, "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS"},
      {ZE_RESULT_ERROR_NOT_AVAILABLE, "ZE_RESULT_ERROR_NOT_AVAILABLE"},
      {ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE, "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE"},
      {ZE_RESULT_ERROR_UNINITIALIZED, "ZE_RESULT_ERROR_UNINITIALIZED"},
      {ZE_RESULT_ERROR_UNSUPPORTED_VERSION, "ZE_RESULT_ERROR_UNSUPPORTED_VERSION"},
      {ZE_RESULT_ERROR_UNSUPPORTED_FEATURE, "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE"},
      {ZE_RESULT_ERROR_INVALID_ARGUMENT, "ZE_RESULT_ERROR_INVALID_ARGUMENT"},
      {ZE_RESULT_ERROR_INVALID_NULL_POINTER, "ZE_RESULT_ERROR_INVALID_NULL_POINTER"},
      {ZE_RESULT_ERROR_INVALID_ENUMERATION, "ZE_RESULT_ERROR_INVALID_ENUMERATION"},
      {ZE_RESULT_ERROR_OVERLAPPING_REGIONS, "ZE_RESULT_ERROR_OVERLAPPING_REGIONS"},
      {ZE_RESULT_WARNING_ACTION_REQUIRED, "ZE_RESULT_WARNING_ACTION_REQUIRED"},
      {ZE_RESULT_ERROR_UNKNOWN, "ZE_RESULT_ERROR_UNKNOWN"},
      {static_cast<ze_result_t>(0x12345678), "ze_result_t 0x12345678"},
  };
  for (const Case& c : cases) EXPECT_EQ(ze_result_name(c.result), c.name);
}

TEST(DescribeZeInitFailure, Table) {
  EXPECT_EQ(describe_ze_init_failure(ZE_RESULT_ERROR_UNINITIALIZED),
            "zeInit failed: ZE_RESULT_ERROR_UNINITIALIZED (no Level Zero driver is installed, or "
            "none of the installed drivers found a GPU: Intel GPUs need Intel's compute runtime "
            "(libze_intel_gpu.so.1) and the i915 or xe kernel driver)");
  EXPECT_EQ(describe_ze_init_failure(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS),
            "zeInit failed: ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS (this user may not open the "
            "GPU's /dev/dri/renderD* node (usually granted by the render group))");
  EXPECT_EQ(describe_ze_init_failure(ZE_RESULT_ERROR_INVALID_ARGUMENT),
            "zeInit failed: ZE_RESULT_ERROR_INVALID_ARGUMENT");
  EXPECT_EQ(describe_ze_init_failure(static_cast<ze_result_t>(0x7abcdef0)),
            "zeInit failed: ze_result_t 0x7abcdef0");
}

}  // namespace
}  // namespace backplane::xpu

#include "ze_result.hpp"

#include <cstdint>
#include <cstdio>

namespace backplane::xpu {
namespace {

struct ResultName {
  uint32_t code;
  const char* name;
};

// The codes of Level Zero 1.8's ze_api.h, by value, so the table builds with any header.
constexpr ResultName kResultNames[] = {
    {0x00000000, "ZE_RESULT_SUCCESS"},
    {0x00000001, "ZE_RESULT_NOT_READY"},
    {0x70000001, "ZE_RESULT_ERROR_DEVICE_LOST"},
    {0x70000002, "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"},
    {0x70000003, "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"},
    {0x70000004, "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE"},
    {0x70000005, "ZE_RESULT_ERROR_MODULE_LINK_FAILURE"},
    {0x70000006, "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET"},
    {0x70000007, "ZE_RESULT_ERROR_DEVICE_IN_LOW_POWER_STATE"},
    {0x7ff00001, "ZE_RESULT_EXP_ERROR_DEVICE_IS_NOT_VERTEX"},
    {0x7ff00002, "ZE_RESULT_EXP_ERROR_VERTEX_IS_NOT_DEVICE"},
    {0x7ff00003, "ZE_RESULT_EXP_ERROR_REMOTE_DEVICE"},
    {0x70010000, "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS"},
    {0x70010001, "ZE_RESULT_ERROR_NOT_AVAILABLE"},
    {0x70020000, "ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE"},
    {0x70020001, "ZE_RESULT_WARNING_DROPPED_DATA"},
    {0x78000001, "ZE_RESULT_ERROR_UNINITIALIZED"},
    {0x78000002, "ZE_RESULT_ERROR_UNSUPPORTED_VERSION"},
    {0x78000003, "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE"},
    {0x78000004, "ZE_RESULT_ERROR_INVALID_ARGUMENT"},
    {0x78000005, "ZE_RESULT_ERROR_INVALID_NULL_HANDLE"},
    {0x78000006, "ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE"},
    {0x78000007, "ZE_RESULT_ERROR_INVALID_NULL_POINTER"},
    {0x78000008, "ZE_RESULT_ERROR_INVALID_SIZE"},
    {0x78000009, "ZE_RESULT_ERROR_UNSUPPORTED_SIZE"},
    {0x7800000a, "ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT"},
    {0x7800000b, "ZE_RESULT_ERROR_INVALID_SYNCHRONIZATION_OBJECT"},
    {0x7800000c, "ZE_RESULT_ERROR_INVALID_ENUMERATION"},
    {0x7800000d, "ZE_RESULT_ERROR_UNSUPPORTED_ENUMERATION"},
    {0x7800000e, "ZE_RESULT_ERROR_UNSUPPORTED_IMAGE_FORMAT"},
    {0x7800000f, "ZE_RESULT_ERROR_INVALID_NATIVE_BINARY"},
    {0x78000010, "ZE_RESULT_ERROR_INVALID_GLOBAL_NAME"},
    {0x78000011, "ZE_RESULT_ERROR_INVALID_KERNEL_NAME"},
    {0x78000012, "ZE_RESULT_ERROR_INVALID_FUNCTION_NAME"},
    {0x78000013, "ZE_RESULT_ERROR_INVALID_GROUP_SIZE_DIMENSION"},
    {0x78000014, "ZE_RESULT_ERROR_INVALID_GLOBAL_WIDTH_DIMENSION"},
    {0x78000015, "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX"},
    {0x78000016, "ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE"},
    {0x78000017, "ZE_RESULT_ERROR_INVALID_KERNEL_ATTRIBUTE_VALUE"},
    {0x78000018, "ZE_RESULT_ERROR_INVALID_MODULE_UNLINKED"},
    {0x78000019, "ZE_RESULT_ERROR_INVALID_COMMAND_LIST_TYPE"},
    {0x7800001a, "ZE_RESULT_ERROR_OVERLAPPING_REGIONS"},
    {0x7800001b, "ZE_RESULT_WARNING_ACTION_REQUIRED"},
    {0x7ffffffe, "ZE_RESULT_ERROR_UNKNOWN"},
};

}  // namespace

std::string ze_result_name(ze_result_t result) {
  const auto code = static_cast<uint32_t>(result);
  for (const ResultName& entry : kResultNames) {
    if (entry.code == code) return entry.name;
  }
  char text[32];
  std::snprintf(text, sizeof text, "ze_result_t 0x%08x", code);
  return text;
}

const char* ze_init_hint(ze_result_t result) {
  switch (static_cast<uint32_t>(result)) {
    case 0x78000001:  // UNINITIALIZED: the loader found no driver, or no driver found a device
      return "no Level Zero driver is installed, or none of the installed drivers found a GPU: "
             "Intel GPUs need Intel's compute runtime (libze_intel_gpu.so.1) and the i915 or xe "
             "kernel driver";
    case 0x78000002:  // UNSUPPORTED_VERSION
      return "the installed driver does not support the Level Zero API version of this loader";
    case 0x70010000:  // INSUFFICIENT_PERMISSIONS
      return "this user may not open the GPU's /dev/dri/renderD* node (usually granted by the "
             "render group)";
    case 0x70000001:  // DEVICE_LOST
      return "the GPU was lost; it may need a reset";
    case 0x70000002:  // OUT_OF_HOST_MEMORY
      return "the driver ran out of host memory";
    default:
      return "";
  }
}

std::string describe_ze_init_failure(ze_result_t result) {
  const std::string hint = ze_init_hint(result);
  return "zeInit failed: " + ze_result_name(result) + (hint.empty() ? "" : " (" + hint + ")");
}

}  // namespace backplane::xpu

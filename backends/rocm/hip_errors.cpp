#include "hip_errors.hpp"

#include <cstring>

namespace backplane::rocm {
namespace {

struct HipErrorInfo {
  HipError code;
  const char* name;
  const char* text;
};

// The texts are those newer HIP runtimes return from hipGetErrorString().
constexpr HipErrorInfo kHipErrors[] = {
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {3, "hipErrorNotInitialized", "initialization error"},
    {4, "hipErrorDeinitialized", "driver shutting down"},
    {35, "hipErrorInsufficientDriver", "driver version is insufficient for runtime version"},
    {100, "hipErrorNoDevice", "no ROCm-capable device is detected"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {209, "hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"},
    {304, "hipErrorOperatingSystem", "OS call failed or operation not supported on this OS"},
    {801, "hipErrorNotSupported", "operation not supported"},
    {999, "hipErrorUnknown", "unknown error"},
    {1052, "hipErrorRuntimeMemory", "HSA runtime memory call returned error"},
    {1053, "hipErrorRuntimeOther", "HSA runtime call other than memory returned error"},
};

const HipErrorInfo* find(HipError error) {
  for (const HipErrorInfo& info : kHipErrors) {
    if (info.code == error) return &info;
  }
  return nullptr;
}

bool empty(const char* s) {
  return s == nullptr || *s == '\0';
}

}  // namespace

const char* hip_error_name(HipError error) {
  const HipErrorInfo* info = find(error);
  return info != nullptr ? info->name : nullptr;
}

const char* hip_error_text(HipError error) {
  const HipErrorInfo* info = find(error);
  return info != nullptr ? info->text : nullptr;
}

std::string describe_hip_error(HipError error, const char* runtime_name, const char* runtime_text) {
  std::string name;
  if (!empty(runtime_name) && std::strcmp(runtime_name, "hipErrorUnknown") != 0) {
    name = runtime_name;
  } else if (const char* ours = hip_error_name(error)) {
    name = ours;
  } else {
    name = "hipError " + std::to_string(error);
  }
  std::string text;
  if (!empty(runtime_text) && name != runtime_text &&
      std::strcmp(runtime_text, "hipErrorUnknown") != 0) {
    text = runtime_text;
  } else if (const char* ours = hip_error_text(error)) {
    text = ours;
  }
  return text.empty() ? name : name + ": " + text;
}

}  // namespace backplane::rocm

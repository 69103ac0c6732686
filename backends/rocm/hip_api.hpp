// The part of the HIP runtime API that the rocm plugin calls, declared here rather than taken
// from <hip/hip_runtime_api.h>, so the plugin builds without the HIP headers; the runtime itself
// is opened with dlopen at init, never linked.
//
// ABI: HIP 5.x, libamdhip64.so.5 (Debian's libamdhip64-5 is HIP 5.2). The values below are those
// of HIP 5.2's hip_runtime_api.h, checked against it by tests/hip_abi_test.cpp where the header is
// installed. Only the soname ending in .5 is opened: ROCm 6 (libamdhip64.so.6) changed the
// layout of hipDeviceProp_t, which is read here for gcnArchName.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <backplane/internal/dynamic_library.hpp>

namespace backplane::rocm {

using HipError = int;  // hipError_t
inline constexpr HipError kHipSuccess = 0;

// hipDeviceAttribute_t values used here.
enum class HipAttribute : int {
  kClockRate = 5,  // kHz
  kIntegrated = 16,
  kMultiprocessorCount = 63,
  kWarpSize = 87,
};

struct HipUuid {
  char bytes[16];
};

// hipDeviceProp_t is read only for gcnArchName (no attribute gives the name), at its offset in
// the HIP 5.x layout, into a buffer larger than the whole struct (792 bytes in HIP 5.2), so a
// 5.x runtime that appends fields cannot write past it.
inline constexpr size_t kHipDevicePropGcnArchNameOffset = 396;
inline constexpr size_t kHipDevicePropGcnArchNameSize = 256;
inline constexpr size_t kHipDevicePropBufferSize = 4096;

inline constexpr const char* kHipRuntimeSoname = "libamdhip64.so.5";
// Where ROCm's own packages install it, for systems whose loader path does not include it.
inline constexpr const char* kHipRuntimeRocmPath = "/opt/rocm/lib/libamdhip64.so.5";

// The opened runtime and its entry points. The optional ones may be null.
class HipRuntime {
 public:
  // Opens the runtime: libamdhip64.so.5, else ROCm's copy. nullptr with `error` set ("the HIP
  // runtime libamdhip64.so.5 was not found (<dlerror>)", "... lacks hipInit") when it cannot be
  // used.
  static std::unique_ptr<HipRuntime> open(std::string& error);
  // The first of `candidates` that opens; a reason names the first candidate.
  static std::unique_ptr<HipRuntime> open(const std::vector<std::string>& candidates,
                                          std::string& error);

  HipError (*init)(unsigned flags) = nullptr;
  HipError (*get_device_count)(int* count) = nullptr;
  HipError (*device_get_attribute)(int* value, HipAttribute attribute, int device) = nullptr;
  HipError (*device_get_name)(char* name, int length, int device) = nullptr;
  HipError (*device_get_pci_bus_id)(char* bus_id, int length, int device) = nullptr;
  HipError (*device_total_mem)(size_t* bytes, int device) = nullptr;
  const char* (*get_error_name)(HipError error) = nullptr;
  const char* (*get_error_string)(HipError error) = nullptr;
  // Optional.
  HipError (*device_get_uuid)(HipUuid* uuid, int device) = nullptr;  // HIP 5.1+
  HipError (*get_device_properties)(void* properties, int device) = nullptr;
  HipError (*get_device)(int* device) = nullptr;
  HipError (*set_device)(int device) = nullptr;
  HipError (*mem_get_info)(size_t* free_bytes, size_t* total_bytes) = nullptr;
  HipError (*runtime_get_version)(int* version) = nullptr;  // HIP_VERSION of the runtime

  // "hipErrorNoDevice: no ROCm-capable device is detected": the runtime's name and text, or ours
  // (hip_errors.hpp) when the runtime has none.
  std::string describe(HipError error) const;

  bool can_report_memory() const {
    return get_device != nullptr && set_device != nullptr && mem_get_info != nullptr;
  }

 private:
  internal::DynamicLibrary library_;
};

}  // namespace backplane::rocm

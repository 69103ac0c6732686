// The CUDA driver API, opened at run time from libcuda.so.1 and never linked, so the plugin
// loads on machines without an NVIDIA driver. cuda.h is not needed either: the few types, enum
// values and entry points used here are declared below, from the CUDA driver API reference.
// Published values never change, and each entry point is looked up by its versioned symbol
// name (the `_v2` that cuda.h's macros select), because the plain names are older signatures
// kept for old binaries (cuMemGetInfo with 32-bit sizes, for one).
#pragma once

#include <backplane/internal/dynamic_library.hpp>

#include <cstddef>
#include <string>

namespace backplane::cuda {

// ---- Driver API types (cuda.h) ----
using CUresult = int;  // enum cudaError_enum: an int in the C ABI
using CUdevice = int;
using CUcontext = struct CUctx_st*;
struct CUuuid {
  char bytes[16];
};

inline constexpr CUresult kCudaSuccess = 0;  // CUDA_SUCCESS

// CUdevice_attribute values used by the plugin.
enum DeviceAttribute : int {
  kAttrClockRate = 13,  // kHz
  kAttrMultiprocessorCount = 16,
  kAttrIntegrated = 18,
  kAttrEccEnabled = 32,
  kAttrMemoryClockRate = 36,       // kHz
  kAttrGlobalMemoryBusWidth = 37,  // bits
  kAttrL2CacheSize = 38,           // bytes
  kAttrMaxThreadsPerMultiprocessor = 39,
  kAttrComputeCapabilityMajor = 75,
  kAttrComputeCapabilityMinor = 76,
  kAttrMaxSharedMemoryPerBlockOptin = 97,  // bytes
};

// The entry points, typed as in cuda.h. The required ones are non-null in a loaded library;
// cuDeviceGetUuid (the pre-11.4 form, which gives the whole GPU's UUID even for a MIG
// instance) is optional and may be null.
struct DriverEntryPoints {
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  CUresult (*cuInit)(unsigned int flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetUuid_v2)(CUuuid* uuid, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetUuid)(CUuuid* uuid, CUdevice device) = nullptr;  // optional
  CUresult (*cuDeviceGetPCIBusId)(char* bus_id, int length, CUdevice device) = nullptr;
  CUresult (*cuDeviceTotalMem_v2)(size_t* bytes, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* context, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device) = nullptr;
  CUresult (*cuCtxPushCurrent_v2)(CUcontext context) = nullptr;
  CUresult (*cuCtxPopCurrent_v2)(CUcontext* context) = nullptr;
  CUresult (*cuMemGetInfo_v2)(size_t* free_bytes, size_t* total_bytes) = nullptr;
};

// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected", from what cuGetErrorName and
// cuGetErrorString gave for `code`; either may be null (an unknown code), and then the number
// stands in: "CUDA error 999".
std::string format_cuda_error(CUresult code, const char* name, const char* text);

// The reason given when dlopen("libcuda.so.1") fails, with dlerror()'s text.
std::string driver_load_failure_reason(const std::string& dlerror_text);

// One opened libcuda.so.1. Each plugin init owns one; the dynamic loader counts the opens, so
// several inits in one process share the library and each closes its own handle.
class DriverLibrary {
 public:
  // Opens the library and resolves the entry points; never throws for a missing or unusable
  // driver: usable() is then false and error() says why, ready to show to a person.
  DriverLibrary();
  ~DriverLibrary();
  DriverLibrary(const DriverLibrary&) = delete;
  DriverLibrary& operator=(const DriverLibrary&) = delete;

  bool usable() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const DriverEntryPoints& api() const { return api_; }
  // The file the dynamic loader picked for libcuda.so.1; empty when none.
  const std::string& path() const { return path_; }

  // cuInit(0). After it the library is never unloaded from the process (see the .cpp).
  CUresult init();
  // format_cuda_error for `code`, asking this driver for the name and text.
  std::string describe(CUresult code) const;

 private:
  internal::DynamicLibrary library_;
  DriverEntryPoints api_;
  std::string path_;
  std::string error_;
};

}  // namespace backplane::cuda

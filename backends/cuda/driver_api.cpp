#include "driver_api.hpp"

namespace backplane::cuda {
namespace {

// The driver's soname. Never the toolkit's lib64/stubs/libcuda.so: that is a link-time stub
// whose every call fails (CUDA_ERROR_STUB_LIBRARY), and it is named libcuda.so, so this name
// cannot pick it up.
constexpr const char* kLibraryName = "libcuda.so.1";

}  // namespace

std::string format_cuda_error(CUresult code, const char* name, const char* text) {
  std::string out = name != nullptr ? name : "CUDA error " + std::to_string(code);
  if (text != nullptr && *text != '\0') out += std::string(": ") + text;
  return out;
}

std::string driver_load_failure_reason(const std::string& dlerror_text) {
  const bool missing = dlerror_text.find("No such file") != std::string::npos ||
                       dlerror_text.find("cannot open shared object") != std::string::npos;
  return std::string("the NVIDIA driver library ") + kLibraryName +
         (missing ? " was not found" : " could not be loaded") + " (" + dlerror_text + ")";
}

DriverLibrary::DriverLibrary() {
  std::string why;
  library_ = internal::DynamicLibrary::open(kLibraryName, why,
                                            internal::DynamicLibrary::OnClose::kUnloads);
  if (!library_) {
    error_ = driver_load_failure_reason(why);
    return;
  }
  path_ = library_.path();

  // Every required entry exists in drivers for CUDA 11.0 and newer (the _v2 primary-context
  // release is the newest of them).
  DriverEntryPoints& a = api_;
  std::string missing;
  const auto need = [&](const char* symbol, auto& slot) {
    if (!library_.resolve(symbol, slot))
      missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  need("cuGetErrorName", a.cuGetErrorName);
  need("cuGetErrorString", a.cuGetErrorString);
  need("cuInit", a.cuInit);
  need("cuDriverGetVersion", a.cuDriverGetVersion);
  need("cuDeviceGetCount", a.cuDeviceGetCount);
  need("cuDeviceGet", a.cuDeviceGet);
  need("cuDeviceGetName", a.cuDeviceGetName);
  need("cuDeviceGetPCIBusId", a.cuDeviceGetPCIBusId);
  need("cuDeviceTotalMem_v2", a.cuDeviceTotalMem_v2);
  need("cuDeviceGetAttribute", a.cuDeviceGetAttribute);
  need("cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain);
  need("cuDevicePrimaryCtxRelease_v2", a.cuDevicePrimaryCtxRelease_v2);
  need("cuCtxPushCurrent_v2", a.cuCtxPushCurrent_v2);
  need("cuCtxPopCurrent_v2", a.cuCtxPopCurrent_v2);
  need("cuMemGetInfo_v2", a.cuMemGetInfo_v2);
  // cuDeviceGetUuid_v2 came with CUDA 11.4; before it the older entry is the only one, and
  // there is no MIG to tell apart.
  library_.resolve("cuDeviceGetUuid", a.cuDeviceGetUuid);
  if (!library_.resolve("cuDeviceGetUuid_v2", a.cuDeviceGetUuid_v2)) {
    a.cuDeviceGetUuid_v2 = a.cuDeviceGetUuid;
  }
  if (a.cuDeviceGetUuid_v2 == nullptr) need("cuDeviceGetUuid_v2", a.cuDeviceGetUuid_v2);
  if (!missing.empty()) {
    error_ = std::string("the NVIDIA driver library ") + kLibraryName + " (" + path_ + ") lacks " +
             missing + ": the driver is too old; the cuda plugin needs one for CUDA 11.0 or newer";
  }
}

DriverLibrary::~DriverLibrary() = default;

CUresult DriverLibrary::init() {
  const CUresult result = api_.cuInit(0);
  // CUDA has no way to undo cuInit: the driver may have started threads and registered
  // handlers that point into the library, and unloading libcuda after it has crashed other
  // hosts (JuliaGPU/CUDA.jl#1848, #2446). So from here the library stays mapped for the life
  // of the process, as if it were linked: RTLD_NODELETE marks it, and our own handle (and this
  // extra one) are still closed, keeping the loader's count exact.
  library_.keep_mapped(kLibraryName);
  return result;
}

std::string DriverLibrary::describe(CUresult code) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(code, &name) != kCudaSuccess) {
    name = nullptr;
  }
  if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(code, &text) != kCudaSuccess) {
    text = nullptr;
  }
  return format_cuda_error(code, name, text);
}

}  // namespace backplane::cuda

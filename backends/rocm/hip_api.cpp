#include "hip_api.hpp"

#include <type_traits>

#include "hip_errors.hpp"

namespace backplane::rocm {

std::unique_ptr<HipRuntime> HipRuntime::open(std::string& error) {
  return open({kHipRuntimeSoname, kHipRuntimeRocmPath}, error);
}

std::unique_ptr<HipRuntime> HipRuntime::open(const std::vector<std::string>& candidates,
                                             std::string& error) {
  auto runtime = std::make_unique<HipRuntime>();
  const std::string name = candidates.empty() ? kHipRuntimeSoname : candidates.front();
  std::string first_error = "no candidate";  // the first candidate's error is the one to report
  for (size_t i = 0; i < candidates.size() && !runtime->library_; ++i) {
    std::string candidate_error;
    runtime->library_ = internal::DynamicLibrary::open(candidates[i], candidate_error);
    if (i == 0) first_error = candidate_error;
  }
  if (!runtime->library_) {
    error = "the HIP runtime " + name + " was not found (" + first_error + ")";
    return nullptr;
  }
  error.clear();

  const internal::DynamicLibrary& lib = runtime->library_;
  auto resolve = [&](auto& fn, const char* symbol, bool required) {
    fn = lib.function<std::remove_reference_t<decltype(fn)>>(symbol);
    if (fn == nullptr && required && error.empty()) {
      error = "the HIP runtime " + name + " lacks " + symbol + " (too old or not a HIP runtime)";
    }
  };
  resolve(runtime->init, "hipInit", true);
  resolve(runtime->get_device_count, "hipGetDeviceCount", true);
  resolve(runtime->device_get_attribute, "hipDeviceGetAttribute", true);
  resolve(runtime->device_get_name, "hipDeviceGetName", true);
  resolve(runtime->device_get_pci_bus_id, "hipDeviceGetPCIBusId", true);
  resolve(runtime->device_total_mem, "hipDeviceTotalMem", true);
  resolve(runtime->get_error_name, "hipGetErrorName", true);
  resolve(runtime->get_error_string, "hipGetErrorString", true);
  resolve(runtime->device_get_uuid, "hipDeviceGetUuid", false);
  resolve(runtime->get_device_properties, "hipGetDeviceProperties", false);
  resolve(runtime->get_device, "hipGetDevice", false);
  resolve(runtime->set_device, "hipSetDevice", false);
  resolve(runtime->mem_get_info, "hipMemGetInfo", false);
  resolve(runtime->runtime_get_version, "hipRuntimeGetVersion", false);
  if (!error.empty()) return nullptr;
  return runtime;
}

std::string HipRuntime::describe(HipError error) const {
  return describe_hip_error(error, get_error_name(error), get_error_string(error));
}

}  // namespace backplane::rocm

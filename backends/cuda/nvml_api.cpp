#include "nvml_api.hpp"

namespace backplane::cuda {
namespace {

constexpr const char* kLibraryName = "libnvidia-ml.so.1";

}  // namespace

NvmlLibrary::NvmlLibrary() {
  std::string why;
  library_ = internal::DynamicLibrary::open(kLibraryName, why,
                                            internal::DynamicLibrary::OnClose::kUnloads);
  if (!library_) {
    error_ = std::string(kLibraryName) + " could not be loaded (" + why + ")";
    return;
  }
  NvmlEntryPoints& a = api_;
  std::string missing;
  const auto need = [&](const char* symbol, auto& slot) {
    if (!library_.resolve(symbol, slot))
      missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  need("nvmlInit_v2", a.nvmlInit_v2);
  need("nvmlShutdown", a.nvmlShutdown);
  need("nvmlErrorString", a.nvmlErrorString);
  need("nvmlDeviceGetCount_v2", a.nvmlDeviceGetCount_v2);
  need("nvmlDeviceGetHandleByUUID", a.nvmlDeviceGetHandleByUUID);
  need("nvmlDeviceGetIndex", a.nvmlDeviceGetIndex);
  need("nvmlDeviceGetMemoryInfo", a.nvmlDeviceGetMemoryInfo);
  if (!missing.empty()) {
    error_ = std::string(kLibraryName) + " lacks " + missing;
    return;
  }
  const nvmlReturn_t result = api_.nvmlInit_v2();
  if (result != kNvmlSuccess) {
    error_ = std::string(kLibraryName) + ": nvmlInit_v2 failed: " + describe(result);
    return;
  }
  initialized_ = true;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) api_.nvmlShutdown();
}

std::string NvmlLibrary::describe(nvmlReturn_t result) const {
  const char* text = api_.nvmlErrorString != nullptr ? api_.nvmlErrorString(result) : nullptr;
  return text != nullptr ? text : "NVML error " + std::to_string(result);
}

std::optional<unsigned> NvmlLibrary::device_count() const {
  unsigned count = 0;
  if (!initialized_ || api_.nvmlDeviceGetCount_v2(&count) != kNvmlSuccess) return std::nullopt;
  return count;
}

std::optional<nvmlDevice_t> NvmlLibrary::device_by_uuid(const std::string& uuid) const {
  nvmlDevice_t device = nullptr;
  if (!initialized_ || api_.nvmlDeviceGetHandleByUUID(uuid.c_str(), &device) != kNvmlSuccess) {
    return std::nullopt;
  }
  return device;
}

std::optional<unsigned> NvmlLibrary::index(nvmlDevice_t device) const {
  unsigned index = 0;
  if (!initialized_ || api_.nvmlDeviceGetIndex(device, &index) != kNvmlSuccess) {
    return std::nullopt;
  }
  return index;
}

std::optional<nvmlMemory_t> NvmlLibrary::memory(nvmlDevice_t device) const {
  nvmlMemory_t memory{};
  if (!initialized_ || api_.nvmlDeviceGetMemoryInfo(device, &memory) != kNvmlSuccess) {
    return std::nullopt;
  }
  return memory;
}

}  // namespace backplane::cuda

// NVML (libnvidia-ml.so.1), opened at run time and optional. The plugin asks it what the CUDA
// driver cannot tell without a context or behind CUDA_VISIBLE_DEVICES: free memory (no context
// is created, so no device memory is spent) and the index before visibility (NVML ignores
// CUDA_VISIBLE_DEVICES and numbers GPUs in PCI order, as nvidia-smi does). Its types and entry
// points are declared here from the NVML reference; nvml.h is not needed.
#pragma once

#include <backplane/internal/dynamic_library.hpp>

#include <optional>
#include <string>

namespace backplane::cuda {

using nvmlReturn_t = int;  // enum nvmlReturn_enum
using nvmlDevice_t = struct nvmlDevice_st*;
struct nvmlMemory_t {  // the version 1 struct of nvmlDeviceGetMemoryInfo
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

inline constexpr nvmlReturn_t kNvmlSuccess = 0;  // NVML_SUCCESS

struct NvmlEntryPoints {
  nvmlReturn_t (*nvmlInit_v2)() = nullptr;
  nvmlReturn_t (*nvmlShutdown)() = nullptr;
  const char* (*nvmlErrorString)(nvmlReturn_t result) = nullptr;
  nvmlReturn_t (*nvmlDeviceGetCount_v2)(unsigned int* count) = nullptr;
  nvmlReturn_t (*nvmlDeviceGetHandleByUUID)(const char* uuid, nvmlDevice_t* device) = nullptr;
  nvmlReturn_t (*nvmlDeviceGetIndex)(nvmlDevice_t device, unsigned int* index) = nullptr;
  nvmlReturn_t (*nvmlDeviceGetMemoryInfo)(nvmlDevice_t device, nvmlMemory_t* memory) = nullptr;
};

// One opened and initialised NVML. nvmlInit/nvmlShutdown are reference-counted by NVML and
// dlopen by the loader, so each plugin init owns one of these. Thread-safe after construction
// (NVML's own calls are).
class NvmlLibrary {
 public:
  // Opens and initialises NVML; never throws: usable() is false when it is absent or fails,
  // and error() says why (for a debug line: the plugin works without NVML).
  NvmlLibrary();
  // nvmlShutdown, then dlclose: in that order, since closing an initialised NVML leaves its
  // callbacks pointing at unmapped code.
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool usable() const { return initialized_; }
  const std::string& error() const { return error_; }

  // Number of GPUs NVML sees (all of them: it ignores CUDA_VISIBLE_DEVICES).
  std::optional<unsigned> device_count() const;
  // The handle of the GPU or MIG instance with this UUID ("GPU-..." or "MIG-...").
  std::optional<nvmlDevice_t> device_by_uuid(const std::string& uuid) const;
  // NVML's index of a GPU: nvidia-smi's index.
  std::optional<unsigned> index(nvmlDevice_t device) const;
  std::optional<nvmlMemory_t> memory(nvmlDevice_t device) const;

 private:
  std::string describe(nvmlReturn_t result) const;

  internal::DynamicLibrary library_;
  NvmlEntryPoints api_;
  bool initialized_ = false;
  std::string error_;
};

}  // namespace backplane::cuda

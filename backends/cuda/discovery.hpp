// Device discovery: cuInit, then one DeviceSpec per device the driver lists. The driver has
// already applied CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, so the order and the set are its;
// the plugin only reports them (and NVML's index before visibility, where NVML is present).
#pragma once

#include <backplane/plugin_sdk.hpp>

#include <optional>
#include <string>
#include <vector>

#include "driver_api.hpp"
#include "nvml_api.hpp"

namespace backplane::cuda {

struct CudaDevice {
  sdk::DeviceSpec spec;  // what is registered
  CUdevice handle = 0;
  nvmlDevice_t nvml = nullptr;  // for free memory without a context; null: ask the driver
};

struct Discovery {
  bool available = false;
  std::string reason;  // why not, when !available (the PCI note is added by the caller)
  std::vector<CudaDevice> devices;
};

// Initialises the driver and describes its devices. `visible_devices` is CUDA_VISIBLE_DEVICES
// as this process sees it (nullopt: unset); it only words the reason and sets
// visibility_variable, it is not interpreted. `nvml` may be null or unusable.
Discovery discover(DriverLibrary& driver, const NvmlLibrary* nvml,
                   const std::optional<std::string>& visible_devices);

// The parenthesised hint added to "no device" reasons: what CUDA_VISIBLE_DEVICES does and how
// many GPUs NVML sees. "" when there is nothing to say.
std::string no_device_hint(const std::optional<std::string>& visible_devices,
                           std::optional<unsigned> nvml_gpu_count);

}  // namespace backplane::cuda

#include "intel_discovery.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <backplane/plugin.h>

#include "ze_result.hpp"

namespace backplane::xpu {
namespace {

constexpr uint32_t kPciVendorIntel = 0x8086;

std::string visibility_note(const std::string& variable) {
  if (variable.empty()) return "";
  const char* value = secure_getenv(variable.c_str());
  return " (" + variable + "=\"" + (value != nullptr ? value : "") + "\" is set)";
}

// Total memory: the sum over the device's memory ordinals, as SYCL's global_mem_size (and so
// torch.xpu's total_memory) reports it; the largest ordinal alone would undercount a device whose
// memory is split over several.
uint64_t total_memory(const ZeLoader& ze, ze_device_handle_t device) {
  uint32_t count = 0;
  if (ze.device_get_memory_properties(device, &count, nullptr) != ZE_RESULT_SUCCESS) return 0;
  std::vector<ze_device_memory_properties_t> memories(count);
  for (ze_device_memory_properties_t& memory : memories) {
    memory.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    memory.pNext = nullptr;
  }
  if (ze.device_get_memory_properties(device, &count, memories.data()) != ZE_RESULT_SUCCESS) {
    return 0;
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < count && i < memories.size(); ++i) total += memories[i].totalSize;
  return total;
}

IntelGpu describe_gpu(const ZeLoader& ze, ze_device_handle_t device,
                      const ze_device_properties_t& properties) {
  IntelGpu gpu;
  gpu.name = std::string(properties.name, strnlen(properties.name, sizeof properties.name));
  if (gpu.name.empty()) gpu.name = "Intel GPU";
  if (properties.vendorId == kPciVendorIntel) {
    gpu.vendor = "Intel";
  } else {
    char vendor[32];
    std::snprintf(vendor, sizeof vendor, "PCI vendor 0x%04x", properties.vendorId);
    gpu.vendor = vendor;
  }
  gpu.uuid = format_ze_uuid(properties.uuid);
  gpu.integrated = (properties.flags & ZE_DEVICE_PROPERTY_FLAG_INTEGRATED) != 0;
  gpu.subslices = int64_t{properties.numSlices} * properties.numSubslicesPerSlice;
  gpu.eu_count = gpu.subslices * properties.numEUsPerSubslice;
  gpu.threads_per_eu = properties.numThreadsPerEU;
  gpu.simd_width = properties.physicalEUSimdWidth;
  gpu.clock_mhz = properties.coreClockRate;
  gpu.max_mem_alloc_bytes = static_cast<int64_t>(properties.maxMemAllocSize);
  gpu.pci_device_id = properties.deviceId;
  gpu.memory_total = total_memory(ze, device);

  ze_device_module_properties_t module{};
  module.stype = ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES;
  if (ze.device_get_module_properties(device, &module) != ZE_RESULT_SUCCESS) module = {};
  gpu.capabilities = intel_capabilities(module);
  if (gpu.integrated) gpu.capabilities |= BP_CAP_UNIFIED_MEMORY;

  uint32_t sub_devices = 0;
  if (ze.device_get_sub_devices(device, &sub_devices, nullptr) == ZE_RESULT_SUCCESS) {
    gpu.sub_devices = sub_devices;
  }
  if (ze.device_pci_get_properties_ext != nullptr) {
    ze_pci_ext_properties_t pci{};
    pci.stype = ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES;
    if (ze.device_pci_get_properties_ext(device, &pci) == ZE_RESULT_SUCCESS) {
      gpu.pci_bus_id = format_pci_address(pci.address);
    }
  }
  return gpu;
}

}  // namespace

IntelDiscovery discover_intel_gpus(const ZeLoader& ze, const std::string& visibility_variable) {
  IntelDiscovery out;
  if (const ze_result_t result = ze.init(ZE_INIT_FLAG_GPU_ONLY); result != ZE_RESULT_SUCCESS) {
    out.unavailable_reason =
        describe_ze_init_failure(result) + visibility_note(visibility_variable);
    return out;
  }
  uint32_t driver_count = 0;
  if (const ze_result_t result = ze.driver_get(&driver_count, nullptr);
      result != ZE_RESULT_SUCCESS) {
    out.unavailable_reason = "zeDriverGet failed: " + ze_result_name(result);
    return out;
  }
  if (driver_count == 0) {
    out.unavailable_reason = "the Level Zero loader reports 0 drivers";
    return out;
  }
  std::vector<ze_driver_handle_t> drivers(driver_count);
  if (ze.driver_get(&driver_count, drivers.data()) != ZE_RESULT_SUCCESS) driver_count = 0;
  drivers.resize(driver_count);

  for (ze_driver_handle_t driver : drivers) {
    uint32_t count = 0;
    if (ze.device_get(driver, &count, nullptr) != ZE_RESULT_SUCCESS || count == 0) continue;
    std::vector<ze_device_handle_t> devices(count);
    if (ze.device_get(driver, &count, devices.data()) != ZE_RESULT_SUCCESS) continue;
    devices.resize(count);
    for (ze_device_handle_t device : devices) {
      ze_device_properties_t properties{};
      properties.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
      if (ze.device_get_properties(device, &properties) != ZE_RESULT_SUCCESS) continue;
      if (properties.type != ZE_DEVICE_TYPE_GPU) continue;
      out.gpus.push_back(describe_gpu(ze, device, properties));
    }
  }
  if (out.gpus.empty()) {
    out.unavailable_reason = "the Level Zero drivers (" + std::to_string(drivers.size()) +
                             ") report 0 GPU devices" + visibility_note(visibility_variable);
  }
  return out;
}

std::string format_ze_uuid(const ze_device_uuid_t& uuid) {
  bool all_zero = true;
  for (uint8_t byte : uuid.id) all_zero = all_zero && byte == 0;
  if (all_zero) return "";
  std::string out;
  char hex[3];
  for (size_t i = 0; i < ZE_MAX_DEVICE_UUID_SIZE; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned>(uuid.id[i]));
    out += hex;
  }
  return out;
}

std::string format_pci_address(const ze_pci_address_ext_t& address) {
  char out[48];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%x", address.domain, address.bus, address.device,
                address.function);
  return out;
}

uint64_t intel_capabilities(const ze_device_module_properties_t& module) {
  uint64_t caps = BP_CAP_BF16;
  if (module.fp16flags != 0) caps |= BP_CAP_FP16;
  if (module.fp64flags != 0) caps |= BP_CAP_FP64;
  return caps;
}

}  // namespace backplane::xpu

// Discovery of Intel GPUs through the Level Zero loader: each GPU device of each driver, or the
// specific reason there is none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ze_loader.hpp"

namespace backplane::xpu {

struct IntelGpu {
  std::string name;
  std::string vendor;      // "Intel" for PCI vendor 0x8086
  std::string uuid;        // "01234567-89ab-cdef-0123-456789abcdef"
  std::string pci_bus_id;  // "0000:3a:00.0"; empty when the driver lacks the PCI extension
  uint64_t memory_total = 0;
  uint64_t capabilities = 0;
  int64_t sub_devices = 0;  // tiles (stacks); 0 for a single-tile GPU
  int64_t eu_count = 0;
  int64_t subslices = 0;  // Xe cores
  int64_t threads_per_eu = 0;
  int64_t simd_width = 0;
  int64_t clock_mhz = 0;
  int64_t max_mem_alloc_bytes = 0;
  int64_t pci_device_id = 0;
  bool integrated = false;
};

struct IntelDiscovery {
  std::vector<IntelGpu> gpus;      // drivers in loader order, devices in driver order
  std::string unavailable_reason;  // set when gpus is empty
};

// zeInit(ZE_INIT_FLAG_GPU_ONLY), then every GPU device. The loader and driver have applied
// ZE_AFFINITY_MASK and ZE_FLAT_DEVICE_HIERARCHY themselves; `visibility_variable` (may be empty)
// is only named in a reason when no GPU is shown.
IntelDiscovery discover_intel_gpus(const ZeLoader& ze, const std::string& visibility_variable);

// Pure helpers.
std::string format_ze_uuid(const ze_device_uuid_t& uuid);  // 8-4-4-4-12 hex; empty if all zero
std::string format_pci_address(const ze_pci_address_ext_t& address);  // "0000:3a:00.0"
// bf16 on every GPU, as torch.xpu.is_bf16_supported() answers by default (emulated where the
// GPU lacks bf16 math); fp16 and fp64 as the driver's module properties say.
uint64_t intel_capabilities(const ze_device_module_properties_t& module);

}  // namespace backplane::xpu

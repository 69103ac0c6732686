// The xpu plugin: Intel GPUs through the oneAPI Level Zero loader (libze_loader.so.1, opened at
// init). Registers `xpu`.
//
// No memory_info: free memory needs Sysman (zesDeviceEnumMemoryModules, zesMemoryGetState),
// which answers only when ZES_ENABLE_SYSMAN=1 was set before the process's first zeInit, or
// through zesInit, which Debian's loader (1.8) lacks. A plugin may not change the environment,
// so the question is left to the host's own tools.
#include <backplane/plugin_sdk.hpp>

#include <cstdlib>
#include <memory>
#include <string>

#include "device_type.hpp"
#include "intel_discovery.hpp"
#include "pci_scan.hpp"
#include "ze_loader.hpp"

namespace backplane::xpu {
namespace {

constexpr const char* kVisibilityVariable = "ZE_AFFINITY_MASK";

sdk::DeviceTypeSpec device_type() {
  return backends::device_type_spec("xpu");
}

sdk::DeviceSpec device_spec(int index, const IntelGpu& gpu,
                            const std::string& visibility_variable) {
  sdk::DeviceSpec device;
  device.type = "xpu";
  device.index = index;
  // ZE_AFFINITY_MASK removes devices before we see them, so the physical index is unknown.
  device.physical_index = visibility_variable.empty() ? index : -1;
  device.name = gpu.name;
  device.vendor = gpu.vendor;
  device.uuid = gpu.uuid;
  device.pci_bus_id = gpu.pci_bus_id;
  device.memory_total = gpu.memory_total;
  device.capabilities = gpu.capabilities;
  device.visibility_variable = visibility_variable;
  device.properties = {
      {"sub_devices", gpu.sub_devices},
      {"eu_count", gpu.eu_count},
      {"subslices", gpu.subslices},
      {"threads_per_eu", gpu.threads_per_eu},
      {"simd_width", gpu.simd_width},
      {"clock_mhz", gpu.clock_mhz},
      {"max_mem_alloc_bytes", gpu.max_mem_alloc_bytes},
      {"pci_device_id", gpu.pci_device_id},
      {"integrated", gpu.integrated},
  };
  return device;
}

class XpuPlugin {
 public:
  explicit XpuPlugin(sdk::Host host) : host_(host) {}

  void register_all(sdk::Registrar& registrar) {
    const std::string visibility_variable =
        secure_getenv(kVisibilityVariable) != nullptr ? kVisibilityVariable : "";
    std::string error;
    loader_ = ZeLoader::open(error);
    IntelDiscovery found;
    if (loader_) {
      found = discover_intel_gpus(*loader_, visibility_variable);
    } else {
      found.unavailable_reason = error;
    }

    sdk::DeviceTypeSpec xpu = device_type();
    if (found.gpus.empty()) {
      // Intel's host bridges and other chipset functions are vendor 0x8086 too, but the scan
      // counts display and accelerator controllers only.
      const std::string on_bus = backends::pci_presence_note(backends::kPciVendorIntel, "Intel");
      xpu.available = false;
      xpu.unavailable_reason = found.unavailable_reason + on_bus;
      registrar.add(xpu);
      host_.log(on_bus.empty() ? BP_LOG_INFO : BP_LOG_WARN,
                "xpu unavailable: " + xpu.unavailable_reason);
      loader_.reset();
      return;
    }
    xpu.available = true;
    registrar.add(xpu);
    for (size_t i = 0; i < found.gpus.size(); ++i) {
      registrar.add(device_spec(static_cast<int>(i), found.gpus[i], visibility_variable));
    }
    host_.debug(std::to_string(found.gpus.size()) + " Intel GPU(s) through " + kZeLoaderSoname);
  }

 private:
  sdk::Host host_;
  std::unique_ptr<ZeLoader> loader_;  // open while devices are registered; closed at shutdown
};

}  // namespace
}  // namespace backplane::xpu

BACKPLANE_PLUGIN(backplane::xpu::XpuPlugin, "xpu", "0.1.0")

// The rocm plugin: AMD GPUs through the HIP runtime (libamdhip64.so.5, opened at init). It
// registers `rocm`, and also `cuda` for the same GPUs when no NVIDIA GPU is on the PCI bus, as
// PyTorch's ROCm builds answer to "cuda". With both vendors present, `cuda` is NVIDIA's.
#include <backplane/plugin_sdk.hpp>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "amd_discovery.hpp"
#ifdef BACKPLANE_ROCM_ATTENTION_ARCHS
#include "attention_kernels.hpp"
#endif
#include "device_type.hpp"
#include "hip_api.hpp"
#include "pci_scan.hpp"

namespace backplane::rocm {
namespace {

using sdk::Property;

// rocm, or cuda as PyTorch's ROCm builds call AMD GPUs: rocm's facts (its Hub key) either way.
sdk::DeviceTypeSpec device_type(const std::string& name) {
  sdk::DeviceTypeSpec type = backends::device_type_spec("rocm");
  type.name = name;
  return type;
}

sdk::DeviceSpec device_spec(const std::string& type, int index, const AmdGpu& gpu,
                            const std::string& visibility_variable) {
  sdk::DeviceSpec device;
  device.type = type;
  device.index = index;
  // The runtime has already renumbered the GPUs when a visibility variable is set.
  device.physical_index = visibility_variable.empty() ? index : -1;
  device.name = gpu.name;
  device.vendor = "AMD";
  device.uuid = gpu.uuid;
  device.pci_bus_id = gpu.pci_bus_id;
  device.arch = gpu.arch;
  // HIP's "compute capability" (9.0 for gfx90a) is not NVIDIA's; the arch says what a GPU is.
  device.compute_capability_major = -1;
  device.compute_capability_minor = -1;
  device.memory_total = gpu.memory_total;
  device.capabilities = gpu.capabilities;
  device.visibility_variable = visibility_variable;
  if (!gpu.gcn_arch_name.empty()) device.properties.push_back({"gcn_arch_name", gpu.gcn_arch_name});
  if (gpu.multiprocessor_count >= 0) {
    device.properties.push_back({"multiprocessor_count", gpu.multiprocessor_count});
  }
  if (gpu.clock_mhz >= 0) device.properties.push_back({"clock_mhz", gpu.clock_mhz});
  if (gpu.warp_size >= 0) device.properties.push_back({"warp_size", gpu.warp_size});
  device.properties.push_back({"integrated", gpu.integrated});
  // What the hub matches a kernel package's rocmXY variants against (hub/README.md).
  if (!gpu.runtime_version.empty()) {
    device.properties.push_back({"runtime_version", gpu.runtime_version});
  }
  return device;
}

class RocmPlugin {
 public:
  explicit RocmPlugin(sdk::Host host) : host_(host) {}

  void register_all(sdk::Registrar& registrar) {
    const std::string visibility_variable =
        rocm_visibility_variable([](const char* name) { return secure_getenv(name); });
    std::string error;
    std::unique_ptr<HipRuntime> hip = HipRuntime::open(error);
    AmdDiscovery found;
    if (hip) {
      found = discover_amd_gpus(*hip, visibility_variable);
    } else {
      found.unavailable_reason = error;
    }

    if (found.gpus.empty()) {
      const std::string on_bus = backends::pci_presence_note(backends::kPciVendorAmd, "AMD");
      sdk::DeviceTypeSpec rocm = device_type("rocm");
      rocm.available = false;
      rocm.unavailable_reason = found.unavailable_reason + on_bus;
      registrar.add(rocm);
      // No AMD GPU and no runtime is the normal state of most machines; GPUs on the bus that
      // the runtime cannot use are worth a warning.
      host_.log(on_bus.empty() ? BP_LOG_INFO : BP_LOG_WARN,
                "rocm unavailable: " + rocm.unavailable_reason);
      register_kernels(registrar, {"rocm"}, {});
      return;  // `hip` is closed here: nothing will be asked of it
    }

    types_ = {"rocm"};
    const size_t nvidia = backends::pci_devices_of(backends::kPciVendorNvidia).size();
    if (nvidia == 0) {
      types_.push_back("cuda");
    } else {
      host_.debug("not registering cuda for AMD GPUs: " + std::to_string(nvidia) +
                  " NVIDIA device(s) on the PCI bus own it");
    }
    for (const std::string& type : types_) {
      sdk::DeviceTypeSpec spec = device_type(type);
      spec.available = true;
      registrar.add(spec);
      for (size_t i = 0; i < found.gpus.size(); ++i) {
        registrar.add(device_spec(type, static_cast<int>(i), found.gpus[i], visibility_variable));
      }
    }
    device_count_ = static_cast<int>(found.gpus.size());
    std::vector<std::string> archs;
    for (const AmdGpu& gpu : found.gpus) archs.push_back(gpu.arch);
    register_kernels(registrar, types_, std::move(archs));
    hip_ = std::move(hip);
    host_.debug(std::to_string(device_count_) + " AMD GPU(s) through " + kHipRuntimeSoname);
  }

  // hipMemGetInfo() answers for the calling thread's current device: switch to the device asked
  // for and back.
  std::optional<sdk::MemoryInfo> memory_info(std::string_view type, int index) const {
    if (!knows(type, index)) return std::nullopt;
    if (!hip_->can_report_memory()) {
      throw sdk::Error(BP_UNIMPLEMENTED, "this HIP runtime lacks hipMemGetInfo or hipSetDevice");
    }
    int previous = 0;
    check(hip_->get_device(&previous), "hipGetDevice");
    check(hip_->set_device(index), "hipSetDevice");
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    const HipError error = hip_->mem_get_info(&free_bytes, &total_bytes);
    hip_->set_device(previous);
    check(error, "hipMemGetInfo");
    return sdk::MemoryInfo{free_bytes, total_bytes};
  }

 private:
  // The HIP attention kernels, when they were built; listed even where rocm is unavailable.
  void register_kernels(sdk::Registrar& registrar, const std::vector<std::string>& types,
                        std::vector<std::string> device_archs) {
#ifdef BACKPLANE_ROCM_ATTENTION_ARCHS
    attention_ = std::make_unique<AttentionKernels>(
        host_, std::vector<std::string>{BACKPLANE_ROCM_ATTENTION_ARCHS}, std::move(device_archs));
    attention_->register_all(registrar, types);
#else
    (void)registrar;
    (void)types;
    (void)device_archs;
#endif
  }

  bool knows(std::string_view type, int index) const {
    if (hip_ == nullptr || index < 0 || index >= device_count_) return false;
    for (const std::string& t : types_) {
      if (t == type) return true;
    }
    return false;
  }

  void check(HipError error, const char* call) const {
    if (error != kHipSuccess) {
      throw sdk::Error(BP_UNAVAILABLE, std::string(call) + " failed: " + hip_->describe(error));
    }
  }

  sdk::Host host_;
  std::unique_ptr<HipRuntime> hip_;  // open while devices are registered; closed at shutdown
  std::vector<std::string> types_;
  int device_count_ = 0;
#ifdef BACKPLANE_ROCM_ATTENTION_ARCHS
  std::unique_ptr<AttentionKernels> attention_;  // the kernels' context, until shutdown
#endif
};

}  // namespace
}  // namespace backplane::rocm

BACKPLANE_PLUGIN(backplane::rocm::RocmPlugin, "rocm", "0.1.0")

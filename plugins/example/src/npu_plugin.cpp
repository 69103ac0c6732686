// The Example NPU plugin: a complete backplane plugin of a fictional vendor, built outside the
// backplane tree with the installed SDK. Its devices come from the device file EXAMPLE_NPU_CONFIG
// names (devices.conf shows the format), as a real plugin's would come from its driver.
#include "attention.hpp"
#include "device_file.hpp"

#include <backplane/plugin_sdk.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace example_npu {

class NpuPlugin {
 public:
  explicit NpuPlugin(backplane::sdk::Host host) : host_(host) {}

  void register_all(backplane::sdk::Registrar& registrar) {
    backplane::sdk::DeviceTypeSpec type;
    type.name = "npu";
    type.collective_backend = "hccl";  // the collective backend Accelerate uses for `npu`
    type.training_priority = 50;       // Transformers' order: after musa, before hpu and cuda
    type.flags = BP_TYPE_ACCELERATOR | BP_TYPE_AUTO_PLACEMENT;
    type.unavailable_reason = discover();
    type.available = type.unavailable_reason.empty();
    registrar.add(type);
    if (!type.available) return;

    for (size_t i = 0; i < devices_.size(); ++i) registrar.add(device_spec(i));

    backplane::sdk::KernelSpec kernel;
    kernel.op = "attention_forward";
    kernel.implementation = "eager";
    kernel.device_type = "npu";
    kernel.dtypes = {"float32"};
    kernel.max_head_dim = kMaxHeadDim;
    kernel.function = reinterpret_cast<void (*)(void)>(&NpuPlugin::attention);
    kernel.context = this;  // lives in the plugin's state until shutdown
    if (!registrar.add(kernel)) host_.debug("the host takes no kernels (ABI older than 1.3)");

    // The vendor's Hub kernel for RMSNorm replaces the layer on NPUs when inferring.
    backplane::sdk::LayerKernelSpec rms_norm;
    rms_norm.layer = "RMSNorm";
    rms_norm.device_key = "npu";
    rms_norm.mode = BP_KERNEL_MODE_INFERENCE;
    rms_norm.repo = "example-vendor/npu-layers";
    rms_norm.kernel_layer = "RMSNorm";
    if (!registrar.add(rms_norm)) {
      host_.debug("the host takes no default layer kernels (ABI older than 1.4)");
    }
  }

  std::optional<backplane::sdk::MemoryInfo> memory_info(std::string_view type, int index) const {
    if (type != "npu" || index < 0 || static_cast<size_t>(index) >= devices_.size()) {
      return std::nullopt;
    }
    const NpuDevice& d = devices_[static_cast<size_t>(index)];
    return backplane::sdk::MemoryInfo{d.memory_bytes - d.used_bytes, d.memory_bytes};
  }

 private:
  // Reads the device file; returns why the backend is unavailable, or empty.
  std::string discover() {
    const char* path = std::getenv("EXAMPLE_NPU_CONFIG");
    if (path == nullptr || *path == '\0') {
      return "EXAMPLE_NPU_CONFIG is not set: point it at the NPU device file (the plugin ships "
             "a sample, share/example_npu/devices.conf)";
    }
    try {
      devices_ = read_device_file(path);
    } catch (const DeviceFileError& e) {
      return std::string("EXAMPLE_NPU_CONFIG: ") + e.what();
    }
    if (devices_.empty()) return std::string("no devices in ") + path;
    host_.info("read " + std::to_string(devices_.size()) + " NPUs from " + path);
    return {};
  }

  backplane::sdk::DeviceSpec device_spec(size_t i) const {
    const NpuDevice& d = devices_[i];
    backplane::sdk::DeviceSpec spec;
    spec.type = "npu";
    spec.index = static_cast<int>(i);
    spec.physical_index = static_cast<int>(i);
    spec.name = d.name;
    spec.vendor = "Example Devices";
    spec.arch = d.arch;
    spec.memory_total = d.memory_bytes;
    spec.capabilities = BP_CAP_FP16 | BP_CAP_BF16 | BP_CAP_UNIFIED_MEMORY;
    spec.properties.push_back({"cores", d.cores});
    if (!d.firmware.empty()) spec.properties.push_back({"firmware", d.firmware});
    return spec;
  }

  static bp_status* attention(void* context, const bp_attention_args* args) noexcept {
    const auto* self = static_cast<const NpuPlugin*>(context);
    if (args == nullptr)
      return self->host_.status(BP_INVALID_ARGUMENT, "attention_forward: args is NULL");
    try {
      const std::string error = attention_forward(*args);
      if (error.empty()) return nullptr;
      return self->host_.status(BP_INVALID_ARGUMENT, "attention_forward: " + error);
    } catch (...) {  // only an allocation can throw here
      return self->host_.status(BP_OUT_OF_MEMORY, "attention_forward: out of memory");
    }
  }

  backplane::sdk::Host host_;
  std::vector<NpuDevice> devices_;
};

}  // namespace example_npu

BACKPLANE_PLUGIN(example_npu::NpuPlugin, "example_npu", "1.0.0")

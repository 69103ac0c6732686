// The cpu plugin: the host CPU as device cpu:0, with its topology (hwloc), memory and SIMD
// features (cpu_features). Always available.
#include <backplane/plugin_sdk.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "cpu_features.hpp"
#ifdef BACKPLANE_CPU_ATTENTION
#include "attention_kernels.hpp"
#endif
#include "cpu_topology.hpp"
#include "device_type.hpp"
#include "layer_kernels.hpp"

namespace backplane::cpu {
namespace {

using sdk::Property;

class CpuPlugin {
 public:
  explicit CpuPlugin(sdk::Host host) : host_(host) {}

  void register_all(sdk::Registrar& registrar) {
    sdk::DeviceTypeSpec cpu = backends::device_type_spec("cpu");
    cpu.available = true;
    registrar.add(cpu);

    const CpuTopology topology = read_topology();
    const CpuIdentity identity = read_cpu_identity();
    sdk::DeviceSpec device;
    device.type = "cpu";
    device.index = 0;
    device.physical_index = 0;
    device.name = identity.brand.empty() ? identity.arch + " CPU" : identity.brand;
    device.vendor = identity.vendor;
    device.arch = identity.arch;
    device.memory_total = topology.memory_total;
    device.capabilities = BP_CAP_FP16 | BP_CAP_BF16 | BP_CAP_FP64;  // supported, if not fast
    device.properties = {
        Property{"packages", topology.packages},
        Property{"cores", topology.cores},
        Property{"threads", topology.threads},
        Property{"numa_nodes", topology.numa_nodes},
        Property{"l1d_cache_bytes", topology.l1d_cache_bytes},
        Property{"l2_cache_bytes", topology.l2_cache_bytes},
        Property{"l3_cache_bytes", topology.l3_cache_bytes},
        Property{"simd", identity.simd},
    };
    if (!identity.microarchitecture.empty()) {
      device.properties.push_back(Property{"microarchitecture", identity.microarchitecture});
    }
    if (std::optional<uint64_t> available = meminfo_bytes("MemAvailable")) {
      device.properties.push_back(Property{"memory_available", static_cast<int64_t>(*available)});
    }
    registrar.add(device);
#ifdef BACKPLANE_CPU_ATTENTION
    register_attention_kernels(registrar, &host_);
#endif
    if (!backends::register_default_layer_kernels(registrar, "cpu")) {
      host_.debug("the host takes no layer kernels (ABI older than 1.4)");
    }
    memory_total_ = topology.memory_total;
    host_.debug(std::to_string(topology.cores) + " cores, " + std::to_string(topology.threads) +
                " threads");
  }

  std::optional<sdk::MemoryInfo> memory_info(std::string_view type, int index) const {
    if (type != "cpu" || index != 0) return std::nullopt;
    return sdk::MemoryInfo{meminfo_bytes("MemAvailable").value_or(0), memory_total_};
  }

 private:
  sdk::Host host_;
  uint64_t memory_total_ = 0;
};

}  // namespace
}  // namespace backplane::cpu

BACKPLANE_PLUGIN(backplane::cpu::CpuPlugin, "cpu", "0.1.0")

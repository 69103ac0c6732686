#include "amd_discovery.hpp"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "amd_gpu_arch.hpp"

namespace backplane::rocm {
namespace {

std::string visibility_note(const std::string& variable) {
  if (variable.empty()) return "";
  const char* value = secure_getenv(variable.c_str());
  return " (" + variable + "=\"" + (value != nullptr ? value : "") + "\" is set)";
}

std::optional<int> attribute(const HipRuntime& hip, HipAttribute which, int device) {
  int value = 0;
  if (hip.device_get_attribute(&value, which, device) != kHipSuccess) return std::nullopt;
  return value;
}

std::string gcn_arch_name(const HipRuntime& hip, int device) {
  if (hip.get_device_properties == nullptr) return "";
  alignas(16) std::array<char, kHipDevicePropBufferSize> properties{};
  if (hip.get_device_properties(properties.data(), device) != kHipSuccess) return "";
  const char* name = properties.data() + kHipDevicePropGcnArchNameOffset;
  return std::string(name, strnlen(name, kHipDevicePropGcnArchNameSize));
}

AmdGpu describe_gpu(const HipRuntime& hip, int device) {
  AmdGpu gpu;
  std::array<char, 256> name{};
  if (hip.device_get_name(name.data(), static_cast<int>(name.size()), device) == kHipSuccess) {
    gpu.name = std::string(name.data(), strnlen(name.data(), name.size()));
  }
  if (gpu.name.empty()) gpu.name = "AMD GPU";
  HipUuid uuid{};
  if (hip.device_get_uuid != nullptr && hip.device_get_uuid(&uuid, device) == kHipSuccess) {
    gpu.uuid = format_hip_uuid(uuid.bytes);
  }
  std::array<char, 64> bus_id{};
  if (hip.device_get_pci_bus_id(bus_id.data(), static_cast<int>(bus_id.size()), device) ==
      kHipSuccess) {
    bus_id.back() = '\0';
    gpu.pci_bus_id = normalize_pci_bus_id(bus_id.data()).value_or("");
  }
  size_t memory = 0;
  if (hip.device_total_mem(&memory, device) == kHipSuccess) gpu.memory_total = memory;
  gpu.multiprocessor_count =
      attribute(hip, HipAttribute::kMultiprocessorCount, device).value_or(-1);
  if (std::optional<int> khz = attribute(hip, HipAttribute::kClockRate, device)) {
    gpu.clock_mhz = *khz / 1000;
  }
  gpu.warp_size = attribute(hip, HipAttribute::kWarpSize, device).value_or(-1);
  gpu.integrated = attribute(hip, HipAttribute::kIntegrated, device).value_or(0) != 0;

  gpu.gcn_arch_name = gcn_arch_name(hip, device);
  if (std::optional<GcnArch> arch = parse_gcn_arch_name(gpu.gcn_arch_name)) {
    gpu.arch = arch->processor;
    gpu.capabilities = amd_capabilities(*arch, gpu.integrated);
  } else {
    gpu.capabilities = amd_capabilities(GcnArch{}, gpu.integrated);  // what every AMD GPU has
  }
  return gpu;
}

}  // namespace

AmdDiscovery discover_amd_gpus(const HipRuntime& hip, const std::string& visibility_variable) {
  AmdDiscovery out;
  if (const HipError error = hip.init(0); error != kHipSuccess) {
    out.unavailable_reason = "hipInit failed: " + hip.describe(error) + kfd_note() +
                             visibility_note(visibility_variable);
    return out;
  }
  int count = 0;
  if (const HipError error = hip.get_device_count(&count); error != kHipSuccess) {
    out.unavailable_reason = "hipGetDeviceCount failed: " + hip.describe(error) + kfd_note() +
                             visibility_note(visibility_variable);
    return out;
  }
  if (count <= 0) {
    out.unavailable_reason =
        "the HIP runtime reports 0 devices" + kfd_note() + visibility_note(visibility_variable);
    return out;
  }
  int version = 0;
  const std::string runtime_version =
      hip.runtime_get_version != nullptr && hip.runtime_get_version(&version) == kHipSuccess
          ? hip_version_string(version)
          : "";
  for (int device = 0; device < count; ++device) {
    out.gpus.push_back(describe_gpu(hip, device));
    out.gpus.back().runtime_version = runtime_version;
  }
  return out;
}

std::string hip_version_string(int version) {
  if (version < 10000000) return "";  // HIP 1.0 and later only
  return std::to_string(version / 10000000) + "." + std::to_string(version / 100000 % 100);
}

std::string rocm_visibility_variable(const GetEnv& getenv) {
  for (const char* variable :
       {"ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
    if (getenv(variable) != nullptr) return variable;
  }
  return "";
}

std::string kfd_note(const std::string& kfd) {
  if (access(kfd.c_str(), F_OK) == 0) return "";
  return "; " + kfd +
         " does not exist (the amdgpu kernel driver is not loaded, or this container was started "
         "without it)";
}

}  // namespace backplane::rocm

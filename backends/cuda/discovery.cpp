#include "discovery.hpp"

#include <stdexcept>
#include <utility>

#include "device_facts.hpp"

namespace backplane::cuda {
namespace {

constexpr CUresult kCudaErrorNoDevice = 100;  // CUDA_ERROR_NO_DEVICE

// A failed required driver call: ends discovery with the backend unavailable.
struct DriverFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Reader {
 public:
  explicit Reader(const DriverLibrary& driver) : driver_(driver), api_(driver.api()) {}

  void check(CUresult result, const char* call, int ordinal) const {
    if (result == kCudaSuccess) return;
    throw DriverFailure(std::string(call) + " failed for device " + std::to_string(ordinal) + ": " +
                        driver_.describe(result));
  }

  // An attribute that only adds a property: absent when the driver does not report it.
  std::optional<int64_t> attribute(DeviceAttribute attribute, CUdevice device) const {
    int value = 0;
    if (api_.cuDeviceGetAttribute(&value, attribute, device) != kCudaSuccess) return std::nullopt;
    return value;
  }

  int required_attribute(DeviceAttribute attribute, CUdevice device, int ordinal) const {
    int value = 0;
    check(api_.cuDeviceGetAttribute(&value, attribute, device), "cuDeviceGetAttribute", ordinal);
    return value;
  }

  CudaDevice read(int ordinal, const NvmlLibrary* nvml, const std::string& driver_version) const {
    CudaDevice out;
    check(api_.cuDeviceGet(&out.handle, ordinal), "cuDeviceGet", ordinal);
    const CUdevice dev = out.handle;
    sdk::DeviceSpec& spec = out.spec;
    spec.type = "cuda";
    spec.index = ordinal;
    spec.vendor = "NVIDIA";

    char name[256] = {};
    check(api_.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName", ordinal);
    spec.name = name;

    // _v2 gives a MIG instance's own UUID; the older entry gives its GPU's. They differ only
    // for a MIG instance, which CUDA_VISIBLE_DEVICES and nvidia-smi call "MIG-<uuid>".
    CUuuid own{};
    check(api_.cuDeviceGetUuid_v2(&own, dev), "cuDeviceGetUuid_v2", ordinal);
    spec.uuid = format_uuid(own.bytes);
    std::string gpu_uuid = spec.uuid;
    CUuuid whole{};
    if (api_.cuDeviceGetUuid != nullptr && api_.cuDeviceGetUuid(&whole, dev) == kCudaSuccess) {
      if (std::string whole_uuid = format_uuid(whole.bytes); whole_uuid != spec.uuid) {
        spec.uuid = format_uuid(own.bytes, "MIG-");
        gpu_uuid = std::move(whole_uuid);
        spec.properties.push_back(sdk::Property{"parent_uuid", gpu_uuid});
      }
    }

    char bus_id[64] = {};
    check(api_.cuDeviceGetPCIBusId(bus_id, sizeof bus_id, dev), "cuDeviceGetPCIBusId", ordinal);
    spec.pci_bus_id = normalize_pci_bus_id(bus_id);

    size_t total = 0;
    check(api_.cuDeviceTotalMem_v2(&total, dev), "cuDeviceTotalMem_v2", ordinal);
    spec.memory_total = total;

    const int major = required_attribute(kAttrComputeCapabilityMajor, dev, ordinal);
    const int minor = required_attribute(kAttrComputeCapabilityMinor, dev, ordinal);
    spec.compute_capability_major = major;
    spec.compute_capability_minor = minor;
    spec.arch = arch_name(major, minor);
    spec.capabilities = capabilities_for(major, minor);

    add_properties(spec, dev, driver_version);

    // NVML: the index nvidia-smi shows (of the whole GPU for a MIG instance), and a handle for
    // free memory (the instance's own, for a MIG instance).
    if (nvml != nullptr && nvml->usable()) {
      if (std::optional<nvmlDevice_t> gpu = nvml->device_by_uuid(gpu_uuid)) {
        if (std::optional<unsigned> index = nvml->index(*gpu)) {
          spec.physical_index = static_cast<int>(*index);
        }
      }
      if (std::optional<nvmlDevice_t> handle = nvml->device_by_uuid(spec.uuid)) out.nvml = *handle;
    }
    return out;
  }

 private:
  void add_properties(sdk::DeviceSpec& spec, CUdevice dev,
                      const std::string& driver_version) const {
    auto add_int = [&](const char* property, DeviceAttribute attribute, int64_t divisor = 1) {
      if (std::optional<int64_t> v = this->attribute(attribute, dev); v && *v > 0) {
        spec.properties.push_back(sdk::Property{property, *v / divisor});
      }
    };
    auto add_bool = [&](const char* property, DeviceAttribute attribute) {
      if (std::optional<int64_t> v = this->attribute(attribute, dev)) {
        spec.properties.push_back(sdk::Property{property, *v != 0});
      }
    };
    add_int("multiprocessors", kAttrMultiprocessorCount);
    add_int("clock_mhz", kAttrClockRate, 1000);
    add_int("memory_clock_mhz", kAttrMemoryClockRate, 1000);
    add_int("memory_bus_width", kAttrGlobalMemoryBusWidth);
    add_int("l2_cache_bytes", kAttrL2CacheSize);
    add_int("max_threads_per_multiprocessor", kAttrMaxThreadsPerMultiprocessor);
    add_int("shared_memory_per_block_optin_bytes", kAttrMaxSharedMemoryPerBlockOptin);
    add_bool("ecc_enabled", kAttrEccEnabled);
    add_bool("integrated", kAttrIntegrated);
    if (!driver_version.empty()) {
      spec.properties.push_back(sdk::Property{"driver_version", driver_version});
    }
  }

  const DriverLibrary& driver_;
  const DriverEntryPoints& api_;
};

std::string plural_gpus(unsigned n) {
  return std::to_string(n) + (n == 1 ? " GPU" : " GPUs");
}

}  // namespace

std::string no_device_hint(const std::optional<std::string>& visible_devices,
                           std::optional<unsigned> nvml_gpu_count) {
  std::string hint;
  if (visible_devices) {
    hint = visible_devices->empty()
               ? "CUDA_VISIBLE_DEVICES is set but empty, which hides every device"
               : "CUDA_VISIBLE_DEVICES=\"" + *visible_devices +
                     "\" may name no device that exists; unset it to see them all";
  }
  if (nvml_gpu_count) {
    hint += (hint.empty() ? "" : "; ") + std::string("NVML sees ") + plural_gpus(*nvml_gpu_count);
  }
  return hint.empty() ? "" : " (" + hint + ")";
}

Discovery discover(DriverLibrary& driver, const NvmlLibrary* nvml,
                   const std::optional<std::string>& visible_devices) {
  Discovery out;
  const auto nvml_gpu_count = [&] { return nvml != nullptr ? nvml->device_count() : std::nullopt; };
  if (!driver.usable()) {
    out.reason = driver.error();
    return out;
  }
  const DriverEntryPoints& api = driver.api();
  const CUresult init = driver.init();
  if (init != kCudaSuccess) {
    out.reason = "cuInit failed: " + driver.describe(init);
    if (init == kCudaErrorNoDevice) {
      out.reason += no_device_hint(visible_devices, nvml_gpu_count());
    } else if (!driver.path().empty()) {
      // Version mismatches and stub libraries are about which file was loaded.
      out.reason += " (driver library: " + driver.path() + ")";
    }
    return out;
  }

  int version = 0;
  const std::string driver_version =
      api.cuDriverGetVersion(&version) == kCudaSuccess ? driver_version_string(version) : "";

  int count = 0;
  if (const CUresult r = api.cuDeviceGetCount(&count); r != kCudaSuccess) {
    out.reason = "cuDeviceGetCount failed: " + driver.describe(r);
    return out;
  }
  if (count == 0) {
    out.reason = "the driver reports 0 devices" + no_device_hint(visible_devices, nvml_gpu_count());
    return out;
  }

  const Reader reader(driver);
  try {
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      CudaDevice device = reader.read(ordinal, nvml, driver_version);
      if (visible_devices) device.spec.visibility_variable = "CUDA_VISIBLE_DEVICES";
      out.devices.push_back(std::move(device));
    }
  } catch (const DriverFailure& e) {
    out.devices.clear();
    out.reason = e.what();
    return out;
  }
  out.available = true;
  return out;
}

}  // namespace backplane::cuda

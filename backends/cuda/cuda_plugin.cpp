// The cuda plugin: NVIDIA GPUs through the CUDA driver API (libcuda.so.1, opened at init) and,
// where present, NVML. Without a usable driver it still loads and registers `cuda` as
// unavailable, with a reason a person can act on; that is reported at INFO, not as an error.
#include <backplane/plugin_sdk.hpp>

#include <stdlib.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#ifdef BACKPLANE_CUDA_ATTENTION
#include "attention_kernels.hpp"
#endif
#include "device_type.hpp"
#include "discovery.hpp"
#include "driver_api.hpp"
#include "layer_kernels.hpp"
#include "nvml_api.hpp"
#include "pci_scan.hpp"

namespace backplane::cuda {
namespace {

std::optional<std::string> visible_devices_variable() {
  const char* value = secure_getenv("CUDA_VISIBLE_DEVICES");
  return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
}

// Makes a primary context current on this thread for the guard's life, then restores the
// thread's previous context and drops our reference. The primary context is the one the CUDA
// runtime (and so LibTorch) shares, so when the host already uses the device this creates
// nothing.
class PrimaryContextScope {
 public:
  PrimaryContextScope(const DriverLibrary& driver, CUdevice device, int index)
      : api_(driver.api()), device_(device) {
    CUcontext context = nullptr;
    if (const CUresult r = api_.cuDevicePrimaryCtxRetain(&context, device); r != kCudaSuccess) {
      throw fail(driver, "cuDevicePrimaryCtxRetain", index, r);
    }
    if (const CUresult r = api_.cuCtxPushCurrent_v2(context); r != kCudaSuccess) {
      api_.cuDevicePrimaryCtxRelease_v2(device_);
      throw fail(driver, "cuCtxPushCurrent", index, r);
    }
  }
  ~PrimaryContextScope() {
    CUcontext popped = nullptr;
    api_.cuCtxPopCurrent_v2(&popped);
    api_.cuDevicePrimaryCtxRelease_v2(device_);
  }
  PrimaryContextScope(const PrimaryContextScope&) = delete;
  PrimaryContextScope& operator=(const PrimaryContextScope&) = delete;

  static sdk::Error fail(const DriverLibrary& driver, const char* call, int index, CUresult r) {
    return sdk::Error(BP_UNAVAILABLE, std::string(call) + " failed for cuda:" +
                                          std::to_string(index) + ": " + driver.describe(r));
  }

 private:
  const DriverEntryPoints& api_;
  CUdevice device_;
};

class CudaPlugin {
 public:
  explicit CudaPlugin(sdk::Host host) : host_(host) {}

  void register_all(sdk::Registrar& registrar) {
    driver_ = std::make_unique<DriverLibrary>();
    // NVML comes with the same driver package; without libcuda there is nothing to ask it.
    if (driver_->usable()) nvml_ = std::make_unique<NvmlLibrary>();
    const std::optional<std::string> visible = visible_devices_variable();
    Discovery found = discover(*driver_, nvml_.get(), visible);

    sdk::DeviceTypeSpec cuda = backends::device_type_spec("cuda");
    cuda.available = found.available;
    if (!found.available) {
      // Says when there is hardware but no usable driver: "2 NVIDIA devices are on the PCI bus".
      cuda.unavailable_reason =
          found.reason + backends::pci_presence_note(backends::kPciVendorNvidia, "NVIDIA");
    }
    registrar.add(cuda);
#ifdef BACKPLANE_CUDA_ATTENTION
    register_attention_kernels(registrar, &host_);
#endif
    // The packages' cuda builds target sm_80 and sm_90 (kernels/common/LayerKernel.cmake).
    if (!backends::register_default_layer_kernels(registrar, "cuda", 80)) {
      host_.debug("the host takes no layer kernels (ABI older than 1.4)");
    }

    if (!found.available) {
      host_.info("cuda is unavailable: " + cuda.unavailable_reason);
      nvml_.reset();  // nothing will ask them again
      driver_.reset();
      return;
    }
    for (const CudaDevice& device : found.devices) registrar.add(device.spec);
    devices_ = std::move(found.devices);
    host_.debug(std::to_string(devices_.size()) + " CUDA device(s); free memory from " +
                (nvml_->usable() ? std::string("NVML")
                                 : "cuMemGetInfo, since NVML is unusable: " + nvml_->error()));
  }

  // Free memory from NVML when it knows the device (no context needed); otherwise from the
  // driver, in the device's primary context. Total is what was registered (cuDeviceTotalMem).
  std::optional<sdk::MemoryInfo> memory_info(std::string_view type, int index) const {
    if (type != "cuda" || index < 0 || static_cast<size_t>(index) >= devices_.size()) {
      return std::nullopt;
    }
    const CudaDevice& device = devices_[static_cast<size_t>(index)];
    const uint64_t total = device.spec.memory_total;
    if (device.nvml != nullptr) {
      if (std::optional<nvmlMemory_t> memory = nvml_->memory(device.nvml)) {
        return sdk::MemoryInfo{std::min<uint64_t>(memory->free, total), total};
      }
    }
    const PrimaryContextScope scope(*driver_, device.handle, index);
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    if (const CUresult r = driver_->api().cuMemGetInfo_v2(&free_bytes, &total_bytes);
        r != kCudaSuccess) {
      throw PrimaryContextScope::fail(*driver_, "cuMemGetInfo", index, r);
    }
    return sdk::MemoryInfo{free_bytes, total_bytes};
  }

 private:
  sdk::Host host_;
  // Owned libraries, released in reverse order: NVML shuts down before libcuda is closed.
  std::unique_ptr<DriverLibrary> driver_;
  std::unique_ptr<NvmlLibrary> nvml_;
  std::vector<CudaDevice> devices_;  // registered, in the driver's order (index = position)
};

}  // namespace
}  // namespace backplane::cuda

BACKPLANE_PLUGIN(backplane::cuda::CudaPlugin, "cuda", "0.1.0")

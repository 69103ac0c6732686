// The oneAPI Level Zero loader (libze_loader.so.1), opened with dlopen at init, never linked.
// Types and signatures come from <level_zero/ze_api.h> at build time.
#pragma once

#include <level_zero/ze_api.h>

#include <memory>
#include <string>

#include <backplane/internal/dynamic_library.hpp>

namespace backplane::xpu {

inline constexpr const char* kZeLoaderSoname = "libze_loader.so.1";

// The opened loader and the entry points discovery uses.
class ZeLoader {
 public:
  // Opens libze_loader.so.1. nullptr with `error` set ("the Level Zero loader libze_loader.so.1
  // was not found (<dlerror>)", "... lacks zeInit") when the loader cannot be used.
  static std::unique_ptr<ZeLoader> open(std::string& error);
  // Opens `library` instead (tests).
  static std::unique_ptr<ZeLoader> open(const std::string& library, std::string& error);

  decltype(&::zeInit) init = nullptr;
  decltype(&::zeDriverGet) driver_get = nullptr;
  decltype(&::zeDeviceGet) device_get = nullptr;
  decltype(&::zeDeviceGetProperties) device_get_properties = nullptr;
  decltype(&::zeDeviceGetMemoryProperties) device_get_memory_properties = nullptr;
  decltype(&::zeDeviceGetModuleProperties) device_get_module_properties = nullptr;
  decltype(&::zeDeviceGetSubDevices) device_get_sub_devices = nullptr;
  // An extension (ZE_extension_pci_properties): null in loaders older than 1.1, and a driver may
  // answer ZE_RESULT_ERROR_UNSUPPORTED_FEATURE.
  decltype(&::zeDevicePciGetPropertiesExt) device_pci_get_properties_ext = nullptr;

 private:
  internal::DynamicLibrary library_;
};

}  // namespace backplane::xpu

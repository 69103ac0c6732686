#include "ze_loader.hpp"

#include <type_traits>

namespace backplane::xpu {

std::unique_ptr<ZeLoader> ZeLoader::open(std::string& error) {
  return open(kZeLoaderSoname, error);
}

std::unique_ptr<ZeLoader> ZeLoader::open(const std::string& library, std::string& error) {
  auto loader = std::make_unique<ZeLoader>();
  loader->library_ = internal::DynamicLibrary::open(library, error);
  if (!loader->library_) {
    error = "the Level Zero loader " + library + " was not found (" + error + ")";
    return nullptr;
  }
  error.clear();

  const internal::DynamicLibrary& lib = loader->library_;
  auto resolve = [&](auto& fn, const char* name, bool required) {
    fn = lib.function<std::remove_reference_t<decltype(fn)>>(name);
    if (fn == nullptr && required && error.empty()) {
      error = "the Level Zero loader " + library + " lacks " + name +
              " (too old or not a Level Zero loader)";
    }
  };
  resolve(loader->init, "zeInit", true);
  resolve(loader->driver_get, "zeDriverGet", true);
  resolve(loader->device_get, "zeDeviceGet", true);
  resolve(loader->device_get_properties, "zeDeviceGetProperties", true);
  resolve(loader->device_get_memory_properties, "zeDeviceGetMemoryProperties", true);
  resolve(loader->device_get_module_properties, "zeDeviceGetModuleProperties", true);
  resolve(loader->device_get_sub_devices, "zeDeviceGetSubDevices", true);
  resolve(loader->device_pci_get_properties_ext, "zeDevicePciGetPropertiesExt", false);
  if (!error.empty()) return nullptr;
  return loader;
}

}  // namespace backplane::xpu

#include "loaded_plugin.hpp"

#include "registrar.hpp"

namespace backplane::detail {

std::unique_ptr<LoadedPlugin> LoadedPlugin::load(const Manifest& manifest, const Logger& logger,
                                                 const Registry& committed, Registry& registered,
                                                 const PluginSettings& settings) {
  if (manifest.abi_major != BP_ABI_VERSION_MAJOR) {
    throw LoadError("manifest declares ABI " + abi_string(manifest.abi_major, manifest.abi_minor) +
                    "; this core loads ABI " + std::to_string(BP_ABI_VERSION_MAJOR) + ".x");
  }
  std::unique_ptr<LoadedPlugin> plugin(new LoadedPlugin());
  plugin->name_ = manifest.name;
  plugin->library_ = PluginLibrary::open(manifest.library);
  const bp_plugin_api& api = plugin->library_->api();
  if (api.name == nullptr || manifest.name != api.name) {
    throw LoadError("the library calls itself '" + std::string(api.name ? api.name : "(null)") +
                    "' but its manifest names it '" + manifest.name + "'");
  }
  // The manifest's abi_version is the ABI the library was built against: what its table says.
  if (plugin->library_->reports_abi() &&
      (manifest.abi_major != api.abi_major || manifest.abi_minor != api.abi_minor)) {
    throw LoadError("the manifest declares ABI " +
                    abi_string(manifest.abi_major, manifest.abi_minor) +
                    " but the library reports ABI " + abi_string(api.abi_major, api.abi_minor) +
                    "; a manifest's abi_version must be the ABI its library is built against "
                    "(backplane_add_plugin writes it)");
  }
  if (api.abi_minor > BP_ABI_VERSION_MINOR) {
    logger.log(LogLevel::kDebug, "plugin '" + manifest.name + "' is built for ABI " +
                                     abi_string(api.abi_major, api.abi_minor) +
                                     "; using the parts of ABI " +
                                     abi_string(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR));
  }

  PluginRegistration registration(manifest, committed);
  std::vector<RegisteredKernel> kernels =
      plugin->library_->init(bp_host_context{"plugin '" + manifest.name + "'", logger, settings},
                             manifest.name, registration);
  registered = std::move(registration.pending());
  registered.kernels = std::move(kernels);
  return plugin;
}

std::string LoadedPlugin::version() const {
  const char* version = library_->api().version;
  return version != nullptr ? version : "";
}

bool LoadedPlugin::has_memory_info() const {
  return library_->api().memory_info != nullptr;
}

bp_status* LoadedPlugin::memory_info(const std::string& type, int index, uint64_t* free_bytes,
                                     uint64_t* total_bytes) const {
  return library_->api().memory_info(library_->state(), type.c_str(), index, free_bytes,
                                     total_bytes);
}

}  // namespace backplane::detail

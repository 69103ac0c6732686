// One backend plugin loaded and initialized: its library (plugin_host/plugin_library.hpp)
// checked against its manifest. The plugin's shutdown runs, and then the library is unloaded,
// when this object is destroyed.
#pragma once

#include <memory>
#include <string>

#include "manifest.hpp"
#include "plugin_host/plugin_library.hpp"
#include "registry.hpp"

namespace backplane::detail {

class LoadedPlugin {
 public:
  // Loads the manifest's library, negotiates the ABI and runs init with `settings` behind
  // bp_host_api.setting. On success the plugin's registrations are in `registered`. Throws
  // LoadError with the reason otherwise.
  static std::unique_ptr<LoadedPlugin> load(const Manifest& manifest, const Logger& logger,
                                            const Registry& committed, Registry& registered,
                                            const PluginSettings& settings = {});

  const std::string& name() const { return name_; }
  std::string version() const;
  std::string abi_version() const { return library_->abi_version(); }
  // The plugin's memory_info, or nullptr when it has none (ABI 1.0 plugins).
  bp_status* memory_info(const std::string& type, int index, uint64_t* free_bytes,
                         uint64_t* total_bytes) const;
  bool has_memory_info() const;

 private:
  LoadedPlugin() = default;

  std::string name_;
  std::unique_ptr<PluginLibrary> library_;
};

}  // namespace backplane::detail

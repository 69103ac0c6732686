// One plugin library loaded and initialized. Owns the library handle: the plugin's shutdown
// runs, and then the library is unloaded, when this object is destroyed.
#pragma once

#include <backplane/plugin.h>
#include <backplane/internal/dynamic_library.hpp>

#include <memory>
#include <stdexcept>
#include <string>

#include "host_api.hpp"
#include "manifest.hpp"
#include "registry.hpp"

namespace backplane::detail {

// Why a plugin could not be loaded, in words for hwprobe.
class LoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LoadedPlugin {
 public:
  // Loads the manifest's library, negotiates the ABI and runs init with `settings` behind
  // bp_host_api.setting. On success the plugin's registrations are in `registered`. Throws
  // LoadError with the reason otherwise.
  static std::unique_ptr<LoadedPlugin> load(const Manifest& manifest, const Logger& logger,
                                            const Registry& committed, Registry& registered,
                                            const PluginSettings& settings = {});
  ~LoadedPlugin();
  LoadedPlugin(const LoadedPlugin&) = delete;
  LoadedPlugin& operator=(const LoadedPlugin&) = delete;

  const std::string& name() const { return host_context_.plugin_name; }
  std::string version() const;
  std::string abi_version() const;
  // The plugin's memory_info, or nullptr when it has none (ABI 1.0 plugins).
  bp_status* memory_info(const std::string& type, int index, uint64_t* free_bytes,
                         uint64_t* total_bytes) const;
  bool has_memory_info() const;

 private:
  LoadedPlugin() = default;

  internal::DynamicLibrary library_;  // declared first: unloaded last
  bp_plugin_api api_{};               // the plugin's table, read into this core's layout
  bp_host_context host_context_;
  bp_host_api host_api_{};
  bp_plugin_state* state_ = nullptr;
  bool initialized_ = false;
};

}  // namespace backplane::detail

// One library that speaks the plugin ABI, opened, negotiated and initialized: a backend plugin
// (the core's LoadedPlugin) or a kernel package's library (the hub's load_package_variant).
// What the host checks beyond the ABI (a manifest, a package's metadata.json) is the host's.
#pragma once

#include <backplane/plugin.h>
#include <backplane/internal/dynamic_library.hpp>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "plugin_host/host_api.hpp"
#include "plugin_host/registrar.hpp"

namespace backplane::detail {

// Why a library could not be loaded, in words for the user.
class LoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string abi_string(uint32_t major, uint32_t minor);

class PluginLibrary {
 public:
  // Opens `path` (unloaded again when this object goes), finds the entry symbol, asks for this
  // host's ABI and reads the table into this host's layout. Throws LoadError.
  static std::unique_ptr<PluginLibrary> open(const std::filesystem::path& path);
  // Runs the library's init with `context` behind bp_host_api and `handler` behind its
  // registrar; returns the kernels it registered. Throws LoadError when init fails or
  // registered something the registrar refused. Once init has succeeded, the library's
  // shutdown runs when this object is destroyed.
  std::vector<RegisteredKernel> init(bp_host_context context, std::string owner,
                                     RegistrationHandler& handler);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  // The library's table in this host's layout (fields it does not know read as zero/NULL).
  const bp_plugin_api& api() const { return api_; }
  // False for tables older than their abi_major/abi_minor fields: they say nothing to compare.
  bool reports_abi() const { return reports_abi_; }
  std::string abi_version() const { return abi_string(api_.abi_major, api_.abi_minor); }
  bp_plugin_state* state() const { return state_; }

 private:
  PluginLibrary() = default;

  internal::DynamicLibrary library_;  // declared first: unloaded last
  bp_plugin_api api_{};
  bool reports_abi_ = false;
  bp_host_context host_context_;
  bp_host_api host_api_{};
  bp_plugin_state* state_ = nullptr;
  bool initialized_ = false;
};

}  // namespace backplane::detail

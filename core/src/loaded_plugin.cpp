#include "loaded_plugin.hpp"

#include <filesystem>
#include <system_error>

#include "abi_struct.hpp"
#include "registrar.hpp"

namespace backplane::detail {
namespace {

std::string abi_string(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

internal::DynamicLibrary open_library(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw LoadError("library not found: " + path.string());
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw LoadError("library is not a regular file: " + path.string());
  }
  std::string error;
  // Unloaded with the plugin: a host that stops using it gets its memory back.
  internal::DynamicLibrary library = internal::DynamicLibrary::open(
      path.string(), error, internal::DynamicLibrary::OnClose::kUnloads);
  if (!library) throw LoadError("cannot load library: " + error);
  return library;
}

}  // namespace

std::unique_ptr<LoadedPlugin> LoadedPlugin::load(const Manifest& manifest, const Logger& logger,
                                                 const Registry& committed, Registry& registered,
                                                 const PluginSettings& settings) {
  if (manifest.abi_major != BP_ABI_VERSION_MAJOR) {
    throw LoadError("manifest declares ABI " + abi_string(manifest.abi_major, manifest.abi_minor) +
                    "; this core loads ABI " + std::to_string(BP_ABI_VERSION_MAJOR) + ".x");
  }
  std::unique_ptr<LoadedPlugin> plugin(new LoadedPlugin());
  plugin->library_ = open_library(manifest.library);
  const auto get_api = plugin->library_.function<bp_get_api_fn>(BP_ENTRY_SYMBOL);
  if (get_api == nullptr) {
    throw LoadError(std::string("not a backplane plugin: the library does not export ") +
                    BP_ENTRY_SYMBOL);
  }
  const bp_plugin_api* table = get_api(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  if (table == nullptr) {
    throw LoadError(std::string(BP_ENTRY_SYMBOL) + " returned NULL: the plugin cannot serve a " +
                    "host with ABI " + abi_string(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR));
  }
  if (table->struct_size >= BP_STRUCT_SIZE(bp_plugin_api, abi_minor) &&
      table->abi_major != BP_ABI_VERSION_MAJOR) {
    throw LoadError("plugin ABI " + abi_string(table->abi_major, table->abi_minor) +
                    " is incompatible with this core's ABI " +
                    abi_string(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR) +
                    " (major versions differ)");
  }
  if (!read_abi_struct(table, BP_PLUGIN_API_SIZE_1_0, plugin->api_)) {
    throw LoadError("plugin table is " + std::to_string(table->struct_size) +
                    " bytes, smaller than ABI 1.0's " + std::to_string(BP_PLUGIN_API_SIZE_1_0));
  }
  const bp_plugin_api& api = plugin->api_;
  if (api.name == nullptr || manifest.name != api.name) {
    throw LoadError("the library calls itself '" + std::string(api.name ? api.name : "(null)") +
                    "' but its manifest names it '" + manifest.name + "'");
  }
  if (api.init == nullptr) throw LoadError("plugin table has no init function");
  // The manifest's abi_version is the ABI the library was built against: what its table says.
  // (A table older than the abi fields says nothing to compare.)
  if (table->struct_size >= BP_STRUCT_SIZE(bp_plugin_api, abi_minor) &&
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

  plugin->host_context_ = bp_host_context{manifest.name, &logger, settings};
  plugin->host_api_ = make_host_api(&plugin->host_context_);
  bp_registrar_context context{&manifest, &committed, {}, {}, {}};
  const bp_registrar registrar = make_registrar(&context);

  StatusPtr status = adopt(api.init(&plugin->host_api_, &registrar, &plugin->state_));
  if (status) {
    throw LoadError("init failed (" + std::string(status_code_name(status->code)) +
                    "): " + status->message);
  }
  plugin->initialized_ = true;  // from here on, the destructor calls shutdown
  if (!context.first_error.empty()) {
    throw LoadError("init registered something invalid: " + context.first_error);
  }
  registered = std::move(context.pending);
  return plugin;
}

LoadedPlugin::~LoadedPlugin() {
  if (initialized_ && api_.shutdown != nullptr) api_.shutdown(state_);
}

std::string LoadedPlugin::version() const {
  return api_.version ? api_.version : "";
}

std::string LoadedPlugin::abi_version() const {
  return abi_string(api_.abi_major, api_.abi_minor);
}

bool LoadedPlugin::has_memory_info() const {
  return api_.memory_info != nullptr;
}

bp_status* LoadedPlugin::memory_info(const std::string& type, int index, uint64_t* free_bytes,
                                     uint64_t* total_bytes) const {
  return api_.memory_info(state_, type.c_str(), index, free_bytes, total_bytes);
}

}  // namespace backplane::detail

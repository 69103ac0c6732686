#include "plugin_host/plugin_library.hpp"

#include <system_error>

#include "plugin_host/abi_struct.hpp"

namespace backplane::detail {
namespace {

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

std::string abi_string(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

std::unique_ptr<PluginLibrary> PluginLibrary::open(const std::filesystem::path& path) {
  std::unique_ptr<PluginLibrary> plugin(new PluginLibrary());
  plugin->library_ = open_library(path);
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
  plugin->reports_abi_ = table->struct_size >= BP_STRUCT_SIZE(bp_plugin_api, abi_minor);
  if (plugin->reports_abi_ && table->abi_major != BP_ABI_VERSION_MAJOR) {
    throw LoadError("plugin ABI " + abi_string(table->abi_major, table->abi_minor) +
                    " is incompatible with this core's ABI " +
                    abi_string(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR) +
                    " (major versions differ)");
  }
  if (!read_abi_struct(table, BP_PLUGIN_API_SIZE_1_0, plugin->api_)) {
    throw LoadError("plugin table is " + std::to_string(table->struct_size) +
                    " bytes, smaller than ABI 1.0's " + std::to_string(BP_PLUGIN_API_SIZE_1_0));
  }
  if (plugin->api_.init == nullptr) throw LoadError("plugin table has no init function");
  return plugin;
}

std::vector<RegisteredKernel> PluginLibrary::init(bp_host_context context, std::string owner,
                                                  RegistrationHandler& handler) {
  host_context_ = std::move(context);
  host_api_ = make_host_api(&host_context_);
  bp_registrar_context registrations;
  registrations.owner = std::move(owner);
  registrations.handler = &handler;
  const bp_registrar registrar = make_registrar(&registrations);
  StatusPtr status = adopt(api_.init(&host_api_, &registrar, &state_));
  if (status) {
    throw LoadError("init failed (" + std::string(status_code_name(status->code)) +
                    "): " + status->message);
  }
  initialized_ = true;  // from here on, the destructor calls shutdown
  if (!registrations.first_error.empty()) {
    throw LoadError("init registered something invalid: " + registrations.first_error);
  }
  return std::move(registrations.kernels);
}

PluginLibrary::~PluginLibrary() {
  if (initialized_ && api_.shutdown != nullptr) api_.shutdown(state_);
}

}  // namespace backplane::detail

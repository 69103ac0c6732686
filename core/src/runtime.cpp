// Runtime::open: discover manifests, load each selected plugin, freeze what they registered.
#include <backplane/error.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/runtime/runtime.hpp>
#include <backplane/runtime/sim_topology.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

#include "discovery.hpp"
#include "env.hpp"
#include "isolation/probe.hpp"
#include "loaded_plugin.hpp"
#include "manifest.hpp"
#include "plugin_host/logger.hpp"
#include "plugin_safety/library_location.hpp"
#include "plugin_safety/permissions.hpp"
#include "registry.hpp"
#include "simulated_visibility.hpp"

namespace backplane {

const char* to_string(PluginStatus status) {
  switch (status) {
    case PluginStatus::kLoaded:
      return "loaded";
    case PluginStatus::kFailed:
      return "failed";
    case PluginStatus::kDisabled:
      return "disabled";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, PluginStatus status) {
  return os << to_string(status);
}

namespace {

// "1" or "0" (empty reads as 0).
bool parse_switch(const std::string& text, const char* variable) {
  if (text == "1") return true;
  if (text.empty() || text == "0") return false;
  throw InvalidArgument(std::string(variable) + "='" + text + "' is not a switch; expected 1 or 0");
}

// Seconds, e.g. "10" or "0.5"; positive, at most a day.
std::chrono::milliseconds parse_timeout(const std::string& text, const char* variable) {
  double seconds = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || !(seconds > 0) || seconds > 86400) {
    throw InvalidArgument(std::string(variable) + "='" + text +
                          "' is not a timeout; expected seconds above 0 and at most 86400, "
                          "e.g. 10 or 0.5");
  }
  return std::chrono::milliseconds(std::max<long long>(1, std::llround(seconds * 1000)));
}

}  // namespace

RuntimeOptions RuntimeOptions::from_environment() {
  RuntimeOptions options;
  if (auto value = detail::secure_env("BACKPLANE_PLUGIN_PATH")) {
    options.plugin_path.emplace();
    for (const std::string& item : detail::split_list(*value, ':')) {
      options.plugin_path->emplace_back(item);
    }
  }
  if (auto value = detail::secure_env("BACKPLANE_ADD_PLUGIN_PATH")) {
    for (const std::string& item : detail::split_list(*value, ':')) {
      options.add_plugin_path.emplace_back(item);
    }
  }
  if (auto value = detail::secure_env("BACKPLANE_PLUGINS")) {
    options.only_plugins = detail::split_list(*value, ',');
  }
  if (auto value = detail::secure_env("BACKPLANE_DISABLE_PLUGINS")) {
    options.disabled_plugins = detail::split_list(*value, ',');
  }
  if (auto value = detail::secure_env("BACKPLANE_LOG")) {
    options.log_level = parse_log_level(*value, "BACKPLANE_LOG");
  }
  if (auto value = detail::secure_env("BACKPLANE_INSECURE_PLUGINS")) {
    options.strict_plugin_permissions = !parse_switch(*value, "BACKPLANE_INSECURE_PLUGINS");
  }
  if (auto value = detail::secure_env("BACKPLANE_ISOLATE")) {
    options.isolate = parse_switch(*value, "BACKPLANE_ISOLATE");
  }
  if (auto value = detail::secure_env("BACKPLANE_ISOLATE_TIMEOUT")) {
    options.isolate_timeout = parse_timeout(*value, "BACKPLANE_ISOLATE_TIMEOUT");
  }
  if (auto value = detail::secure_env("BACKPLANE_SIM_TOPOLOGY"); value && !value->empty()) {
    options.sim_topology = *value;
  }
  return options;
}

struct Runtime::Impl {
  std::unique_ptr<detail::Logger> logger;  // outlives the plugins, which log through it
  std::vector<std::filesystem::path> search_path;
  std::vector<PluginInfo> plugins;
  detail::Registry registry;
  std::vector<std::unique_ptr<detail::LoadedPlugin>> loaded;

  ~Impl() {
    // Reverse load order: a later plugin may use what an earlier one set up.
    while (!loaded.empty()) loaded.pop_back();
  }

  const detail::LoadedPlugin* find_loaded(const std::string& name) const {
    for (const auto& plugin : loaded) {
      if (plugin->name() == name) return plugin.get();
    }
    return nullptr;
  }

  void load_all(const RuntimeOptions& options);
  void load_one(const std::filesystem::path& manifest_path, const RuntimeOptions& options);
  // Throws InvalidArgument when the asked-for simulation did not come up.
  void check_simulation(const std::string& asked, const std::filesystem::path& file) const;
};

namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Why the manifest or its library must not be loaded: a relative library_path that a symbolic
// link takes out of the manifest's folder, or (unless turned off) files or folders that others
// could have written. Empty when they may be loaded.
std::string check_plugin_files(const std::filesystem::path& manifest_path,
                               const detail::Manifest& manifest, const RuntimeOptions& options) {
  if (manifest.library_is_relative) {
    if (std::string escape =
            detail::resolved_library_escape_reason(manifest_path.parent_path(), manifest.library);
        !escape.empty()) {
      return escape;
    }
  }
  if (!options.strict_plugin_permissions) return {};
  std::string unsafe = detail::unsafe_path_reason(manifest_path);
  std::error_code ec;
  if (unsafe.empty() && std::filesystem::exists(manifest.library, ec)) {
    unsafe = detail::unsafe_path_reason(manifest.library);
  }
  if (unsafe.empty()) return {};
  return "refused: " + unsafe +
         "; a plugin runs with this process's rights, so only its owner (root or this user) may "
         "be able to change it (set BACKPLANE_INSECURE_PLUGINS=1 to load it anyway)";
}

detail::PluginSettings settings_for(const RuntimeOptions& options, const std::string& plugin) {
  const auto it = options.plugin_settings.find(plugin);
  return it == options.plugin_settings.end() ? detail::PluginSettings{} : it->second;
}

}  // namespace

void Runtime::Impl::load_one(const std::filesystem::path& manifest_path,
                             const RuntimeOptions& options) {
  PluginInfo info;
  info.manifest = manifest_path;
  info.name = manifest_path.stem().string();
  auto fail = [&](const std::string& reason) {
    info.status = PluginStatus::kFailed;
    info.error = reason;
    logger->log(LogLevel::kWarn,
                "plugin '" + info.name + "' (" + manifest_path.string() + ") skipped: " + reason);
    plugins.push_back(std::move(info));
  };

  detail::Manifest manifest;
  try {
    manifest = detail::read_manifest(manifest_path);
  } catch (const detail::ManifestError& e) {
    return fail(std::string("bad manifest: ") + e.what());
  }
  info.name = manifest.name;
  info.library = manifest.library;
  info.abi_version = std::to_string(manifest.abi_major) + "." + std::to_string(manifest.abi_minor);
  info.device_types = manifest.device_types;

  if (options.only_plugins && !contains(*options.only_plugins, manifest.name)) {
    info.status = PluginStatus::kDisabled;
    info.error = "not among the selected plugins (" + internal::join(*options.only_plugins) + ")";
  } else if (contains(options.disabled_plugins, manifest.name)) {
    info.status = PluginStatus::kDisabled;
    info.error = "disabled by request";
  }
  if (info.status == PluginStatus::kDisabled) {
    logger->log(LogLevel::kInfo, "plugin '" + info.name + "' " + info.error);
    plugins.push_back(std::move(info));
    return;
  }
  for (const PluginInfo& earlier : plugins) {
    if (earlier.name == manifest.name && earlier.status == PluginStatus::kLoaded) {
      return fail("a plugin named '" + manifest.name + "' is already loaded from " +
                  earlier.manifest.string());
    }
  }

  if (std::string refusal = check_plugin_files(manifest_path, manifest, options);
      !refusal.empty()) {
    return fail(refusal);
  }
  if (options.isolate) {
    const detail::ProbeOutcome probe = detail::probe_in_child(
        manifest, registry, options.isolate_timeout, settings_for(options, manifest.name));
    if (!probe.passed) return fail(probe.reason);
    logger->log(LogLevel::kDebug, "plugin '" + info.name + "' passed its isolated probe");
  }

  detail::Registry registered;
  try {
    auto plugin = detail::LoadedPlugin::load(manifest, *logger, registry, registered,
                                             settings_for(options, manifest.name));
    info.version = plugin->version();
    info.abi_version = plugin->abi_version();
    loaded.push_back(std::move(plugin));
  } catch (const detail::LoadError& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("unexpected error while loading: ") + e.what());
  }

  detail::apply_simulated_visibility(registered, detail::secure_env);
  for (const BackendInfo& backend : registered.backends) {
    logger->log(
        LogLevel::kInfo,
        "backend '" + backend.type + "' from plugin '" + backend.plugin + "': " +
            (backend.available ? "available" : "unavailable: " + backend.unavailable_reason));
  }
  registry.commit(std::move(registered));
  info.status = PluginStatus::kLoaded;
  logger->log(LogLevel::kInfo, "plugin '" + info.name + "' " + info.version + " loaded from " +
                                   info.library.string());
  plugins.push_back(std::move(info));
}

void Runtime::Impl::load_all(const RuntimeOptions& options) {
  search_path = detail::plugin_search_path(options);
  for (const std::filesystem::path& entry : search_path) {
    logger->log(LogLevel::kDebug, "plugin search path: " + entry.string());
  }
  for (const std::filesystem::path& manifest : detail::find_manifests(search_path, *logger)) {
    load_one(manifest, options);
  }
  if (options.only_plugins) {
    for (const std::string& wanted : *options.only_plugins) {
      const bool found = std::any_of(plugins.begin(), plugins.end(),
                                     [&](const PluginInfo& p) { return p.name == wanted; });
      if (!found) {
        logger->log(LogLevel::kWarn,
                    "plugin '" + wanted + "' was selected but no manifest names it");
      }
    }
  }
}

Runtime::Runtime(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

void Runtime::Impl::check_simulation(const std::string& asked,
                                     const std::filesystem::path& file) const {
  const std::string what = "sim topology '" + asked + "' (" + file.string() + ")";
  const auto sim = std::find_if(plugins.begin(), plugins.end(),
                                [](const PluginInfo& p) { return p.name == "sim"; });
  if (sim == plugins.end()) {
    throw InvalidArgument(what +
                          " was asked for, but no plugin manifest named 'sim' is on the "
                          "plugin search path");
  }
  if (sim->status != PluginStatus::kLoaded) {
    throw InvalidArgument(what + " was asked for, but the sim plugin " +
                          (sim->status == PluginStatus::kDisabled ? "is " : "failed: ") +
                          sim->error);
  }
}

Runtime Runtime::open(const RuntimeOptions& options) {
  auto impl = std::make_shared<Impl>();
  impl->logger = std::make_unique<detail::Logger>(options.log_level, options.log_sink);
  // The topology reaches the sim plugin as a file; the name is resolved here, once.
  RuntimeOptions effective = options;
  std::optional<std::filesystem::path> asked_file;
  if (options.sim_topology) {
    asked_file = resolve_sim_topology(*options.sim_topology, "sim topology");
    effective.plugin_settings["sim"]["topology"] = asked_file->string();
  } else if (auto value = detail::secure_env("BACKPLANE_SIM_TOPOLOGY");
             value && !value->empty() && !effective.plugin_settings["sim"].count("topology")) {
    std::string file = *value;
    try {
      file = resolve_sim_topology(*value, "BACKPLANE_SIM_TOPOLOGY").string();
    } catch (const InvalidArgument&) {
      // Passed on as it is: the sim plugin fails on it and says why; the others load.
    }
    effective.plugin_settings["sim"]["topology"] = file;
  }
  impl->load_all(effective);
  if (asked_file) impl->check_simulation(*options.sim_topology, *asked_file);
  return Runtime(std::move(impl));
}

const std::vector<std::filesystem::path>& Runtime::search_path() const {
  return impl_->search_path;
}
const std::vector<PluginInfo>& Runtime::plugins() const {
  return impl_->plugins;
}
const std::vector<BackendInfo>& Runtime::backends() const {
  return impl_->registry.backends;
}
const std::vector<DeviceInfo>& Runtime::devices() const {
  return impl_->registry.devices;
}

std::vector<DeviceInfo> Runtime::devices(std::string_view type) const {
  std::vector<DeviceInfo> out;
  for (const DeviceInfo& d : impl_->registry.devices) {
    if (d.device.type() == type) out.push_back(d);
  }
  return out;
}

std::vector<std::string> Runtime::device_types() const {
  std::vector<std::string> types = builtin_device_types();
  for (const BackendInfo& backend : impl_->registry.backends) {
    if (!contains(types, backend.type)) types.push_back(backend.type);
  }
  return types;
}

Device Runtime::parse_device(std::string_view text) const {
  return backplane::parse_device(text, device_types());
}

const BackendInfo* Runtime::backend(std::string_view type) const {
  return impl_->registry.find_backend(std::string(type));
}

const DeviceInfo& Runtime::device(const Device& wanted) const {
  const int index = wanted.index().value_or(0);
  std::vector<std::string> present;
  for (const DeviceInfo& d : impl_->registry.devices) {
    if (d.device.type() != wanted.type()) continue;
    if (*d.device.index() == index) return d;
    present.push_back(d.device.str());
  }
  if (const BackendInfo* b = backend(wanted.type()); b != nullptr && !b->available) {
    throw Unavailable("device " + wanted.str() + " is unavailable: " + b->unavailable_reason);
  }
  if (present.empty()) {
    throw NotFound("no " + wanted.type() + " devices are present, so " + wanted.str() +
                   " cannot be used");
  }
  throw NotFound("device " + wanted.str() + " does not exist; present: " + internal::join(present));
}

std::vector<KernelInfo> Runtime::kernels() const {
  std::vector<KernelInfo> out;
  for (const detail::RegisteredKernel& k : impl_->registry.kernels) out.push_back(k.info);
  return out;
}

KernelMapping Runtime::default_kernel_mapping() const {
  KernelMapping mapping;
  for (const KernelMappingEntry& entry : impl_->registry.layer_kernels) mapping.add(entry);
  return mapping;
}

HubDevice Runtime::hub_device(const Device& wanted) const {
  const DeviceInfo& info = device(wanted);
  HubDevice out;
  const BackendInfo* owner = backend(info.device.type());
  out.key = owner != nullptr ? owner->hub_key : info.device.type();
  if (info.compute_capability) {
    out.capability = info.compute_capability->major * 10 + info.compute_capability->minor;
  }
  return out;
}

AttentionKernel Runtime::attention_kernel(const Device& wanted,
                                          std::string_view implementation) const {
  const DeviceInfo& info = device(wanted);
  const BackendInfo* serving = backend(info.device.type());
  std::vector<std::string> offered;
  for (const detail::RegisteredKernel& k : impl_->registry.kernels) {
    if (k.info.op != kAttentionForward || k.info.device_type != info.device.type() ||
        serving == nullptr || k.info.plugin != serving->plugin) {
      continue;
    }
    if (k.info.implementation != implementation) {
      offered.push_back(k.info.implementation);
      continue;
    }
    if (std::string why = kernel_mismatch(k.info, info); !why.empty()) throw Unavailable(why);
    // The same plugin's backward of this implementation, for training (ABI 1.6).
    bp_attention_backward_fn backward = nullptr;
    void* backward_context = nullptr;
    for (const detail::RegisteredKernel& b : impl_->registry.kernels) {
      if (b.info.op == kAttentionBackward && b.info.implementation == implementation &&
          b.info.device_type == k.info.device_type && b.info.plugin == k.info.plugin) {
        backward = reinterpret_cast<bp_attention_backward_fn>(b.function);
        backward_context = b.context;
        break;
      }
    }
    return AttentionKernel(k.info, reinterpret_cast<bp_attention_forward_fn>(k.function), k.context,
                           impl_, backward, backward_context);
  }
  throw NotFound("no " + std::string(kAttentionForward) + " kernel '" +
                 std::string(implementation) + "' for " + info.device.str() +
                 "; its backend offers " +
                 (offered.empty() ? std::string("none") : internal::join(offered)));
}

AttentionResolution Runtime::resolve_attention(const Device& wanted,
                                               std::optional<std::string_view> requested,
                                               const AttentionQuery& query) const {
  const DeviceInfo& info = device(wanted);
  AttentionEnvironment env;
  for (const BackendInfo& b : impl_->registry.backends) {
    if (b.available && b.replaced_by.empty()) env.available_device_types.push_back(b.type);
  }
  env.dtype = query.dtype;
  env.head_dim = query.head_dim;
  env.model_class = query.model_class;
  env.hub_installed = query.hub_installed;
  return backplane::resolve_attention(info, kernels(), requested, env);
}

AttentionKernel Runtime::attention_kernel(const AttentionResolution& resolution) const {
  if (resolution.source == AttentionResolution::Source::kHub || !resolution.kernel) {
    throw Unavailable("attn_implementation \"" + resolution.implementation +
                      "\" is served by the Hub kernel " +
                      (resolution.hub ? resolution.hub->repo : resolution.implementation) +
                      ", and backplane cannot load Hub kernels yet");
  }
  return attention_kernel(resolution.device, resolution.kernel->implementation);
}

std::optional<MemoryInfo> Runtime::memory_info(const Device& wanted) const {
  const DeviceInfo& info = device(wanted);
  const detail::LoadedPlugin* plugin = impl_->find_loaded(info.plugin);
  if (plugin == nullptr || !plugin->has_memory_info()) return std::nullopt;
  MemoryInfo memory;
  detail::StatusPtr status = detail::adopt(plugin->memory_info(
      info.device.type(), *info.device.index(), &memory.free_bytes, &memory.total_bytes));
  if (status) {
    impl_->logger->log(LogLevel::kWarn, "plugin '" + info.plugin + "': memory_info(" +
                                            info.device.str() + ") failed: " + status->message);
    return std::nullopt;
  }
  return memory;
}

}  // namespace backplane

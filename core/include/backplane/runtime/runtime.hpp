// The runtime: discovers plugin manifests, loads plugins, and holds an immutable snapshot of
// what they registered. Queries are const and safe from many threads. Copies of a Runtime share
// one snapshot; plugin libraries stay loaded until the last copy is destroyed.
#pragma once

#include <backplane/export.hpp>
#include <backplane/rules/attention.hpp>
#include <backplane/rules/kernel_mapping.hpp>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/kernels.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

// "error" | "warn" | "info" | "debug"; throws InvalidArgument naming `source` otherwise.
BACKPLANE_API LogLevel parse_log_level(std::string_view text, std::string_view source);
BACKPLANE_API const char* to_string(LogLevel level);

using LogSink = std::function<void(LogLevel, const std::string& line)>;

struct BACKPLANE_API RuntimeOptions {
  // Replaces the whole search path (BACKPLANE_PLUGIN_PATH). Entries are folders of manifests or
  // manifest files.
  std::optional<std::vector<std::filesystem::path>> plugin_path;
  // Searched before the default folder (BACKPLANE_ADD_PLUGIN_PATH); ignored with plugin_path.
  std::vector<std::filesystem::path> add_plugin_path;
  // Load only these plugins, by name (BACKPLANE_PLUGINS).
  std::optional<std::vector<std::string>> only_plugins;
  // Load all but these (BACKPLANE_DISABLE_PLUGINS).
  std::vector<std::string> disabled_plugins;
  LogLevel log_level = LogLevel::kWarn;  // BACKPLANE_LOG
  LogSink log_sink;                      // empty: "backplane: <level>: ..." lines on stderr
  // Refuse plugin files and folders that users other than their owner and root could write
  // (as sshd's StrictModes). BACKPLANE_INSECURE_PLUGINS=1 turns the check off.
  bool strict_plugin_permissions = true;
  // Probe each plugin in a child process (fork: load, init, shutdown) before loading it here; a
  // plugin whose probe crashes, exits or outlasts isolate_timeout is failed with that reason
  // (BACKPLANE_ISOLATE=1, BACKPLANE_ISOLATE_TIMEOUT=<seconds>). Open the runtime before the
  // process starts threads: the child is a fork, see README "Sanitizers and isolation".
  bool isolate = false;
  std::chrono::milliseconds isolate_timeout{10000};
  // A simulated machine for the sim plugin: a shipped topology's name ("h100x8") or a topology
  // file (sim_topology.hpp); BACKPLANE_SIM_TOPOLOGY in from_environment(). open() resolves it
  // and throws InvalidArgument when it is neither, or when the sim plugin then fails on it or is
  // not loaded: a simulation that was asked for never silently becomes the real machine. Unset
  // (options built by the host itself), a BACKPLANE_SIM_TOPOLOGY in the environment still
  // reaches the sim plugin, and a bad one only fails that plugin, as any plugin's failure does.
  std::optional<std::string> sim_topology;
  // Values a plugin reads by key through bp_host_api.setting (ABI 1.5): plugin name -> key ->
  // value. open() sets sim_topology's file as the sim plugin's "topology".
  std::map<std::string, std::map<std::string, std::string>> plugin_settings;

  // Options from the BACKPLANE_* variables, read with secure_getenv (so ignored in privileged
  // processes). Throws InvalidArgument for a malformed value, naming the variable.
  static RuntimeOptions from_environment();
};

// <folder of libbackplane>/backplane/plugins: where installed and in-tree plugins live.
BACKPLANE_API std::filesystem::path default_plugin_directory();

class BACKPLANE_API Runtime {
 public:
  // Never fails because of a plugin: a plugin that fails is recorded with its reason.
  static Runtime open(const RuntimeOptions& options = RuntimeOptions::from_environment());

  // Folders and files searched, in order.
  const std::vector<std::filesystem::path>& search_path() const;
  // Every manifest found, in search order, with what became of it.
  const std::vector<PluginInfo>& plugins() const;
  // Every device type registered by a loaded plugin, available or not.
  const std::vector<BackendInfo>& backends() const;
  // Devices of every available backend, grouped by backend in load order, then by index.
  const std::vector<DeviceInfo>& devices() const;
  std::vector<DeviceInfo> devices(std::string_view type) const;

  // The builtin names plus every type a loaded plugin registered.
  std::vector<std::string> device_types() const;
  // parse_device against device_types().
  Device parse_device(std::string_view text) const;
  // The device a string names; an index-less string means index 0. Throws NotFound naming the
  // devices that exist, or Unavailable with the backend's reason.
  const DeviceInfo& device(const Device& device) const;
  const BackendInfo* backend(std::string_view type) const;

  // Every kernel a loaded plugin registered (ABI 1.3).
  std::vector<KernelInfo> kernels() const;
  // The plugins' default layer kernels (ABI 1.4), in load order: the mapping a user's
  // KernelConfig extends or replaces (kernel_mapping.hpp).
  KernelMapping default_kernel_mapping() const;
  // How `device` looks up layer kernels: its backend's Hub key and its compute capability.
  // Throws as device() does.
  HubDevice hub_device(const Device& device) const;
  // The attention_forward kernel `implementation` of the backend that serves `device`, checked
  // against the device. Throws NotFound naming what the backend has, or Unavailable with why
  // the kernel cannot run there.
  AttentionKernel attention_kernel(const Device& device, std::string_view implementation) const;

  // attn_implementation for `device` (attention.hpp): resolve_attention over this snapshot's
  // kernels, with the device types available here. nullopt asks for the default.
  AttentionResolution resolve_attention(const Device& device,
                                        std::optional<std::string_view> requested = std::nullopt,
                                        const AttentionQuery& query = {}) const;
  // The kernel a native resolution names, ready to call. Throws Unavailable naming the Hub repo
  // for a Hub resolution: Hub kernels cannot be loaded yet.
  AttentionKernel attention_kernel(const AttentionResolution& resolution) const;

  // Free and total memory now, asked from the plugin (ABI 1.1); nullopt when the plugin cannot
  // tell. Throws NotFound for an unknown device.
  std::optional<MemoryInfo> memory_info(const Device& device) const;

 private:
  struct Impl;
  explicit Runtime(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace backplane

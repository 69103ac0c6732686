#include "json_report.hpp"

#include <backplane/plugin.h>

namespace hwprobe {

using nlohmann::json;

std::string device_label(const backplane::Device& device) {
  return device.type() == "cpu" ? device.type() : device.str();
}

std::vector<std::string> capability_names(uint64_t capabilities) {
  static const std::pair<uint64_t, const char*> names[] = {
      {backplane::kCapFp16, "fp16"}, {backplane::kCapBf16, "bf16"},
      {backplane::kCapTf32, "tf32"}, {backplane::kCapFp8, "fp8"},
      {backplane::kCapFp64, "fp64"}, {backplane::kCapUnifiedMemory, "unified_memory"},
  };
  std::vector<std::string> out;
  for (const auto& [bit, name] : names) {
    if (capabilities & bit) out.emplace_back(name);
  }
  return out;
}

namespace {

json nullable(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json property_value(const backplane::PropertyValue& value) {
  return std::visit([](const auto& v) { return json(v); }, value);
}

}  // namespace

json device_json(const backplane::DeviceInfo& d) {
  json properties = json::object();
  for (const backplane::Property& p : d.properties) properties[p.name] = property_value(p.value);
  return {
      {"device", device_label(d.device)},
      {"type", d.device.type()},
      {"index", *d.device.index()},
      {"physical_index", d.physical_index >= 0 ? json(d.physical_index) : json(nullptr)},
      {"name", d.name},
      {"plugin", d.plugin},
      {"backend", d.plugin},
      {"vendor", nullable(d.vendor)},
      {"uuid", nullable(d.uuid)},
      {"pci_bus_id", nullable(d.pci_bus_id)},
      {"arch", nullable(d.arch)},
      {"compute_capability",
       d.compute_capability ? json(d.compute_capability->str()) : json(nullptr)},
      {"memory_total", d.memory_total},
      {"capabilities", capability_names(d.capabilities)},
      {"simulated", d.simulated},
      {"visibility_variable", nullable(d.visibility_variable)},
      {"properties", properties},
  };
}

json backend_json(const backplane::BackendInfo& b) {
  return {
      {"type", b.type},
      {"plugin", b.plugin},
      {"available", b.available},
      {"reason", b.available ? json(nullptr) : json(b.unavailable_reason)},
      {"hub_key", b.hub_key},
      {"collective_backend", nullable(b.collective_backend)},
      {"training_priority", b.training_priority},
      {"accelerator", b.accelerator},
      {"automatic_placement", b.automatic_placement},
      {"simulated", b.simulated},
      {"replaced_by", nullable(b.replaced_by)},
      {"visibility_notes", b.visibility_notes},
  };
}

json plugin_json(const backplane::PluginInfo& p) {
  return {
      {"name", p.name},
      {"manifest", p.manifest.string()},
      {"library", p.library.empty() ? json(nullptr) : json(p.library.string())},
      {"version", nullable(p.version)},
      {"abi_version", nullable(p.abi_version)},
      {"device_types", p.device_types},
      {"status", backplane::to_string(p.status)},
      {"error", nullable(p.error)},
  };
}

json kernel_json(const backplane::KernelInfo& k) {
  return {
      {"op", k.op},
      {"implementation", k.implementation},
      {"device_type", k.device_type},
      {"plugin", k.plugin},
      {"min_compute_capability",
       k.min_compute_capability ? json(k.min_compute_capability->str()) : json(nullptr)},
      {"dtypes", k.dtypes},
      {"max_head_dim", k.max_head_dim > 0 ? json(k.max_head_dim) : json(nullptr)},
  };
}

json layer_kernels_json(const backplane::Runtime& runtime) {
  const backplane::KernelMapping mapping = runtime.default_kernel_mapping();
  const auto choice_json = [](const backplane::LayerKernelChoice& choice) -> json {
    if (!choice.entry) return {{"kernel", nullptr}, {"reason", choice.reason}};
    return {{"kernel", choice.entry->kernel.str()},
            {"source", choice.entry->source},
            {"matched_mode", choice.matched_mode->str()}};
  };
  json rows = json::array();
  for (const auto& d : runtime.devices()) {
    const backplane::HubDevice hub = runtime.hub_device(d.device);
    for (const std::string& layer : mapping.layers()) {
      rows.push_back({{"device", device_label(d.device)},
                      {"layer", layer},
                      {"inference",
                       choice_json(mapping.lookup(layer, hub, backplane::KernelMode::inference()))},
                      {"training", choice_json(mapping.lookup(
                                       layer, hub, backplane::KernelMode::training()))}});
    }
  }
  return rows;
}

json runtime_json(const backplane::Runtime& runtime) {
  json plugins = json::array(), backends = json::array(), devices = json::array(),
       kernels = json::array();
  for (const auto& k : runtime.kernels()) kernels.push_back(kernel_json(k));
  for (const auto& p : runtime.plugins()) plugins.push_back(plugin_json(p));
  for (const auto& b : runtime.backends()) backends.push_back(backend_json(b));
  for (const auto& d : runtime.devices()) devices.push_back(device_json(d));
  return {
      {"backplane_version", BACKPLANE_VERSION_STRING},
      {"abi_version",
       std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR)},
      {"plugins", plugins},
      {"backends", backends},
      {"devices", devices},
      {"kernels", kernels},
      {"layer_kernels", layer_kernels_json(runtime)},
#ifdef HWPROBE_WITH_HUB
      {"hub_variants", hub_variants_json(runtime)},
#endif
  };
}

json plugins_json(const backplane::Runtime& runtime) {
  json path = json::array(), plugins = json::array();
  for (const auto& entry : runtime.search_path()) path.push_back(entry.string());
  for (const auto& p : runtime.plugins()) plugins.push_back(plugin_json(p));
  return {{"search_path", path}, {"plugins", plugins}};
}

}  // namespace hwprobe

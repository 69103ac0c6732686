// The sim plugin: devices described by a topology file (BACKPLANE_SIM_TOPOLOGY) instead of
// found. It registers every device in physical order, flagged simulated; the core then applies
// the vendor's visibility variables to them as the vendor runtime would. Inactive (no types)
// when the variable is unset.
#include <backplane/plugin_sdk.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "device_type.hpp"
#include "topology.hpp"

namespace backplane::sim {
namespace {

uint64_t capabilities_of(const SimDevice& d) {
  if (d.vendor == "nvidia") {
    const int cc = d.compute_capability_major * 10 + d.compute_capability_minor;
    uint64_t caps = BP_CAP_FP64;
    if (cc >= 53) caps |= BP_CAP_FP16;
    if (cc >= 80) caps |= BP_CAP_BF16 | BP_CAP_TF32;
    if (cc >= 89) caps |= BP_CAP_FP8;
    return caps;
  }
  if (d.vendor == "amd") {
    uint64_t caps = BP_CAP_FP16 | BP_CAP_FP64;
    if (d.arch.rfind("gfx90a", 0) == 0 || d.arch.rfind("gfx94", 0) == 0) caps |= BP_CAP_BF16;
    if (d.arch.rfind("gfx94", 0) == 0) caps |= BP_CAP_FP8;
    return caps;
  }
  if (d.type == "mps") return BP_CAP_FP16 | BP_CAP_BF16 | BP_CAP_UNIFIED_MEMORY;
  return BP_CAP_FP16 | BP_CAP_BF16;
}

// The device types the topology's devices answer to. AMD GPUs answer to `rocm`, and to `cuda`
// when no NVIDIA GPU is present, as in PyTorch's ROCm builds.
std::vector<std::string> types_of(const SimDevice& d, bool nvidia_present) {
  if (d.type == "cuda" && d.vendor == "amd") {
    return nvidia_present ? std::vector<std::string>{"rocm"}
                          : std::vector<std::string>{"cuda", "rocm"};
  }
  return {d.type};
}

std::vector<sdk::DeviceSpec> device_specs(const SimDevice& d, const std::string& type,
                                          int& next_index, const std::string& topology_name) {
  sdk::DeviceSpec spec;
  spec.type = type;
  spec.name = d.name;
  spec.vendor = d.vendor;
  spec.uuid = d.uuid;
  spec.pci_bus_id = d.pci_bus_id;
  spec.arch = d.arch;
  spec.compute_capability_major = d.compute_capability_major;
  spec.compute_capability_minor = d.compute_capability_minor;
  spec.memory_total = d.memory;
  spec.capabilities = capabilities_of(d);
  spec.simulated = true;
  if (d.multiprocessors > 0) spec.properties.push_back({"multiprocessors", d.multiprocessors});
  if (d.clock_mhz > 0) spec.properties.push_back({"clock_mhz", d.clock_mhz});
  if (d.sub_devices > 0) spec.properties.push_back({"sub_devices", d.sub_devices});
  if (!topology_name.empty()) spec.properties.push_back({"topology", topology_name});

  // Neuron's unit of visibility and placement is the NeuronCore: one device per core.
  const int64_t units = d.type == "neuron" ? d.cores : 1;
  std::vector<sdk::DeviceSpec> out;
  for (int64_t core = 0; core < units; ++core) {
    sdk::DeviceSpec unit = spec;
    if (d.type == "neuron") {
      unit.name = d.name + " NeuronCore " + std::to_string(core);
      unit.memory_total = d.memory / static_cast<uint64_t>(units);
    }
    unit.index = unit.physical_index = next_index++;
    out.push_back(std::move(unit));
  }
  return out;
}

class SimPlugin {
 public:
  explicit SimPlugin(sdk::Host host) : host_(host) {}

  void register_all(sdk::Registrar& registrar) {
    // A 1.5 host resolves the topology (RuntimeOptions::sim_topology or BACKPLANE_SIM_TOPOLOGY,
    // a shipped name or a file) and passes the file; an older one leaves the variable to us.
    std::string path;
    std::string source = "sim topology";
    if (host_.has_settings()) {
      path = host_.setting("topology").value_or("");
    } else if (const char* value = secure_getenv("BACKPLANE_SIM_TOPOLOGY"); value != nullptr) {
      path = value;
      source = "BACKPLANE_SIM_TOPOLOGY";
    }
    if (path.empty()) {
      host_.debug("inactive: no topology (RuntimeOptions::sim_topology, BACKPLANE_SIM_TOPOLOGY)");
      return;
    }
    Topology topology;
    try {
      topology = read_topology(path);
    } catch (const TopologyError& e) {
      throw sdk::Error(BP_INVALID_ARGUMENT, source + " " + path + ": " + e.what());
    }
    bool nvidia_present = false;
    for (const SimDevice& d : topology.devices) nvidia_present |= d.vendor == "nvidia";

    // Types in order of first appearance, each with its devices in physical order.
    std::vector<std::string> order;
    std::map<std::string, std::vector<sdk::DeviceSpec>> devices;
    std::map<std::string, int> next_index;
    std::map<std::string, std::string> hub_key;
    for (const SimDevice& d : topology.devices) {
      for (const std::string& type : types_of(d, nvidia_present)) {
        if (devices.find(type) == devices.end()) order.push_back(type);
        for (sdk::DeviceSpec& spec : device_specs(d, type, next_index[type], topology.name)) {
          devices[type].push_back(std::move(spec));
        }
        if (d.vendor == "amd") hub_key[type] = "rocm";
      }
    }
    for (const std::string& type : order) {
      // As the type's real backend registers it (an AMD GPU as cuda keeps rocm's Hub key).
      sdk::DeviceTypeSpec spec = backends::device_type_spec(type);
      if (hub_key.count(type)) spec.hub_key = hub_key[type];
      spec.flags |= BP_TYPE_SIMULATED;
      spec.available = true;
      registrar.add(spec);
      for (const sdk::DeviceSpec& device : devices[type]) registrar.add(device);
    }
    host_.info("simulating " + std::to_string(topology.devices.size()) + " devices from " + path);
  }

 private:
  sdk::Host host_;
};

}  // namespace
}  // namespace backplane::sim

BACKPLANE_PLUGIN(backplane::sim::SimPlugin, "sim", "0.1.0")

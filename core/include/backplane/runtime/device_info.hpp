// What a runtime knows about devices, backends and plugins: plain values, copied out of the
// registry snapshot.
#pragma once

#include <backplane/rules/device.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace backplane {

using PropertyValue = std::variant<std::string, int64_t, double, bool, std::vector<std::string>>;

struct Property {
  std::string name;
  PropertyValue value;
};

struct ComputeCapability {
  int major = 0;
  int minor = 0;
  std::string str() const { return std::to_string(major) + "." + std::to_string(minor); }
  friend bool operator<(const ComputeCapability& a, const ComputeCapability& b) {
    return a.major != b.major ? a.major < b.major : a.minor < b.minor;
  }
  friend bool operator==(const ComputeCapability& a, const ComputeCapability& b) {
    return a.major == b.major && a.minor == b.minor;
  }
};

// Capability bits, the same values as bp_device_capability in the plugin ABI.
enum Capability : uint64_t {
  kCapFp16 = 1u << 0,
  kCapBf16 = 1u << 1,
  kCapTf32 = 1u << 2,
  kCapFp8 = 1u << 3,
  kCapFp64 = 1u << 4,
  kCapUnifiedMemory = 1u << 5,
};

struct DeviceInfo {
  Device device{"cpu", 0};  // always with an index: "cuda:0"
  std::string plugin;       // the plugin that registered it
  std::string name;
  std::string vendor;
  std::string uuid;
  std::string pci_bus_id;
  std::string arch;
  std::optional<ComputeCapability> compute_capability;
  int physical_index = -1;  // before visibility variables; -1: unknown
  uint64_t memory_total = 0;
  uint64_t capabilities = 0;  // Capability bits
  bool simulated = false;
  std::vector<Property> properties;
  std::string visibility_variable;  // what mapped physical_index to the index; empty: nothing

  bool has(Capability c) const { return (capabilities & c) != 0; }
  // The property of that name, or nullptr.
  const Property* property(std::string_view property_name) const {
    for (const Property& p : properties) {
      if (p.name == property_name) return &p;
    }
    return nullptr;
  }
};

// One device type as provided by one plugin.
struct BackendInfo {
  std::string type;
  std::string plugin;
  std::string hub_key;
  std::string collective_backend;  // empty: none
  int training_priority = 0;       // lower first; 0: never chosen automatically
  bool accelerator = false;
  bool automatic_placement = false;
  bool available = false;
  std::string unavailable_reason;
  bool simulated = false;  // devices described by a topology, not found
  // The plugin whose backend of the same type took this one's place; empty while active.
  // A simulated backend replaces a real one; an available one replaces an unavailable one.
  std::string replaced_by;
  // How the visibility variables were applied, one step per line (simulated backends; real
  // vendor runtimes apply them out of sight).
  std::vector<std::string> visibility_notes;
};

enum class PluginStatus { kLoaded, kFailed, kDisabled };
// "loaded", "failed", "disabled"; also what GoogleTest prints for one.
BACKPLANE_API std::ostream& operator<<(std::ostream& os, PluginStatus status);

BACKPLANE_API const char* to_string(PluginStatus status);

struct PluginInfo {
  std::string name;  // the manifest's name, or the manifest file's stem when it is unreadable
  std::filesystem::path manifest;
  std::filesystem::path library;          // resolved; empty when the manifest is unreadable
  std::string version;                    // as the plugin reports it; empty unless loaded
  std::string abi_version;                // "1.1": the plugin's when loaded, else the manifest's
  std::vector<std::string> device_types;  // from the manifest
  PluginStatus status = PluginStatus::kFailed;
  std::string error;  // why it failed or was disabled
};

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

}  // namespace backplane

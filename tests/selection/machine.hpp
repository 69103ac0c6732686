// A registry snapshot written as a table, for the selection rules' tests.
#pragma once

#include <backplane/internal/device_types.hpp>
#include <backplane/rules/selection.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace selection_test {

struct Machine {
  std::vector<backplane::BackendInfo> backends;
  std::vector<backplane::DeviceInfo> devices;

  // `count` devices of `type`, as its real plugin registers them (the facts table the plugins
  // register from: training priority, collective backend, automatic placement).
  Machine& add(const std::string& type, int count, uint64_t caps = 0,
               std::optional<backplane::ComputeCapability> cc = std::nullopt,
               bool available = true) {
    const backplane::internal::DeviceTypeFacts* facts =
        backplane::internal::device_type_facts(type);
    const backplane::internal::DeviceTypeFacts t =
        facts != nullptr ? *facts : backplane::internal::DeviceTypeFacts{type, type, type, false,
                                                                         "",   0,    true, false};
    backplane::BackendInfo backend;
    backend.type = type;
    backend.plugin = type == "rocm" ? "rocm" : type;
    backend.collective_backend = std::string(t.collective_backend);
    backend.training_priority = t.training_priority;
    backend.automatic_placement = t.automatic_placement;
    backend.accelerator = t.accelerator;
    backend.available = available;
    if (!available) backend.unavailable_reason = "driver not found";
    backends.push_back(backend);
    if (!available) return *this;
    for (int i = 0; i < count; ++i) {
      backplane::DeviceInfo device;
      device.device = backplane::Device(type, i);
      device.plugin = backend.plugin;
      device.capabilities = caps;
      device.compute_capability = cc;
      devices.push_back(device);
    }
    return *this;
  }
};

constexpr uint64_t kHalf = backplane::kCapFp16 | backplane::kCapBf16;

inline Machine cpu_only() {
  return Machine().add("cpu", 1);
}
inline Machine h100(int n) {
  return Machine().add("cuda", n, kHalf, {{9, 0}}).add("cpu", 1);
}

inline backplane::EnvLookup env(std::map<std::string, std::string> vars = {}) {
  return [vars](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

inline std::vector<std::string> strs(const std::vector<backplane::Device>& devices) {
  std::vector<std::string> out;
  for (const backplane::Device& d : devices) out.push_back(d.str());
  return out;
}

}  // namespace selection_test

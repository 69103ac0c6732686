// A registry snapshot written as a table, for the selection rules' tests.
#pragma once

#include <backplane/selection.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace selection_test {

struct Machine {
  std::vector<backplane::BackendInfo> backends;
  std::vector<backplane::DeviceInfo> devices;

  // `count` devices of `type`, as its real plugin registers them (see the plugins' sources:
  // training priority, collective backend, automatic placement).
  Machine& add(const std::string& type, int count, uint64_t caps = 0,
               std::optional<backplane::ComputeCapability> cc = std::nullopt,
               bool available = true) {
    struct Traits {
      const char* collective;
      int priority;
      bool automatic;
      bool accelerator;
    };
    static const std::map<std::string, Traits> traits = {
        {"cpu", {"gloo", 1000, false, false}},   {"tpu", {"xla", 5, false, true}},
        {"mps", {"", 10, true, true}},           {"xpu", {"xccl", 20, true, true}},
        {"mlu", {"cncl", 30, true, true}},       {"musa", {"mccl", 40, true, true}},
        {"npu", {"hccl", 50, true, true}},       {"hpu", {"hccl", 60, true, true}},
        {"neuron", {"neuron", 70, false, true}}, {"cuda", {"nccl", 80, true, true}},
        {"rocm", {"nccl", 80, true, true}},
    };
    const auto it = traits.find(type);
    const Traits t = it != traits.end() ? it->second : Traits{"", 0, false, true};
    backplane::BackendInfo backend;
    backend.type = type;
    backend.plugin = type == "rocm" ? "rocm" : type;
    backend.collective_backend = t.collective;
    backend.training_priority = t.priority;
    backend.automatic_placement = t.automatic;
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

// Simulated topologies: a JSON file that describes devices a machine does not have, so every
// rule can be dry-run (format: backends/sim/README.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane::sim {

struct SimDevice {
  std::string type;    // cuda, xpu, mps, hpu, npu, mlu, musa, neuron, tpu
  std::string vendor;  // lower case: nvidia, amd, intel, apple, aws, google, huawei, ...
  std::string name;
  uint64_t memory = 0;
  int compute_capability_major = -1;  // cuda (nvidia) only
  int compute_capability_minor = -1;
  std::string uuid;
  std::string pci_bus_id;
  std::string arch;  // "sm_90", "gfx942"; derived for nvidia when absent
  int64_t multiprocessors = 0;
  int64_t clock_mhz = 0;
  int64_t sub_devices = 0;  // xpu tiles
  int64_t cores = 0;        // neuron: NeuronCores per device
};

struct Topology {
  std::string name;
  std::vector<SimDevice> devices;  // in physical (PCI) order
};

class TopologyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws TopologyError naming the device and field and what is accepted.
Topology parse_topology(const std::string& json_text);
Topology read_topology(const std::filesystem::path& file);

const std::vector<std::string>& simulated_types();

}  // namespace backplane::sim
